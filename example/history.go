package main

import (
	"maps"
	"sync"
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

// sample records node's status every interval until stop is called; stop
// waits for the sampling goroutine to end.
func sample(node logNode, h *history, interval time.Duration) (stop func()) {
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		t := time.NewTicker(interval)
		defer t.Stop()
		h.record(time.Now(), node.Status())
		for {
			select {
			case <-done:
				return
			case <-t.C:
				h.record(time.Now(), node.Status())
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() { close(done) })
		<-exited
	}
}
