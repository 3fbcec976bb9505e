package replog

import (
	"context"
	"iter"
	"slices"
	"sync"
	"time"
)

// Event is this node's view of its cluster, as Watch yields it: what it
// does, whom it follows, in which epoch, among which voters.
type Event struct {
	// Role is this node's role (never RoleClosed: Watch ends with
	// ErrClosed instead).
	Role Role
	// LeaderID is the leader this node believes in: itself when it leads,
	// "" while it knows none (a prospective or candidate knows none).
	LeaderID string
	// Epoch is the highest leader epoch this node has seen.
	Epoch uint64
	// Voters are the IDs of the voter set in force (Status.Voters): a
	// voter change (AddVoter, RemoveVoter, the automatic replacement of a
	// wiped voter) is a new view. The caller owns the slice.
	Voters []string
}

func (e Event) same(o Event) bool {
	return e.Role == o.Role && e.LeaderID == o.LeaderID && e.Epoch == o.Epoch && slices.Equal(e.Voters, o.Voters)
}

// watchState is what the loop publishes of the node's view for Watch,
// WaitReady and readers that require a leader. As for readers of the high
// watermark, waiting costs the loop nothing: it closes a channel when the
// view changes and never waits for anyone, so a slow watcher only skips
// views (it always gets the latest one).
type watchState struct {
	mu  sync.Mutex
	ev  Event
	seq uint64 // counts changes (of the view, or the node failing)
	// changed is closed and replaced at every change; nil before the first
	// one is waited for, and once closed is set.
	changed chan struct{}
	closed  bool
	failed  bool
	// leaderless is when the node last stopped knowing a leader; zero
	// while it knows one.
	leaderless time.Time
}

// update records the node's view; failed says the node stopped serving. A
// change wakes the waiters.
func (w *watchState) update(ev Event, failed bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || w.seq > 0 && ev.same(w.ev) && failed == w.failed {
		return
	}
	switch {
	case ev.LeaderID != "":
		w.leaderless = time.Time{}
	case w.seq == 0 || w.ev.LeaderID != "":
		w.leaderless = time.Now()
	}
	w.ev, w.failed = ev, failed
	w.seq++
	if w.changed != nil {
		close(w.changed)
		w.changed = nil
	}
}

// close ends every waiter: the Log closed.
func (w *watchState) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	if w.changed != nil {
		close(w.changed)
		w.changed = nil
	}
}

// view is a snapshot of watchState with the channel that is closed at the
// next change (nil once the Log is closed).
type view struct {
	ev         Event
	seq        uint64
	changed    <-chan struct{}
	leaderless time.Time
}

func (w *watchState) view() view {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return view{ev: w.ev, seq: w.seq}
	}
	if w.changed == nil {
		w.changed = make(chan struct{})
	}
	return view{ev: w.ev, seq: w.seq, changed: w.changed, leaderless: w.leaderless}
}

// Watch returns an iterator over this node's view of its cluster: it
// yields the current view at once, then a new Event whenever the role, the
// leader, the epoch or the voters change, until ctx ends or the Log
// closes.
//
// Events are coalesced, never queued: the iterator runs in the caller's
// goroutine, and the event loop only marks that the view changed, so a
// slow consumer never holds up the node. A consumer that is slow to come
// back skips the views it missed and gets the latest one; two events in a
// row may therefore differ in several fields, and an election that starts
// and ends while the consumer is busy may not be seen at all (the epoch
// still shows it). Each Event differs from the one yielded before it.
//
// Breaking out of the loop, or ctx ending, stops it: it starts no
// goroutine, so there is nothing to leak. It yields a non-nil error once
// and then stops:
//   - ctx.Err() when ctx ends;
//   - ErrClosed when the Log closes;
//   - the node's failure (an error wrapping ErrStorageFailed or
//     ErrCommittedTruncation) when the node stops serving.
func (l *Log) Watch(ctx context.Context) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		var last uint64
		first := true
		for {
			v := l.watch.view()
			if v.changed == nil {
				yield(Event{}, ErrClosed)
				return
			}
			if err := l.failed(); err != nil {
				yield(Event{}, err)
				return
			}
			if err := ctx.Err(); err != nil {
				yield(Event{}, err)
				return
			}
			if first || v.seq != last {
				first, last = false, v.seq
				ev := v.ev
				ev.Voters = slices.Clone(ev.Voters)
				if !yield(ev, nil) {
					return
				}
				continue
			}
			select {
			case <-v.changed:
			case <-ctx.Done():
			}
		}
	}
}
