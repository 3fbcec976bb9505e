package replog

import (
	"context"
	"fmt"
)

// WaitReady returns once this node knows a leader and has caught up with
// that leader's high watermark as of the call: its readers then see every
// append acknowledged anywhere before WaitReady was called. Call it after
// Open, before serving reads (instead of polling Status).
//
// It waits, without polling, until the node knows a leader, then runs
// Barrier, which appends one control entry to the log. It is meant for
// start-up; to watch a running node, use Status or Watch, which write
// nothing. Errors:
//   - an error wrapping ErrNoLeader and ctx.Err(): ctx ended while no
//     leader was known;
//   - Barrier's errors (an error wrapping ctx.Err() when ctx ended while
//     the node was catching up);
//   - ErrClosed: the Log is closed or closing;
//   - an error wrapping ErrStorageFailed or ErrCommittedTruncation: the
//     node stopped serving.
func (l *Log) WaitReady(ctx context.Context) error {
	for {
		v := l.watch.view()
		if v.changed == nil {
			return ErrClosed
		}
		if err := l.failed(); err != nil {
			return err
		}
		if v.ev.LeaderID != "" {
			break
		}
		select {
		case <-v.changed:
		case <-ctx.Done():
			return fmt.Errorf("replog: wait ready: %w (%w)", ErrNoLeader, ctx.Err())
		}
	}
	return l.Barrier(ctx)
}
