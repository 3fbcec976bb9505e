package replog

import (
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/storage"
)

// writer makes the core's writes durable on its own goroutine, in Seq
// order, so that the event loop never waits for an fsync. Each pass hands
// the store everything queued since the last pass in one Store.Apply: one
// transaction and one fsync pair (bbolt's) for all of it, whatever mix of
// appends, truncations, quorum states and HW checkpoints it holds. That is
// the group commit: while one Apply is in flight the loop keeps queueing,
// and the next pass takes it all at once.
//
// The batching left on the write path, and why each layer exists:
//
//   - The core merges the proposals of one step into one WriteAppend
//     (replica.appendEntries). That is representation only: one Write and
//     one Seq per step instead of one per proposal, so Ready, Persisted and
//     the core's bookkeeping handle one write, not hundreds; the store would
//     put those entries in the same transaction either way.
//   - The loop drains up to maxEventsPerRound queued events into the core
//     before it asks for Ready (loop.go). That batches the core's work (one
//     Ready, one status publication, one reader wake-up per round), not the
//     disk's.
//   - The writer's drain of its queue (here) is the group commit: the one
//     place where writes are batched for the disk.
//
// The store merges nothing itself (storage.DirStore runs each Apply as its
// own transaction on the caller's goroutine; with the commit journal, as
// its own journal record and one fdatasync).
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
	commits commitStats // Apply durations, for Log.Stats
	// change, when set, is run by the goroutine before its next Apply
	// (switchBetweenApplies): a change of how the store commits (the
	// journal turned on) must not run beside an Apply.
	change func() error
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

// switchBetweenApplies has the goroutine run change after the Apply in
// flight, if any, and before the next (then or later: nothing need be
// queued). A failed change is logged and the store keeps committing as it
// did. It never blocks.
func (w *writer) switchBetweenApplies(change func() error) {
	w.mu.Lock()
	if !w.closed {
		w.change = change
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
	for range w.wake {
		w.mu.Lock()
		batch, closed, change := w.queue, w.closed, w.change
		w.queue, w.change = nil, nil
		w.mu.Unlock()
		if closed {
			return
		}
		if change != nil {
			if err := change(); err != nil {
				w.logger.Error("storage change failed; the store commits as before", "error", err)
			}
		}
		if len(batch) == 0 {
			continue
		}
		first, last := batch[0].Seq, batch[len(batch)-1].Seq
		start := time.Now()
		err := w.store.Apply(batch)
		w.commits.observe(time.Since(start), err)
		if err != nil {
			// Nothing of the batch was applied, and the core's view is now
			// ahead of the disk: nothing after it may be applied or
			// acknowledged.
			w.logger.Error("storage write failed; the node stops serving", "first_seq", first, "last_seq", last, "writes", len(batch), "error", err)
			w.fail(fmt.Errorf("replog: storage writes %d..%d failed: %w", first, last, err))
			w.mu.Lock()
			w.closed = true
			w.queue = nil
			w.mu.Unlock()
			return
		}
		w.persist(last)
	}
}
