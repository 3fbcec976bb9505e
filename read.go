package replog

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"math"

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
// The iterator yields a non-nil error once and then stops:
//   - ctx.Err() when ctx ends (the normal way to stop following the log,
//     besides breaking out of the loop);
//   - ErrClosed when the Log closes;
//   - ErrOutOfRange when from is below the log start offset;
//   - ErrCorrupt (naming the offset) when a stored entry fails its checksum;
//   - ErrStorageFailed when the node's disk failed.
//
// Each Entry's Data is a fresh copy the caller owns. Read never blocks
// appends or replication: it reads the store in short transactions.
func (l *Log) Read(ctx context.Context, from uint64) iter.Seq2[Entry, error] {
	return l.ReadRange(ctx, from, math.MaxUint64)
}

// ReadRange is Read bounded above: it iterates committed entries with
// offsets in [from, to) and ends, without an error, once it has passed
// to-1, waiting at the high watermark until then. Use
// ReadRange(ctx, from, l.Status().ReadableHW) to read what is committed
// here now without waiting: the bound counts offsets, so it ends even when the
// last offsets below it hold control entries that readers never see.
// Errors are those of Read.
func (l *Log) ReadRange(ctx context.Context, from, to uint64) iter.Seq2[Entry, error] {
	return func(yield func(Entry, error) bool) {
		next := from
		for next < to {
			l.hwMu.Lock()
			hw, changed := l.hw, l.hwChanged
			l.hwMu.Unlock()
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
				if err != nil {
					yield(Entry{}, err)
					return
				}
				for _, e := range b.Entries {
					if !yield(Entry{Offset: e.Offset, Epoch: e.Epoch, Time: entryTime(e.Time), Data: e.Data}, nil) {
						return
					}
				}
				next = b.Next
				continue
			}
			select {
			case <-changed:
			case <-ctx.Done():
			}
		}
	}
}
