package simulation

import (
	"testing"
	"time"

	"github.com/replog-io/replog/internal/shell"
	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/replica"
)

// quietSim starts seed's cluster with faults off and runs it until it has
// converged.
func quietSim(t *testing.T, seed int64) *sim {
	t.Helper()
	s := newSim(Options{Seed: seed, Steps: 1 << 30})
	s.phase = phaseQuiesce // no workload, crashes, partitions, drops or duplicates
	for s.err == nil && !s.converged() {
		if s.now > 10*time.Second {
			t.Fatalf("seed %d: no convergence without faults in 10s:\n%s", seed, s.dump())
		}
		s.step(0)
	}
	if s.err != nil {
		t.Fatalf("seed %d: %v", seed, s.err)
	}
	return s
}

func leaderOf(s *sim) *node {
	for _, nd := range s.nodes {
		if nd.up && nd.role == replica.RoleLeader {
			return nd
		}
	}
	return nil
}

// TestConvergedWaitsForPausedLeader: a cluster whose leader is stalled has
// not converged (issue 9: the stable phase began while the leader was
// paused, and its followers rightly elected another; seeds 130036950 and
// 130063570 at 1500 steps).
func TestConvergedWaitsForPausedLeader(t *testing.T) {
	for seed := int64(1); seed <= 5; seed++ {
		s := quietSim(t, seed)
		l := leaderOf(s)
		if l == nil {
			t.Fatalf("seed %d: converged without a leader", seed)
		}
		s.pause(l, s.now+s.p.fetchTimeout)
		if s.converged() {
			t.Fatalf("seed %d: converged() with leader %s paused until %v (now %v)", seed, l.id, l.pausedUntil, s.now)
		}
		for s.err == nil && s.now < l.pausedUntil {
			s.step(0)
		}
		if s.err != nil {
			t.Fatalf("seed %d: %v", seed, s.err)
		}
	}
}

// TestPauseKeepsLatestResume: pausing a paused node keeps the later resume
// time, and events deferred to it are not handled before it (issue 9: an
// earlier time overwrote it, and the node ran between the two times with
// its ticks still deferred, its clock frozen).
func TestPauseKeepsLatestResume(t *testing.T) {
	s := quietSim(t, 7)
	nd := s.nodes[0]
	late := s.now + 3*s.p.fetchTimeout
	s.pause(nd, late)
	s.pause(nd, s.now+s.p.fetchTimeout/2)
	if nd.pausedUntil != late {
		t.Fatalf("pausedUntil %v after pausing until %v then until an earlier time; want %v", nd.pausedUntil, late, late)
	}
	if s.res.Faults.PausesExtended != 1 {
		t.Fatalf("PausesExtended = %d, want 1", s.res.Faults.PausesExtended)
	}
	// The one-shot resume tick of the first pause is the earliest event
	// that may run the node: none of its deferrable events is due before.
	for s.err == nil && s.now < late {
		ev := s.q.h[0]
		if ev.node == nd.idx && ev.inc == nd.inc && ev.at < late && int(ev.kind) < len(deferredWhilePaused) && deferredWhilePaused[ev.kind] {
			s.q.pop()
			s.dispatch(ev) // must only defer it
			if s.q.len() > 0 && ev.at < late {
				for _, e := range s.q.h {
					if e.kind == ev.kind && e.node == ev.node && e.seq == s.seq && e.at != late {
						t.Fatalf("%s event for paused %s deferred to %v, want %v", ev.kind, nd.id, e.at, late)
					}
				}
			}
			continue
		}
		s.step(0)
	}
	if s.err != nil {
		t.Fatal(s.err)
	}
}

// TestStuckDeadlineLooksAtProgress: input-less rounds that leave the
// deadline due fail the node after maxStuckRounds only when they do
// nothing; rounds that make progress (the Status moved), however many, do
// not (a long catch-up keeps its deadline due, doing its share each
// round). Rounds that only send do fail: a core that sends the same
// message at every round of a deadline it leaves due floods its peers at
// the speed of its loop.
func TestStuckDeadlineLooksAtProgress(t *testing.T) {
	s := quietSim(t, 1)
	nd := s.nodes[0]
	due := nd.clock(s.now)
	out := shell.Output{Deadline: due, Status: nd.r.Status(), Messages: []protocol.Message{{From: nd.id}}}
	for i := 0; i <= maxStuckRounds && s.err == nil; i++ {
		s.armDeadline(nd, &out, nd.dl.fed, 0)
	}
	if s.err == nil {
		t.Fatalf("%d rounds that only sent a message, the deadline due, passed", maxStuckRounds+1)
	}
	s.err = nil
	nd.dl.stuck = 0
	for i := 0; i < 10*maxStuckRounds && s.err == nil; i++ {
		moved := shell.Output{Deadline: due, Status: nd.r.Status()}
		moved.Status.LEO += uint64(i + 1)
		s.armDeadline(nd, &moved, nd.dl.fed, 0)
	}
	if s.err != nil {
		t.Fatalf("rounds that moved the Status each failed as stuck: %v", s.err)
	}
	idle := shell.Output{Deadline: due, Status: nd.dl.status}
	for i := 0; i <= maxStuckRounds && s.err == nil; i++ {
		s.armDeadline(nd, &idle, nd.dl.fed, 0)
	}
	if s.err == nil {
		t.Fatalf("%d idle rounds with the deadline due passed", maxStuckRounds+1)
	}
}
