package replog

import (
	"context"
	"errors"
	"fmt"

	"github.com/replog-io/replog/internal/shell"
)

// Barrier returns once this node's readers see every append that was
// acknowledged, on any node, before Barrier was called: after it, a Read
// on this node is linearizable with those appends (read-your-writes across
// nodes, etcd's ReadIndex; the way hashicorp/raft's Barrier works). Reads
// without a Barrier are committed and monotonic but may be stale (see
// Read).
//
// It appends a barrier through the log: one control entry without data,
// forwarded to the leader by a follower as an append is (docs/protocol.md
// R50). Once that entry is committed, every append acknowledged before the
// call is at a lower offset; Barrier then waits until this node's readable
// high watermark has passed it. The entry takes an offset that readers
// never see (offsets have gaps, see Read). It costs what a one-record
// Append costs, plus the wait for this node to catch up.
//
// While no leader is known Barrier retries until ctx ends, as Append does;
// a barrier whose outcome is unknown (the leader changed) is simply
// proposed again, since a barrier committed twice does no harm. Errors:
//   - an error wrapping ErrNoLeader and ctx.Err(): ctx ended while no
//     leader would take the barrier, or while this node knew none;
//   - an error wrapping ctx.Err(): ctx ended otherwise (the barrier may
//     have committed; this node had not caught up with it);
//   - ErrClosed: the Log is closed or closing;
//   - an error wrapping ErrStorageFailed or ErrCommittedTruncation: the
//     node stopped serving (see those errors).
func (l *Log) Barrier(ctx context.Context) error {
	off, err := l.commitBarrier(ctx)
	if err != nil {
		return err
	}
	return l.waitReadable(ctx, off+1)
}

// commitBarrier proposes barriers until one commits, and returns its
// offset. A barrier of unknown outcome is simply proposed again (a barrier
// committed twice does no harm), so its end is never unknown.
func (l *Log) commitBarrier(ctx context.Context) (uint64, error) {
	// noLeader: no leader would take the last try, or this node knew none
	// (a node that lost its leader may still have sent it there).
	noLeader := false
	ctxEnded := func(ctxErr error) error {
		if noLeader || l.watch.view().ev.LeaderID == "" {
			return fmt.Errorf("replog: barrier: %w (%w)", ErrNoLeader, ctxErr)
		}
		return fmt.Errorf("replog: barrier: %w", ctxErr)
	}
	pol := retryPolicy{
		judge: func(off uint64, err error, _ bool) (verdict, uint64, error) {
			if ferr := l.failed(); ferr != nil {
				return fail, 0, ferr
			}
			var nl *NotLeaderError
			noLeader = errors.As(err, &nl) || l.watch.view().ev.LeaderID == ""
			switch {
			case errors.Is(err, ErrClosed):
				return fail, 0, ErrClosed
			case ctx.Err() != nil:
				return fail, 0, ctxEnded(ctx.Err())
			case nl == nil && !errors.Is(err, ErrUnknownOutcome):
				return fail, 0, fmt.Errorf("replog: barrier: %w", err)
			}
			// Nothing was appended (no leader yet), or the leader changed
			// while the barrier was in flight: try again once a leader may
			// be known.
			return again, 0, err
		},
		ended: func(_, ctxErr error) error { return ctxEnded(ctxErr) },
	}
	return retry(ctx, l.closing, &pol, func() (uint64, error) {
		return l.submit(ctx, &request{ev: shell.Barrier(0)})
	})
}

// waitReadable waits until this node's readable high watermark reaches
// target, as a reader would.
func (l *Log) waitReadable(ctx context.Context, target uint64) error {
	for {
		hw, changed := l.hwWait()
		if changed == nil {
			return ErrClosed
		}
		if err := l.failed(); err != nil {
			return err
		}
		if hw >= target {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("replog: barrier: %w", ctx.Err())
		}
	}
}
