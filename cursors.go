package replog

import (
	"context"
	"errors"
	"fmt"

	"github.com/replog-io/replog/internal/shell"
	"github.com/replog-io/replog/protocol"
)

// CommitCursor durably records the position of cursor name: next is the
// next offset its consumer will read (Kafka's committed offsets, NATS
// JetStream's durable consumers; docs/protocol.md R65). The position is an
// entry of the replicated log (readers never see it), so Cursor reads it
// back on any node, after fail-overs and restarts, and retention keeps the
// latest position of every cursor however old (R66). It returns once the
// commit is committed. It works on any node; it is retried as an
// idempotent Append is (always, whatever Options.DisableIdempotence), so a
// retried commit never lands after a newer one of this Log.
//
// name is 1 to MaxIDLength bytes: an empty or longer one returns an error
// wrapping ErrInvalidArgument (nothing recorded). Other errors are those
// of Append: ErrUnknownOutcome when ctx ends or the Log closes before the
// outcome is known (the commit may or may not have landed), a
// *NotLeaderError wrapping ctx.Err() while no leader was known, ErrClosed,
// ErrStorageFailed.
func (l *Log) CommitCursor(ctx context.Context, name string, next uint64) error {
	if err := checkName("a cursor name", name); err != nil {
		return err
	}
	r := &request{prod: l.prod}
	var key protocol.Key
	r.seq, key = l.prod.begin("")
	r.ev = shell.CommitCursor(0, key, name, next)
	defer l.prod.end(r.seq)
	_, err := l.appendUntilKnown(ctx, r)
	return err
}

// Cursor returns the position of cursor name: the next offset its consumer
// reads. It reflects every CommitCursor acknowledged before the call, on
// any node: it runs a Barrier first (R50), then reads the position this
// node holds committed. Errors: an error wrapping ErrInvalidArgument if
// name is empty or longer than MaxIDLength; one wrapping ErrNoCursor,
// naming the cursor, if it was never committed; and those of Barrier (ctx,
// ErrClosed, ErrStorageFailed, ErrNoLeader while no leader is known).
func (l *Log) Cursor(ctx context.Context, name string) (uint64, error) {
	if err := checkName("a cursor name", name); err != nil {
		return 0, err
	}
	if err := l.Barrier(ctx); err != nil {
		return 0, err
	}
	// The loop answers a read in the round it takes it: tried once.
	return retry(ctx, l.closing, once(func(err error) error {
		if errors.Is(err, ErrNoCursor) {
			return fmt.Errorf("%w: %q was never committed (as of this node's committed log)", ErrNoCursor, name)
		}
		return err
	}), func() (uint64, error) { return l.submit(ctx, &request{ev: shell.CursorRead(0, name)}) })
}
