package replog

import (
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/storage"
)

// writer makes the core's writes durable off the event loop, in Seq
// order, so that the loop never waits for an fsync. Each pass hands the
// store everything queued since the last pass in one Store.Apply: one
// transaction and one fsync pair (bbolt's) for all of it, whatever mix of
// appends, truncations, quorum states and HW checkpoints it holds. That is
// the group commit: while one Apply is in flight the loop keeps queueing,
// and the next pass takes it all at once.
//
// A log on its own store (Open's, a Node's default log) has a goroutine
// of its own for it. The named logs of a Node, on the node's shared
// journal, have none: one groupWriter per node makes the passes of all of
// them, every log's queue in one journal round (storage.Journal.
// ApplyGroup), so that a commit of one of many logs costs the node one
// hand-off to its writer and a share of one fdatasync, not a goroutine
// of its own and a wake-up through the journal.
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
//     place where writes are batched for the disk; a node's groupWriter
//     drains every named log's at once.
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
	persist func(seq uint64)
	fail    func(err error)
	commits commitStats // Apply durations, for Log.Stats
	// change, when set, is run before the next Apply (switchBetweenApplies):
	// a change of how the store commits (the journal turned on) must not
	// run beside an Apply.
	change func() error

	// A writer with its own goroutine:
	wake chan struct{} // cap 1: work queued
	done chan struct{} // closed when the goroutine ends

	// A writer of a node's groupWriter (group not nil):
	group *groupWriter
	dir   *storage.DirStore // the store on the group's journal
	hold  func()            // if not nil, run before its writes (a fault build's disk stall)
	// listed: in group.ready. busy: a batch of it is being applied (in
	// the group's round, or alone: a batch that must wait), so the group
	// takes nothing more of it until that batch is done (Seq order).
	listed, busy bool
	idle         *sync.Cond // on mu: busy went false
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
	w.signal()
}

// switchBetweenApplies has the writer run change after the Apply in
// flight, if any, and before the next (then or later: nothing need be
// queued). A failed change is logged and the store keeps committing as it
// did. It never blocks.
func (w *writer) switchBetweenApplies(change func() error) {
	w.mu.Lock()
	if !w.closed {
		w.change = change
	}
	w.signal()
}

// signal tells whoever makes w's passes that work may be queued, and
// unlocks w.mu (held by the caller).
func (w *writer) signal() {
	if w.group == nil {
		w.mu.Unlock()
		select {
		case w.wake <- struct{}{}:
		default:
		}
		return
	}
	list := !w.listed && !w.busy && !w.closed
	w.listed = w.listed || list
	w.mu.Unlock()
	if list {
		w.group.list(w)
	}
}

// stop makes the writer finish the batch it is applying and stop;
// queued writes that were not started are dropped (they were never
// acknowledged). It waits for that batch (and the goroutine, if any).
func (w *writer) stop() {
	w.mu.Lock()
	w.closed = true
	w.queue, w.change = nil, nil
	if w.group != nil {
		for w.busy {
			w.idle.Wait()
		}
		w.mu.Unlock()
		return
	}
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
		w.runChange(change)
		if len(batch) == 0 {
			continue
		}
		start := time.Now()
		err := w.store.Apply(batch)
		if !w.applied(batch, time.Since(start), err) {
			return
		}
	}
}

func (w *writer) runChange(change func() error) {
	if change == nil {
		return
	}
	if err := change(); err != nil {
		w.logger.Error("storage change failed; the store commits as before", "error", err)
	}
}

// applied records the outcome of batch's Apply, which took d: the last
// Seq is persisted, or the writer stops on the error (false).
func (w *writer) applied(batch []protocol.Write, d time.Duration, err error) bool {
	w.commits.observe(d, err)
	first, last := batch[0].Seq, batch[len(batch)-1].Seq
	if err != nil {
		// Nothing of the batch was applied, and the core's view is now
		// ahead of the disk: nothing after it may be applied or
		// acknowledged.
		w.logger.Error("storage write failed; the node stops serving", "first_seq", first, "last_seq", last, "writes", len(batch), "error", err)
		w.fail(fmt.Errorf("replog: storage writes %d..%d failed: %w", first, last, err))
		w.mu.Lock()
		w.closed = true
		w.queue, w.change = nil, nil
		w.mu.Unlock()
		return false
	}
	w.persist(last)
	return true
}

// groupWriter is a node's one writer for the logs on its shared journal
// (docs/architecture.md, the writer). Its goroutine takes every listed
// log's queue at once and commits them in one journal round: each store
// prepares its record, the journal writes one record of all of them and
// syncs once, each store publishes, and each log's writer persists its
// last Seq. A log's invalid batch fails that log alone (ApplyGroup).
//
// A batch that must wait (the journal full, or the batch too large for
// it and applied to the segments directly once its store's pending
// batches are checkpointed) would hold every log's commits if the group
// waited for it: ApplyGroup hands it back Deferred, and a goroutine of
// its own runs that log's Store.Apply, which waits, while the group goes
// on with the other logs; the log is busy until it is done, so its later
// writes keep their order.
type groupWriter struct {
	j      *storage.Journal
	logger hclog.Logger

	mu      sync.Mutex
	ready   []*writer // logs with work listed since the last pass
	stopped bool
	wake    chan struct{} // cap 1: a log listed
	done    chan struct{} // closed when the goroutine ends
}

func newGroupWriter(j *storage.Journal, logger hclog.Logger) *groupWriter {
	g := &groupWriter{j: j, logger: logger, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go g.run()
	return g
}

// groupStore is a store wrapper the groupWriter can commit through: the
// DirStore it wraps, and what runs before its writes.
type groupStore interface {
	groupStore() (*storage.DirStore, func())
}

// writerFor returns the writer of a log whose store is on g's journal:
// one of g's, or one with its own goroutine for a store g cannot commit
// in its rounds (a test's wrapper).
func (g *groupWriter) writerFor(store storage.Store, logger hclog.Logger, persist func(seq uint64), fail func(error)) *writer {
	var dir *storage.DirStore
	var hold func()
	switch s := store.(type) {
	case *storage.DirStore:
		dir = s
	case groupStore:
		dir, hold = s.groupStore()
	}
	if dir == nil {
		return newWriter(store, logger, persist, fail)
	}
	w := &writer{store: store, logger: logger, persist: persist, fail: fail, group: g, dir: dir, hold: hold}
	w.idle = sync.NewCond(&w.mu)
	return w
}

// list adds w to the next pass. It never blocks.
func (g *groupWriter) list(w *writer) {
	g.mu.Lock()
	g.ready = append(g.ready, w)
	g.mu.Unlock()
	select {
	case g.wake <- struct{}{}:
	default:
	}
}

// stop ends the goroutine, once every log's writer has stopped.
func (g *groupWriter) stop() {
	g.mu.Lock()
	g.stopped = true
	g.mu.Unlock()
	select {
	case g.wake <- struct{}{}:
	default:
	}
	<-g.done
}

// groupItem is one log's part of a pass.
type groupItem struct {
	w      *writer
	batch  []protocol.Write
	change func() error
}

func (g *groupWriter) run() {
	defer close(g.done)
	var items []groupItem
	var gs []storage.GroupApply
	for range g.wake {
		g.mu.Lock()
		ready, stopped := g.ready, g.stopped
		g.ready = nil
		g.mu.Unlock()
		if stopped {
			return
		}
		items = items[:0]
		for _, w := range ready {
			w.mu.Lock()
			w.listed = false
			if w.closed || w.busy || (len(w.queue) == 0 && w.change == nil) {
				w.mu.Unlock()
				continue
			}
			items = append(items, groupItem{w: w, batch: w.queue, change: w.change})
			w.queue, w.change, w.busy = nil, nil, true
			w.mu.Unlock()
		}
		gs = gs[:0]
		for _, it := range items {
			it.w.runChange(it.change)
			if it.w.hold != nil && len(it.batch) > 0 {
				it.w.hold()
			}
		}
		for _, it := range items {
			if len(it.batch) > 0 {
				gs = append(gs, storage.GroupApply{Store: it.w.dir, Writes: it.batch})
			}
		}
		start := time.Now()
		if len(gs) > 0 {
			g.j.ApplyGroup(gs)
		}
		took := time.Since(start)
		k := 0
		for _, it := range items {
			if len(it.batch) == 0 {
				it.w.release()
				continue
			}
			ga := gs[k]
			k++
			if ga.Deferred {
				go it.w.applyAlone(it.batch)
				continue
			}
			it.w.applied(it.batch, took, ga.Err)
			it.w.release()
		}
		clear(gs)
		clear(items)
	}
}

// applyAlone applies batch with the store's own Apply (which waits for
// room or for a checkpoint) on its own goroutine, beside the group's
// rounds.
func (w *writer) applyAlone(batch []protocol.Write) {
	start := time.Now()
	err := w.store.Apply(batch)
	w.applied(batch, time.Since(start), err)
	w.release()
}

// release ends w's batch in flight: w is listed again if more is queued.
func (w *writer) release() {
	w.mu.Lock()
	w.busy = false
	w.idle.Broadcast()
	if len(w.queue) == 0 && w.change == nil {
		w.mu.Unlock()
		return
	}
	w.signal()
}
