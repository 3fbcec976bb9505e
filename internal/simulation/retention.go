package simulation

import (
	"errors"
	"math"
	"math/rand"
	"time"

	"github.com/replog-io/replog/internal/shell"
	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/replica"
	"github.com/replog-io/replog/storage"
)

// Retention (docs/protocol.md 3.8, R51–R53) in the simulation.
//
// Workload: retention requests (shell.DeleteBefore) on random live nodes
// while the workload runs, at offsets around the node's HW: below it, at
// it, above it. Only a leader acts on one (a follower refuses, and the
// request does nothing until forwarding lands), so log starts move often
// on the leaders, and followers and observers follow them. A new leader is
// sometimes asked right after its election, while its HW may still be its
// epoch's start.
//
// Nemesis: a node is paused or cut off while its leader deletes past its
// LEO (it lags, and resets when it is back); an observer's store is wiped
// and the observer restarts empty, catching up from its leader's log start
// (an empty rejoin). Voters are wiped by voters.go, within the
// bounds it argues; the observer wipes here leave any node that is a voter
// of a set that may be in force alone.
//
// Checks, after every event (with checker.go's, which know the log start:
// a node's log is compared with the committed log only from its log start;
// an entry its store deleted as a committed copy counts as durable there;
// a new leader need not hold what is below its own log start):
//
//   - A log start never moves back: the core's within a process, its
//     store's across restarts (unless wiped, or lost with a NoSync node's
//     page cache), and a restarted core starts at its store's.
//   - Nothing at or above the HW is deleted: a prefix deletion that is not
//     a reset stays below the node's HW (it keeps the last committed entry)
//     and off the first offset of an epoch, and the log start stays at or
//     below the HW. A reset (a follower's or observer's deletion above its
//     LEO or its HW: R53) goes no higher than the log start a leader's
//     fetch answer named in the node's epoch or an earlier one,
//     nor past the committed log: everything it deleted was below the
//     leader's log start. Only a reset leaves the log start above the HW,
//     until the HW catches up with it.
//   - An HW that passes offsets below the node's log start covers only
//     entries shown committed; no acknowledged entry at or above a log
//     start is lost (a new leader holds them; the converged cluster does).
//   - Readers (shell.ReadBatch, the code Log.Read uses) get exactly the
//     committed bytes at and above the log start and, below it, an error
//     wrapping storage.ErrOutOfRange, never other bytes.
//   - After convergence every store holds the committed log from its log
//     start on, and nothing else is missing.

// retParams are retention's knobs for one run.
type retParams struct {
	on bool
	// deleteEvery: the mean gap between two retention requests.
	deleteEvery time.Duration
	// electDeleteProb: a new leader gets a request right after its
	// election.
	electDeleteProb float64
	// lagEvery: the mean gap between two lag faults (0: none).
	lagEvery time.Duration
	// wipeEvery: the mean gap between two observer wipes (0: none).
	wipeEvery time.Duration
}

// chooseRetention draws retention's knobs: on in three runs of four (the
// others keep everything; retention draws only from its own stream, so
// the other choices of a run do not depend on it).
func chooseRetention(p *params, r *rand.Rand) {
	if r.Intn(4) == 0 {
		return
	}
	p.ret.on = true
	p.ret.deleteEvery = ms(5 + 60*r.Float64())
	p.ret.electDeleteProb = 0.5 * r.Float64()
	if r.Intn(3) != 0 {
		p.ret.lagEvery = ms(60 + 300*r.Float64())
	}
	if p.observers > 0 && r.Intn(2) == 0 {
		p.ret.wipeEvery = ms(100 + 400*r.Float64())
	}
}

// The ways a retention request is made (event.id of an evDelete).
const (
	delTimer  = iota // the request timer: a random live node, a random offset
	delLeader        // the current leader, at or above its HW (while a node lags)
	delNode          // event.node, after its election
)

// The offsets a request asks for, relative to the node's HW.
const (
	offBelow = iota
	offAt
	offAbove
)

// setupRetention starts retention's timers.
func (s *sim) setupRetention() {
	if !s.p.ret.on {
		return
	}
	s.schedule(s.retBetween(0, s.p.ret.deleteEvery), event{kind: evDelete, id: delTimer})
	if s.p.ret.lagEvery > 0 {
		s.schedule(s.retBetween(0, 2*s.p.ret.lagEvery), event{kind: evLag})
	}
	if s.p.ret.wipeEvery > 0 {
		s.schedule(s.retBetween(0, 2*s.p.ret.wipeEvery), event{kind: evWipe})
	}
}

// retBetween is between, drawn from retention's stream.
func (s *sim) retBetween(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(s.rr.Int63n(int64(hi-lo)+1))
}

// retentionEvent handles evDelete, evLag and evWipe.
func (s *sim) retentionEvent(ev event) {
	switch ev.kind {
	case evDelete:
		if s.phase >= phaseQuiesce {
			return // the workload has stopped
		}
		switch ev.id {
		case delTimer:
			if nd := s.retRandomUp(nil); nd != nil {
				s.requestDelete(nd, s.rr.Intn(3))
			}
			s.schedule(s.retBetween(0, 2*s.p.ret.deleteEvery), event{kind: evDelete, id: delTimer})
		case delLeader:
			if l := s.upLeader(); l != nil {
				s.requestDelete(l, offAt+s.rr.Intn(2))
			}
		case delNode:
			if nd := s.nodes[ev.node]; nd.up && nd.inc == ev.inc {
				s.requestDelete(nd, offAt+s.rr.Intn(2))
			}
		}
	case evLag:
		if s.phase != phaseFaults {
			return
		}
		if s.faulting() {
			s.lagFault()
		}
		s.schedule(s.retBetween(0, 2*s.p.ret.lagEvery), event{kind: evLag})
	case evWipe:
		if s.phase != phaseFaults {
			return
		}
		if s.faulting() {
			s.wipeObserver()
		}
		s.schedule(s.retBetween(0, 2*s.p.ret.wipeEvery), event{kind: evWipe})
	}
}

// retRandomUp is randomUp drawn from retention's stream, skipping not.
func (s *sim) retRandomUp(not *node) *node {
	var up []*node
	for _, nd := range s.nodes {
		if nd.up && s.now >= nd.pausedUntil && nd != not {
			up = append(up, nd)
		}
	}
	if len(up) == 0 {
		return nil
	}
	return up[s.rr.Intn(len(up))]
}

// upLeader is the live node that last showed itself leader of the highest
// epoch.
func (s *sim) upLeader() *node {
	var l *node
	for _, nd := range s.nodes {
		if nd.up && nd.role == replica.RoleLeader && (l == nil || nd.epoch > l.epoch) {
			l = nd
		}
	}
	return l
}

// requestDelete asks nd's shell to delete below an offset around nd's HW.
func (s *sim) requestDelete(nd *node, where int) {
	hw := nd.r.HighWatermark()
	var off uint64
	switch where {
	case offBelow: // anywhere up to the HW, the log start included
		off = uint64(s.rr.Int63n(int64(hw) + 1))
	case offAt:
		off = hw
	default:
		off = hw + 1 + uint64(s.rr.Intn(50))
		if s.rr.Intn(8) == 0 {
			off = math.MaxUint64 // "everything"
		}
	}
	off = s.retainBound(nd, off)
	s.res.Faults.DeletesRequested++
	s.hash.byte(0xC3)
	s.hash.u64(uint64(nd.idx))
	s.hash.u64(off)
	s.tracef("%s DELETE-BEFORE %d (hw=%d logstart=%d role=%s)", nd.id, off, hw, nd.start, nd.role)
	s.input(nd, shell.DeleteBefore(off))
}

// lagFault pauses a node other than the leader, or cuts it off, and asks
// the leader to delete at or above its HW a few times meanwhile: when it
// is back, its fetch offset is below the leader's log start and it resets
// (R53).
func (s *sim) lagFault() {
	l := s.upLeader()
	if l == nil {
		return
	}
	v := s.retRandomUp(l)
	if v == nil {
		return
	}
	s.res.Faults.LagFaults++
	d := s.retBetween(s.p.fetchTimeout, 4*s.p.fetchTimeout)
	s.tracef("%s LAG for %v while %s deletes", v.id, d, l.id)
	if s.rr.Intn(2) == 0 {
		s.pause(v, s.now+d)
	} else {
		s.isolate(v.idx, 0) // heals after up to healMax
	}
	for i, n := 0, 2+s.rr.Intn(3); i < n; i++ {
		s.schedule(s.retBetween(d/4, d), event{kind: evDelete, id: delLeader})
	}
}

// wipeObserver restarts an observer on an empty store (an empty rejoin):
// it catches up from its leader's log start. Never a voter: a node that
// is a voter of a set that may be in force (observers are added by the
// workload, voters.go) is left alone here; voters.go wipes voters, within
// its bounds.
func (s *sim) wipeObserver() {
	if s.p.observers == 0 {
		return
	}
	v := s.nodes[s.p.voters+s.rr.Intn(s.p.observers)]
	if s.isVoterAnywhere(v, s.relevantSets()) || len(s.cset) == 1 {
		// (With one voter committed, an observer may be added as the
		// second, from a fetch of its old disk delivered late: a set of two
		// with a lost disk commits nothing ever again. voters.go's bound:
		// a set of 1 or 2 voters never loses one.)
		return
	}
	s.res.Faults.ObserverWipes++
	s.wipe(v, "observer")
}

// readBelowStart reads below nd's store's log start through the reader
// view, which must answer ErrOutOfRange and nothing else.
func (s *sim) readBelowStart(nd *node, start, limit uint64) {
	from := uint64(s.rr.Int63n(int64(min(start, limit))))
	b, err := shell.ReadBatch(nd.store, from, limit, 1+s.rr.Intn(8), 1<<20)
	s.hash.byte(0xC4)
	s.hash.u64(from)
	s.hash.entries(b.Entries)
	if !errors.Is(err, storage.ErrOutOfRange) || len(b.Entries) != 0 {
		s.fail("%s: reader at %d, below the log start %d (readable HW %d), got %d entries (next %d) and error %v; want ErrOutOfRange and nothing",
			nd.id, from, start, limit, len(b.Entries), b.Next, err)
		return
	}
	s.res.Faults.ReadsOutOfRange++
}

// issueDeletePrefix checks a prefix deletion nd's core issued and applies
// it to nd's shadow log. It reports whether the run goes on.
func (s *sim) issueDeletePrefix(nd *node, w protocol.Write) bool {
	off, leo := w.Offset, uint64(len(nd.shadow))
	if off <= nd.start {
		s.fail("%s: a prefix deletion to %d does not move its log start %d up", nd.id, off, nd.start)
		return false
	}
	st := nd.r.Status()
	if off > leo || off > st.HighWatermark && st.Role != replica.RoleLeader {
		// A reset (R53): a follower's or observer's log restarts at its
		// leader's log start. Everything it held below is gone (and what
		// it held above, a truncation right after drops: of epochs the
		// leader lacks, never committed).
		s.res.Faults.Resets++
		if !s.snapReset(nd, off) {
			return false
		}
		if off > uint64(len(s.committed)) {
			s.fail("%s: resets its log to %d, past the committed log's end %d: it skips entries nobody has shown committed", nd.id, off, len(s.committed))
			return false
		}
		if m := s.maxLeaderStart(st.Epoch); !s.opts.SafetyOnly && off > m {
			s.fail("%s (epoch %d): resets its log to %d, but no leader of its epoch or an earlier one had a log start above %d", nd.id, st.Epoch, off, m)
			return false
		}
		clear(nd.shadow[nd.unknown:min(off, leo)])
		if off > leo {
			nd.shadow = append(nd.shadow, make([]entryKey, off-leo)...)
		}
		nd.resetTo, nd.unknown = off, off
	} else {
		// R51, R52: the log start stays below the HW (the last committed
		// entry stays: no deletion empties a log, and no truncation, never
		// below the HW, reaches the log start), and it is never the first
		// offset of an epoch (the entry below it has its epoch).
		if !s.opts.SafetyOnly && off >= st.HighWatermark {
			s.fail("%s (%s): deletes the entries below %d, not below its HW %d", nd.id, st.Role, off, st.HighWatermark)
			return false
		}
		if !s.opts.SafetyOnly && off > nd.unknown && off < leo && nd.shadow[off-1].epoch != nd.shadow[off].epoch {
			s.fail("%s (%s): its log start %d is the first offset of epoch %d (the entry below is of epoch %d)", nd.id, st.Role, off, nd.shadow[off].epoch, nd.shadow[off-1].epoch)
			return false
		}
		if st.Role == replica.RoleLeader {
			if !s.snapLeaderDelete(nd, off) {
				return false
			}
			s.res.Faults.DeletesMoved++
		} else {
			s.res.Faults.FollowDeletes++
		}
		nd.resetTo = 0
	}
	nd.start = off
	return true
}

// maxLeaderStart is the highest log start a leader of epoch at most e had.
func (s *sim) maxLeaderStart(e uint64) uint64 {
	var m uint64
	for ep, ls := range s.leaderStart {
		if ep <= e {
			m = max(m, ls)
		}
	}
	return m
}

// checkLogStart runs the log-start invariants on nd's status st (after
// extend: nd.checked covers its HW). It reports whether the run goes on.
func (s *sim) checkLogStart(nd *node, st replica.Status, afterReady bool) bool {
	ls := st.LogStart
	if ls < nd.coreStart {
		s.fail("%s: log start moved back from %d to %d", nd.id, nd.coreStart, ls)
		return false
	}
	nd.coreStart = ls
	if afterReady && ls != nd.start {
		s.fail("%s: core says log start %d, its writes make it %d", nd.id, ls, nd.start)
		return false
	}
	if nd.resetTo != 0 && st.HighWatermark >= nd.resetTo {
		nd.resetTo = 0
	}
	if ls > st.HighWatermark && ls != nd.resetTo && !s.opts.SafetyOnly {
		s.fail("%s (%s): log start %d above its HW %d, and not by a reset", nd.id, st.Role, ls, st.HighWatermark)
		return false
	}
	if st.Role == replica.RoleLeader && ls > s.leaderStart[st.Epoch] {
		s.leaderStart[st.Epoch] = ls
	}
	return true
}

// checkLeaderLogStart checks the log start a leader's fetch answer carries
// (R51: never above its HW) and records it: a follower resets to what a
// leader's answer said (a leader may step down in the round that moved its
// log start, and never show it in its status).
func (s *sim) checkLeaderLogStart(nd *node, b *protocol.FetchResponse) bool {
	if b.LogStartOffset > b.HighWatermark && !s.opts.SafetyOnly {
		s.fail("%s: leader's fetch answer names log start %d above its HW %d", nd.id, b.LogStartOffset, b.HighWatermark)
		return false
	}
	s.leaderStart[b.Epoch] = max(s.leaderStart[b.Epoch], b.LogStartOffset)
	return true
}

// restartLogStart checks the log start a restarted node's store comes back
// with (never below what it had reached) and starts its shadow there.
func (s *sim) restartLogStart(nd *node, ls uint64) {
	if ls < nd.storeStart {
		s.fail("%s: restarted with log start %d, below the %d its store had reached", nd.id, ls, nd.storeStart)
	}
	nd.storeStart, nd.start, nd.resetTo, nd.unknown = ls, ls, 0, ls
}

// retiredAfter returns what nd.retired becomes once ws is applied to nd's
// store: a prefix deletion that is not a reset deletes entries below the
// node's HW, which it held as copies of the committed entries (extend
// checked them: nd.checked); a reset deletes what may not be.
func (s *sim) retiredAfter(nd *node, ws []protocol.Write) uint64 {
	r, leo := nd.retired, nd.store.LEO()
	for _, w := range ws {
		switch w.Kind {
		case protocol.WriteAppend:
			if n := len(w.Entries); n > 0 {
				leo = w.Entries[n-1].Offset + 1
			}
		case protocol.WriteTruncate:
			leo = min(leo, w.Offset)
		case protocol.WriteDeletePrefix:
			if w.Offset > leo {
				leo = w.Offset
				continue
			}
			r = max(r, min(w.Offset, nd.checked))
		}
	}
	return r
}

// appliedLogStart checks nd's store's log start after an Apply: never back.
func (s *sim) appliedLogStart(nd *node, retired uint64) {
	ls := nd.store.LogStart()
	if ls < nd.storeStart {
		s.fail("%s: its store's log start moved back from %d to %d", nd.id, nd.storeStart, ls)
	}
	nd.storeStart, nd.retired = ls, retired
}

// durableEnd is how far the core of nd may claim its log durable: its
// store's end, or the log start of a reset not yet durable (the core's view
// starts there at once; it claims no entry below it, and its HW, readers
// and fetches wait for the reset to be durable).
func (s *sim) durableEnd(nd *node) uint64 {
	end := nd.store.LEO()
	for _, w := range nd.pending {
		if w.Kind == protocol.WriteDeletePrefix && w.Offset > end {
			end = w.Offset
		}
	}
	return end
}

// electedDelete may ask a new leader to delete at once: its HW may still
// be the start of its epoch, and followers at that boundary must still
// catch up.
func (s *sim) electedDelete(nd *node) {
	if !s.p.ret.on || s.phase >= phaseQuiesce || s.rr.Float64() >= s.p.ret.electDeleteProb {
		return
	}
	s.schedule(s.retBetween(0, s.p.netMax), event{kind: evDelete, id: delNode, node: nd.idx, inc: nd.inc})
}
