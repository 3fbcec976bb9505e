package replog

import (
	"context"
	"errors"
	"fmt"
	"time"
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
// offset.
func (l *Log) commitBarrier(ctx context.Context) (uint64, error) {
	backoff := retryFirst
	for {
		off, err := l.submit(ctx, &proposal{barrier: true})
		if err == nil {
			return off, nil
		}
		if ferr := l.failed(); ferr != nil {
			return 0, ferr
		}
		var nl *NotLeaderError
		// No leader would take it: one refused it, or this node knows none
		// (a node that lost its leader may still have sent it there).
		noLeader := errors.As(err, &nl) || l.watch.view().ev.LeaderID == ""
		switch {
		case errors.Is(err, ErrClosed):
			return 0, ErrClosed
		case ctx.Err() != nil && noLeader:
			return 0, fmt.Errorf("replog: barrier: %w (%w)", ErrNoLeader, ctx.Err())
		case ctx.Err() != nil:
			return 0, fmt.Errorf("replog: barrier: %w", ctx.Err())
		case !errors.As(err, &nl) && !errors.Is(err, ErrUnknownOutcome):
			return 0, fmt.Errorf("replog: barrier: %w", err)
		}
		// Nothing was appended (no leader yet), or the leader changed
		// while the barrier was in flight: try again once a leader may be
		// known.
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			if noLeader || l.watch.view().ev.LeaderID == "" {
				return 0, fmt.Errorf("replog: barrier: %w (%w)", ErrNoLeader, ctx.Err())
			}
			return 0, fmt.Errorf("replog: barrier: %w", ctx.Err())
		case <-l.closing:
			t.Stop()
			return 0, ErrClosed
		case <-t.C:
		}
		backoff = min(2*backoff, retryMax)
	}
}

// waitReadable waits until this node's readable high watermark reaches
// target, as a reader would.
func (l *Log) waitReadable(ctx context.Context, target uint64) error {
	for {
		l.hwMu.Lock()
		hw, changed := l.hw, l.hwChanged
		l.hwMu.Unlock()
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
