package simulation

import (
	"errors"
	"math/rand"
	"time"

	"github.com/replog-io/replog/internal/shell"
	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/replica"
)

// Read barriers (docs/protocol.md R50): the workload asks random nodes for
// barriers through the shell's Barrier event, as Log.Barrier does, and a
// barrier completes, as Log.Barrier returns, once its node's published
// ReadableHW has passed the barrier's offset. Then the invariant: what the
// node's readers see includes every append acknowledged, and every entry
// committed, before the barrier began.
//
// Barriers draw from their own random stream (and are off in classic
// runs), so that the other choices of a run draw as they did before.

// barrierState is the barrier workload's part of a run.
type barrierState struct {
	rng   *rand.Rand
	on    bool
	every time.Duration // mean time between barrier requests
	max   int           // barriers waiting per node, at most
	// waiting: barriers asked for and not completed (acked or not yet),
	// in the order asked.
	waiting []*barrierWait
	// ackedEnd is the highest end offset of an acknowledged append so far
	// (the appends of s.ackedProps[:scanned]).
	ackedEnd uint64
	scanned  int
	// lastAcked is the acknowledged proposal with the highest end so far.
	lastAcked *proposal
}

// barrierWait is one barrier: asked on node at incarnation inc.
type barrierWait struct {
	p    *proposal
	node int
	inc  int
	// What was acknowledged and committed when the barrier began: its node's
	// readers must see all of it once it completes.
	committed uint64 // len(s.committed)
	ackedEnd  uint64
	lastAcked *proposal
	// acked: the core acknowledged it at offset.
	acked  bool
	offset uint64
}

// chooseBarriers sets the barrier workload's knobs for a run.
func chooseBarriers(b *barrierState, r *rand.Rand) {
	b.on = true
	b.every = ms(10 + 90*r.Float64())
	b.max = 1 + r.Intn(3)
}

// setupBarriers schedules the first barrier request.
func (s *sim) setupBarriers() {
	if !s.bar.on {
		return
	}
	s.schedule(s.barrierDelay(), event{kind: evBarrier})
}

func (s *sim) barrierDelay() time.Duration {
	return time.Duration(s.bar.rng.Int63n(int64(2*s.bar.every) + 1))
}

// barrierTimer asks a random live node for a barrier (while the workload
// runs), and schedules the next request.
func (s *sim) barrierTimer() {
	if s.phase == phaseQuiesce || s.phase == phaseStable {
		return
	}
	s.schedule(s.barrierDelay(), event{kind: evBarrier})
	var up []*node
	for _, nd := range s.nodes {
		if nd.up && s.now >= nd.pausedUntil {
			up = append(up, nd)
		}
	}
	if len(up) == 0 {
		return
	}
	nd := up[s.bar.rng.Intn(len(up))]
	n := 0
	for _, w := range s.bar.waiting {
		if w.node == nd.idx && w.inc == nd.inc {
			n++
		}
	}
	if n >= s.bar.max {
		return
	}
	s.scanAcked()
	p := &proposal{id: uint64(len(s.proposals) + 1), node: nd.idx, inc: nd.inc, committedAt: -1, barrier: true}
	s.proposals = append(s.proposals, p)
	s.bar.waiting = append(s.bar.waiting, &barrierWait{
		p: p, node: nd.idx, inc: nd.inc,
		committed: uint64(len(s.committed)), ackedEnd: s.bar.ackedEnd, lastAcked: s.bar.lastAcked,
	})
	s.hash.byte(0xC2)
	s.hash.u64(p.id)
	s.tracef("%s barrier id=%d (committed %d, acked up to %d)", nd.id, p.id, len(s.committed), s.bar.ackedEnd)
	s.input(nd, shell.Barrier(p.id))
}

// scanAcked brings ackedEnd up to date with the appends acknowledged since
// the last scan.
func (s *sim) scanAcked() {
	for _, p := range s.ackedProps[s.bar.scanned:] {
		if end := uint64(p.committedAt) + uint64(len(p.records)); end > s.bar.ackedEnd {
			s.bar.ackedEnd, s.bar.lastAcked = end, p
		}
	}
	s.bar.scanned = len(s.ackedProps)
}

// barrierAcked handles the core's answer to a barrier (from onAck).
func (s *sim) barrierAcked(nd *node, p *proposal, a replica.Ack) {
	i := s.barrierIndex(p)
	if i < 0 {
		s.fail("%s acks barrier %d, which is not waiting", nd.id, p.id)
		return
	}
	w := s.bar.waiting[i]
	if a.Err != nil {
		s.tracef("%s barrier id=%d err=%v", nd.id, p.id, a.Err)
		if !notAppended(a.Err) && !errors.Is(a.Err, replica.ErrUnknownOutcome) {
			s.fail("%s answers barrier %d with unexpected error %v", nd.id, p.id, a.Err)
			return
		}
		// Log.Barrier proposes another; this one is over.
		s.bar.waiting = append(s.bar.waiting[:i], s.bar.waiting[i+1:]...)
		return
	}
	s.tracef("%s barrier id=%d OK at %d", nd.id, p.id, a.FirstOffset)
	if a.FirstOffset < w.committed {
		// The heart of R50: a barrier committed after it began comes after
		// everything committed before.
		s.fail("%s: barrier %d committed at offset %d, below the %d entries committed before it began", nd.id, p.id, a.FirstOffset, w.committed)
		return
	}
	w.acked, w.offset = true, a.FirstOffset
	p.committedAt = int64(a.FirstOffset)
}

func (s *sim) barrierIndex(p *proposal) int {
	for i, w := range s.bar.waiting {
		if w.p == p {
			return i
		}
	}
	return -1
}

// checkBarriers completes nd's acknowledged barriers whose offset its
// readers' watermark (the ReadableHW its shell last published) has passed,
// and checks what those readers then see. It runs after each of nd's
// rounds, once the round's checks have extended the committed log;
// barriers of an earlier incarnation are dropped (their Log is
// gone).
func (s *sim) checkBarriers(nd *node) {
	if len(s.bar.waiting) == 0 || s.err != nil {
		return
	}
	kept := s.bar.waiting[:0]
	for _, w := range s.bar.waiting {
		if w.node != nd.idx {
			kept = append(kept, w)
			continue
		}
		if w.inc != nd.inc || !nd.up {
			continue
		}
		if !w.acked || nd.published <= w.offset {
			kept = append(kept, w)
			continue
		}
		s.barrierDone(nd, w)
	}
	clear(s.bar.waiting[len(kept):])
	s.bar.waiting = kept
}

// barrierDone checks a completed barrier: its entry is a committed control
// entry without data, and nd's readers see everything committed, and every
// acknowledged append, from before the barrier began.
func (s *sim) barrierDone(nd *node, w *barrierWait) {
	s.res.Barriers++
	limit := nd.published
	if w.offset >= uint64(len(s.committed)) {
		s.fail("%s: barrier %d at offset %d is below the readable HW %d but beyond the committed log %d", nd.id, w.p.id, w.offset, limit, len(s.committed))
		return
	}
	if k := s.committed[w.offset]; k.typ != protocol.EntryControl || k.data != "" {
		s.fail("%s: barrier %d's offset %d holds %v, not a control entry without data", nd.id, w.p.id, w.offset, k)
		return
	}
	if limit < w.committed || limit < w.ackedEnd {
		s.fail("%s: barrier %d completed with readable HW %d, but %d entries were committed and appends acknowledged up to %d before it began",
			nd.id, w.p.id, limit, w.committed, w.ackedEnd)
		return
	}
	// Read the last acknowledged append of before the barrier as the
	// node's reader would (unless retention deleted it since).
	p := w.lastAcked
	if p == nil {
		return
	}
	o := uint64(p.committedAt)
	if o < nd.store.LogStart() {
		return
	}
	if nd.isHole(o) {
		return // compacted since (R103)
	}
	b, err := shell.ReadBatch(nd.store, o, limit, 1, 1<<20)
	if err != nil || len(b.Entries) == 0 || b.Entries[0].Offset != o || string(b.Entries[0].Data) != p.records[0] {
		s.fail("%s: after barrier %d its reader at offset %d gets %+v (%v), want %q, acknowledged before the barrier began",
			nd.id, w.p.id, o, b.Entries, err, p.records[0])
	}
}

// finalBarriers: after convergence no acknowledged barrier of a live node
// may still wait (its node's readable HW is the whole committed log).
func (s *sim) finalBarriers() {
	for _, w := range s.bar.waiting {
		nd := s.nodes[w.node]
		if w.acked && nd.up && nd.inc == w.inc {
			s.fail("%s: barrier %d at offset %d never completed (readable HW %d after convergence)", nd.id, w.p.id, w.offset, nd.published)
			return
		}
	}
}
