package simulation

import (
	"strings"
	"testing"

	"github.com/replog-io/replog/protocol"
)

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
