package main

import (
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/replog-io/replog"
)

// The dashboard polls every few hundred milliseconds, but on loopback both
// fetch rounds of an append finish within milliseconds: polling alone would
// only ever show the end state. So each node samples its own status often,
// keeps the changes, and the dashboard replays them step by step.

// historyEvent is one recorded change of a node's status.
type historyEvent struct {
	Seq uint64 `json:"seq"`
	// TimeUS is when the change was seen (Unix microseconds; the nodes of
	// the demo share one clock).
	TimeUS int64         `json:"t_us"`
	Status replog.Status `json:"status"`
}

// historyJSON is the body of GET /history.
type historyJSON struct {
	// Seq is the latest event's sequence number; ask ?since=Seq next time.
	Seq    uint64         `json:"seq"`
	NowUS  int64          `json:"now_us"`
	Events []historyEvent `json:"events"`
}

// history is a bounded record of status changes. Safe for concurrent use.
type history struct {
	mu     sync.Mutex
	max    int
	events []historyEvent
	seq    uint64
	last   replog.Status
	primed bool
}

func newHistory(max int) *history { return &history{max: max} }

// record keeps st if it differs from the last recorded status in anything
// the dashboard shows, and reports whether it did.
func (h *history) record(now time.Time, st replog.Status) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.primed && sameShape(h.last, st) {
		return false
	}
	h.primed = true
	h.last = st
	h.seq++
	h.events = append(h.events, historyEvent{Seq: h.seq, TimeUS: now.UnixMicro(), Status: st})
	if len(h.events) > h.max {
		h.events = slicesClone(h.events[len(h.events)-h.max:])
	}
	return true
}

// since returns the events after seq (all kept ones if seq is older).
func (h *history) since(seq uint64) historyJSON {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := historyJSON{Seq: h.seq, NowUS: time.Now().UnixMicro(), Events: []historyEvent{}}
	for _, e := range h.events {
		if e.Seq > seq {
			out.Events = append(out.Events, e)
		}
	}
	return out
}

// sameShape compares what the dashboard explains: roles, offsets and the
// leader's remote LEOs (the leader's DurableLEO matters: it counts itself
// for the HW only with what is on disk). Addresses are left out.
func sameShape(a, b replog.Status) bool {
	return a.Role == b.Role && a.Epoch == b.Epoch && a.LeaderID == b.LeaderID &&
		a.LEO == b.LEO && a.DurableLEO == b.DurableLEO && a.HighWatermark == b.HighWatermark && a.LogStart == b.LogStart &&
		maps.Equal(a.RemoteLEO, b.RemoteLEO)
}

func slicesClone(s []historyEvent) []historyEvent { return append([]historyEvent(nil), s...) }

// sampler records a node's status into a history every interval, but only
// while someone reads the history (the dashboard polls /history): sampling
// every millisecond costs a few percent of a core per node, which an idle
// cluster nobody looks at should not pay. After idle without a watch call
// it sleeps until the next one, recording the status once as it wakes.
// idle 0 samples always.
type sampler struct {
	node     logNode
	hist     *history
	interval time.Duration
	idle     time.Duration

	lastWatch atomic.Int64  // Unix nanoseconds of the latest watch call
	wake      chan struct{} // cap 1: a watch call while asleep
	done      chan struct{}
	exited    chan struct{}
	stopOnce  sync.Once
	samples   atomic.Uint64 // statuses taken, for tests
}

// startSampler starts sampling node into h; a first sample is taken at
// once, and sampling goes on for idle (or for ever, with idle 0) unless
// watch is called.
func startSampler(node logNode, h *history, interval, idle time.Duration) *sampler {
	s := &sampler{node: node, hist: h, interval: interval, idle: idle,
		wake: make(chan struct{}, 1), done: make(chan struct{}), exited: make(chan struct{})}
	s.lastWatch.Store(time.Now().UnixNano())
	go s.run()
	return s
}

// watch says that someone reads the history: sampling continues (or
// resumes) for idle from now.
func (s *sampler) watch() {
	s.lastWatch.Store(time.Now().UnixNano())
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// unwatched reports whether nobody has called watch for idle.
func (s *sampler) unwatched() bool {
	return s.idle > 0 && time.Since(time.Unix(0, s.lastWatch.Load())) > s.idle
}

func (s *sampler) record() {
	s.samples.Add(1)
	s.hist.record(time.Now(), s.node.Status())
}

func (s *sampler) run() {
	defer close(s.exited)
	for {
		s.record()
		t := time.NewTicker(s.interval)
		for !s.unwatched() {
			select {
			case <-s.done:
				t.Stop()
				return
			case <-t.C:
				s.record()
			}
		}
		t.Stop()
		// Asleep: a token left by watch calls made while sampling does not
		// count; only a call made from now on wakes us.
		select {
		case <-s.wake:
		default:
		}
		if !s.unwatched() {
			continue
		}
		select {
		case <-s.done:
			return
		case <-s.wake:
		}
	}
}

// stop ends the sampling and waits for its goroutine. Safe to call more
// than once.
func (s *sampler) stop() {
	s.stopOnce.Do(func() { close(s.done) })
	<-s.exited
}
