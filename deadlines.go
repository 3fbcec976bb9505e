package replog

import (
	"container/heap"
	"sync"
	"time"
)

// deadlineSlack is how late the deadline scheduler may wake a loop past
// its deadline (docs/protocol.md R97): deadlines within it of the earliest
// one share its wake-up, so that a burst of rounds does not re-arm the
// timer once per round, and a thousand idle logs whose deadlines fall
// close together cost one wake-up, not a thousand.
const deadlineSlack = time.Millisecond

// deadlines wakes the loops of a process's logs when their cores'
// deadlines pass (R96, R97): one goroutine and one timer for every log of
// a Node (or for an Opened log), in place of a ticker per log. A loop
// tells it its next deadline after each round (set); at that instant (up
// to deadlineSlack later) the scheduler wakes the loop, which runs a
// round without events.
type deadlines struct {
	mu    sync.Mutex
	queue deadlineHeap
	armed time.Time // when the timer fires; zero: not armed
	timer *time.Timer

	stop chan struct{}
	done chan struct{}
}

// deadlineEntry is one loop's place in the scheduler: its deadline and
// the channel that wakes it. Only its loop calls set with it.
type deadlineEntry struct {
	at   time.Time
	idx  int // in the queue; -1 when not queued
	wake chan<- struct{}
	// last is the deadline last set (the loop's own, read without the
	// lock): a round that leaves a deadline still ahead where it was
	// costs no lock.
	last time.Time
}

func newDeadlines() *deadlines {
	s := &deadlines{timer: time.NewTimer(time.Hour), stop: make(chan struct{}), done: make(chan struct{})}
	s.timer.Stop()
	go s.run()
	return s
}

// newEntry returns an entry that wakes through wake (cap 1: a wake-up
// pending is enough).
func (s *deadlines) newEntry(wake chan<- struct{}) *deadlineEntry {
	return &deadlineEntry{idx: -1, wake: wake}
}

// set makes at e's deadline (zero: none), as of a round at now. A
// deadline at or before now wakes the loop within deadlineSlack.
func (s *deadlines) set(e *deadlineEntry, at, now time.Time) {
	if at.Equal(e.last) && (at.IsZero() || at.After(now)) {
		// Still queued: only a wake-up at or after at takes it out, and
		// a round after that wake-up runs at or after at.
		return
	}
	e.last = at
	s.mu.Lock()
	defer s.mu.Unlock()
	if at.IsZero() {
		if e.idx >= 0 {
			heap.Remove(&s.queue, e.idx)
		}
		return // a timer armed for it fires for nothing, once
	}
	e.at = at
	if e.idx >= 0 {
		heap.Fix(&s.queue, e.idx)
	} else {
		heap.Push(&s.queue, e)
	}
	// Armed later than at plus the slack: arm earlier. Armed within the
	// slack after at, or earlier: that wake-up serves it too.
	if s.armed.IsZero() || s.armed.Sub(at) > deadlineSlack {
		s.arm(at.Add(deadlineSlack))
	}
}

// arm sets the timer to fire at t. Callers hold mu.
func (s *deadlines) arm(t time.Time) {
	s.armed = t
	s.timer.Reset(time.Until(t))
}

// close stops the scheduler's goroutine; no loop wakes from then on.
func (s *deadlines) close() {
	close(s.stop)
	<-s.done
	s.timer.Stop()
}

func (s *deadlines) run() {
	defer close(s.done)
	for {
		select {
		case <-s.stop:
			return
		case <-s.timer.C:
			s.fire()
		}
	}
}

// fire wakes every loop whose deadline has passed, and arms the timer for
// the earliest one left.
func (s *deadlines) fire() {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	s.armed = time.Time{}
	for len(s.queue) > 0 && !s.queue[0].at.After(now) {
		e := heap.Pop(&s.queue).(*deadlineEntry)
		select {
		case e.wake <- struct{}{}:
		default: // a wake-up is pending already
		}
	}
	if len(s.queue) > 0 {
		s.arm(s.queue[0].at.Add(deadlineSlack))
	}
}

// deadlineHeap is a min-heap of entries by deadline (container/heap).
type deadlineHeap []*deadlineEntry

func (h deadlineHeap) Len() int           { return len(h) }
func (h deadlineHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h deadlineHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i, j
}
func (h *deadlineHeap) Push(x any) {
	e := x.(*deadlineEntry)
	e.idx = len(*h)
	*h = append(*h, e)
}
func (h *deadlineHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	e.idx = -1
	return e
}
