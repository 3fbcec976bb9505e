package replog

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"math"
	"time"

	"github.com/replog-io/replog/internal/shell"
	"github.com/replog-io/replog/storage"
)

// readBatch bounds how much one step of an iterator reads from the store:
// read transactions stay short, and a slow consumer holds no lock.
const (
	readBatchCount = 256
	readBatchBytes = 1 << 20
)

// Read returns an iterator over committed entries from offset from upward,
// in offset order. It shows only entries below this node's high
// watermark, on leaders, followers and observers alike; protocol control
// entries are skipped, so the offsets it yields increase but may have
// gaps: resume from the last offset seen + 1, never from a count. At the
// watermark it waits for more until ctx ends.
//
// What a reader sees is committed (never taken back) and monotonic (an
// entry seen stays, at its offset), but it may be stale: a follower learns
// of commits a fetch round after its leader, and a node cut off from its
// leader keeps serving what it had. Read alone is therefore not
// linearizable. For read-your-writes across nodes, call Barrier first: a
// Read that starts after Barrier returned sees every append acknowledged,
// on any node, before Barrier was called. A reader that must not wait
// silently on a node that lost its leader reads with a context from
// WithRequireLeader.
//
// The iterator yields a non-nil error once and then stops:
//   - ctx.Err() when ctx ends (the normal way to stop following the log,
//     besides breaking out of the loop);
//   - ErrClosed when the Log closes;
//   - an *OutOfRangeError (ErrOutOfRange) when the next offset is below
//     the log start: deleted by retention (DeleteBefore, RetentionBytes,
//     RetentionAge) before the read reached it; it names the log start to
//     resume from;
//   - ErrCorrupt (naming the offset) when a stored entry fails its checksum;
//   - ErrStorageFailed when the node's disk failed;
//   - with a context from WithRequireLeader(ctx, d), an error wrapping
//     ErrNoLeader when the reader has caught up and would wait while the
//     node has known no leader for d.
//
// Each Entry's Data is a fresh copy the caller owns. Read never blocks
// appends or replication: it reads the store in short transactions.
func (l *Log) Read(ctx context.Context, from uint64) iter.Seq2[Entry, error] {
	return l.ReadRange(ctx, from, math.MaxUint64)
}

// requireLeaderKey is the context key of WithRequireLeader.
type requireLeaderKey struct{}

// WithRequireLeader returns a copy of ctx that makes a Read or ReadRange
// given it fail, with an error wrapping ErrNoLeader, instead of waiting at
// the watermark while this node has known no leader for d (etcd's
// clientv3.WithRequireLeader, which is a context option too). A node
// knows no leader while it campaigns (it lost contact with its leader: it
// was cut off from the majority, or the leader failed) and before it
// first learns one; a leader that loses the majority resigns after
// FetchTimeout. So a reader on a node cut off from its majority fails
// within about FetchTimeout + ElectionTimeout + d of the cut, while one
// on a node that keeps its leader is never failed. Choose d above the
// time an election normally takes (about ElectionTimeout; FetchTimeout is
// a safe choice), so that an ordinary leader change does not fail the
// reader. d ≤ 0 fails it as soon as it would wait without a leader.
//
// Entries already committed on this node are still delivered: they are
// never wrong, only perhaps stale. The reader fails only when it would
// otherwise wait for more.
//
// It is a property of one read, not an Options field, because readers on
// one node differ: a dashboard wants whatever the node has, a consumer
// that acts on what it reads wants to know when it may be missing news. It
// rides on the context, as etcd's does, so that Read keeps its signature
// (interfaces that Log satisfies keep working).
func WithRequireLeader(ctx context.Context, d time.Duration) context.Context {
	return context.WithValue(ctx, requireLeaderKey{}, max(d, 0))
}

// requiredLeader returns the bound WithRequireLeader put on ctx, or -1.
func requiredLeader(ctx context.Context) time.Duration {
	if d, ok := ctx.Value(requireLeaderKey{}).(time.Duration); ok {
		return d
	}
	return -1
}

// ReadRange is Read bounded above: it iterates committed entries with
// offsets in [from, to) and ends, without an error, once it has passed
// to-1, waiting at the high watermark until then. Use
// ReadRange(ctx, from, l.Status().ReadableHW) to read what is committed
// here now without waiting: the bound counts offsets, so it ends even when the
// last offsets below it hold control entries that readers never see.
// Errors are those of Read (WithRequireLeader applies too).
func (l *Log) ReadRange(ctx context.Context, from, to uint64) iter.Seq2[Entry, error] {
	requireLeader := requiredLeader(ctx)
	return func(yield func(Entry, error) bool) {
		next := from
		for next < to {
			hw, changed := l.hwWait()
			if changed == nil {
				yield(Entry{}, ErrClosed)
				return
			}
			if err := l.failed(); err != nil {
				yield(Entry{}, err)
				return
			}
			if err := ctx.Err(); err != nil {
				yield(Entry{}, err)
				return
			}
			if next < hw {
				// What a reader sees is the shell's reader view, the code
				// the simulation checks readers with.
				b, err := shell.ReadBatch(l.store, next, min(hw, to), readBatchCount, readBatchBytes)
				if errors.Is(err, storage.ErrClosed) {
					err = fmt.Errorf("replog: read at offset %d: %w", next, ErrClosed)
				}
				if errors.Is(err, storage.ErrOutOfRange) {
					// Deleted by retention, before the read or under it.
					err = &OutOfRangeError{Offset: next, LogStart: l.store.LogStart()}
				}
				if err != nil {
					yield(Entry{}, err)
					return
				}
				for i, e := range b.Entries {
					if !yield(Entry{Offset: e.Offset, Epoch: e.Epoch, Time: entryTime(e.Time), Data: e.Data, Key: b.Key(i)}, nil) {
						return
					}
				}
				next = b.Next
				continue
			}
			if requireLeader >= 0 {
				if err := l.waitWithLeader(ctx, changed, requireLeader); err != nil {
					yield(Entry{}, err)
					return
				}
				continue
			}
			select {
			case <-changed:
			case <-ctx.Done():
			}
		}
	}
}

// waitWithLeader waits, as a reader at the watermark does, until changed is
// closed or ctx ends, and fails with ErrNoLeader once the node has known no
// leader for d. It returns nil when the reader should look again.
func (l *Log) waitWithLeader(ctx context.Context, changed <-chan struct{}, d time.Duration) error {
	v := l.watch.view()
	if v.changed == nil {
		return ErrClosed
	}
	var timeout <-chan time.Time
	if !v.leaderless.IsZero() {
		since := time.Since(v.leaderless)
		if since >= d {
			return fmt.Errorf("%w: node %s has known no leader for %v (WithRequireLeader %v)",
				ErrNoLeader, l.opts.NodeID, since.Round(time.Millisecond), d)
		}
		t := time.NewTimer(d - since)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-changed:
	case <-v.changed: // a leader came or went
	case <-timeout:
	case <-ctx.Done():
	}
	return nil
}
