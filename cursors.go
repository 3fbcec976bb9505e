package replog

import (
	"context"
	"errors"
	"fmt"
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
// name is 1 to MaxIDLength bytes (else ErrTooLarge). Errors are those of
// Append: ErrUnknownOutcome when ctx ends or the Log closes before the
// outcome is known (the commit may or may not have landed), a
// *NotLeaderError wrapping ctx.Err() while no leader was known, ErrClosed,
// ErrStorageFailed.
func (l *Log) CommitCursor(ctx context.Context, name string, next uint64) error {
	if name == "" || len(name) > MaxIDLength {
		return fmt.Errorf("%w: a cursor name is 1 to %d bytes", ErrTooLarge, MaxIDLength)
	}
	p := &proposal{cursor: name, cursorNext: next, prod: l.prod}
	p.seq, p.key = l.prod.begin("")
	defer l.prod.end(p.seq)
	_, err := l.proposeUntilKnown(ctx, p)
	return err
}

// Cursor returns the position of cursor name: the next offset its consumer
// reads. It reflects every CommitCursor acknowledged before the call, on
// any node: it runs a Barrier first (R50), then reads the position this
// node holds committed. Errors: ErrNoCursor if the cursor was never
// committed, and those of Barrier (ctx, ErrClosed, ErrStorageFailed, a
// *NotLeaderError while no leader is known).
func (l *Log) Cursor(ctx context.Context, name string) (uint64, error) {
	if err := l.Barrier(ctx); err != nil {
		return 0, err
	}
	next, err := l.submit(ctx, &proposal{query: name})
	if err != nil && !errors.Is(err, ErrNoCursor) {
		return 0, err
	}
	return next, err
}
