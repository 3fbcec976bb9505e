package simulation

import (
	"strings"
	"testing"

	"github.com/replog-io/replog/protocol"
)

// wipedVoterSeeds are seeds (x1500 steps, consequence checks only) in
// which a core that judges voters by node ID alone (built with -tags
// replog_bug_wiped_voter: R56 off) loses a committed entry, the issue's
// scenario: a voter that held the entry is wiped and its new incarnation,
// its log empty, is counted as its old self (with the tag, each fails:
// "offset N ... became committed but is durable on only 1 voters"). Chosen
// again when R60 changed the runs' random streams.
var wipedVoterSeeds = []int64{55, 120, 3726}

// TestWipedVoterSeeds must fail when built with -tags
// replog_bug_wiped_voter (the new leader lacks a committed entry) and pass
// without (simulation/doc.go).
func TestWipedVoterSeeds(t *testing.T) {
	for _, seed := range wipedVoterSeeds {
		o := runOpts(seed, 1500)
		o.SafetyOnly = true // found by what the bug breaks, not by the rule checks
		res := Run(o)
		if res.Err != nil {
			t.Errorf("seed %d (x1500, -sim.safetyonly): %v", seed, res.Err)
			continue
		}
		if res.Faults.VoterWipes == 0 {
			t.Errorf("seed %d wiped no voter: it no longer tests what it was chosen for (%s)", seed, res.Faults)
		}
	}
}

// TestVoterMirrorHasTeeth: the checker's mirror of a node's voter sets is
// compared with the core's set in force (R55): a mirror that drifts (a
// set the core never appended) is caught at the node's next round.
func TestVoterMirrorHasTeeth(t *testing.T) {
	s := quietSim(t, 1)
	nd := s.nodes[0]
	if len(nd.vrows) == 0 {
		t.Fatalf("seed 1 converged with no voter set in %s's log", nd.id)
	}
	last := nd.vrows[len(nd.vrows)-1]
	nd.vrows = append(nd.vrows, protocol.VotersAt{Offset: last.Offset + 1, Voters: []protocol.Voter{{ID: nd.id, DirID: nd.dirID}}})
	for end := s.now + 10*s.p.fetchTimeout; s.err == nil && s.now < end; {
		s.step(0)
	}
	if s.err == nil || !strings.Contains(s.err.Error(), "(R55)") {
		t.Fatalf("a drifted mirror was not caught: %v", s.err)
	}
	// Positive control: the same run without the drift goes on clean.
	s = quietSim(t, 1)
	for end := s.now + 10*s.p.fetchTimeout; s.err == nil && s.now < end; {
		s.step(0)
	}
	if s.err != nil {
		t.Fatalf("without the drift: %v", s.err)
	}
}
