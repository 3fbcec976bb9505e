package replog

import (
	"fmt"
	"sync"

	"github.com/hashicorp/go-hclog"

	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/storage"
)

// writer applies the core's writes to the store on its own goroutine, in
// order, so the event loop never waits for an fsync. It drains everything
// queued since its last pass and merges consecutive appends into one store
// call: one transaction, one fsync, for all appends waiting (group commit).
type writer struct {
	store  storage.Store
	logger hclog.Logger

	mu      sync.Mutex
	queue   []protocol.Write
	closed  bool
	wake    chan struct{} // cap 1: work queued
	done    chan struct{} // closed when the goroutine ends
	persist func(seq uint64)
	fail    func(err error)
}

func newWriter(store storage.Store, logger hclog.Logger, persist func(seq uint64), fail func(error)) *writer {
	w := &writer{
		store:   store,
		logger:  logger,
		wake:    make(chan struct{}, 1),
		done:    make(chan struct{}),
		persist: persist,
		fail:    fail,
	}
	go w.run()
	return w
}

// enqueue adds writes in Seq order. It never blocks.
func (w *writer) enqueue(ws []protocol.Write) {
	if len(ws) == 0 {
		return
	}
	w.mu.Lock()
	if !w.closed {
		w.queue = append(w.queue, ws...)
	}
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// stop makes the goroutine finish the batch it is applying and exit;
// queued writes that were not started are dropped (they were never
// acknowledged). It waits for the goroutine.
func (w *writer) stop() {
	w.mu.Lock()
	w.closed = true
	w.queue = nil
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
	<-w.done
}

func (w *writer) run() {
	defer close(w.done)
	var merged []protocol.Entry
	for range w.wake {
		w.mu.Lock()
		batch, closed := w.queue, w.closed
		w.queue = nil
		w.mu.Unlock()
		if closed {
			return
		}
		for i := 0; i < len(batch); {
			wr := batch[i]
			var err error
			last := wr.Seq
			switch wr.Kind {
			case protocol.WriteAppend:
				// Merge the run of appends that follows into one call.
				j := i
				merged = merged[:0]
				for j < len(batch) && batch[j].Kind == protocol.WriteAppend {
					merged = append(merged, batch[j].Entries...)
					last = batch[j].Seq
					j++
				}
				err = w.store.Append(merged)
				i = j
			case protocol.WriteTruncate:
				err = w.store.TruncateSuffix(wr.Offset)
				i++
			case protocol.WriteQuorumState:
				err = w.store.SetQuorumState(wr.Quorum)
				i++
			case protocol.WriteHWCheckpoint:
				err = w.store.SetHWCheckpoint(wr.Offset)
				i++
			default:
				err = fmt.Errorf("replog: unknown write kind %d", wr.Kind)
				i++
			}
			if err != nil {
				// A failed write leaves the core's view ahead of the disk:
				// nothing after it may be applied or acknowledged.
				w.logger.Error("storage write failed; the node stops serving", "seq", wr.Seq, "kind", wr.Kind, "error", err)
				w.fail(fmt.Errorf("replog: storage write %d failed: %w", wr.Seq, err))
				w.mu.Lock()
				w.closed = true
				w.queue = nil
				w.mu.Unlock()
				return
			}
			w.persist(last)
		}
		clear(merged) // do not keep the core's payloads alive
	}
}
