package replica

import (
	"testing"
)

// TestQuiescedLogHasNoDeadline (R96, R99): once every follower of an idle
// three-voter log has quiesced, no core of it has a deadline: passing
// time changes nothing in them (only PeerSilent, Resync or a message
// moves them), so a shell that ticks at deadlines (R97) runs no round
// for them at all. Positive control: the same log below level 10 keeps
// its parked fetches' deadlines.
func TestQuiescedLogHasNoDeadline(t *testing.T) {
	for _, c := range []struct {
		level    string
		quiesces bool
	}{{"10", true}, {"9", false}} {
		h := newHarness(t)
		h.run(t, "cluster", arg("voters", "n1,n2,n3"), arg("supports", c.level))
		h.run(t, "elect", arg("n1"))
		h.run(t, "propose", arg("n1"), arg("a"))
		h.run(t, "run", arg("+5s"))
		for _, id := range []string{"n2", "n3"} {
			if q := h.node(id).r.quiesced(); q != c.quiesces {
				t.Fatalf("level %s: %s quiesced %v, want %v", c.level, id, q, c.quiesces)
			}
		}
		for _, id := range []string{"n1", "n2", "n3"} {
			n := h.node(id)
			d := n.r.NextDeadline()
			if c.quiesces && !d.IsZero() {
				t.Errorf("level %s: %s (%s) has a deadline %v after the log quiesced", c.level, id, n.r.role, d.Sub(n.now))
			}
			if !c.quiesces && d.IsZero() {
				t.Errorf("level %s: %s (%s) has no deadline, though its fetches are parked with one", c.level, id, n.r.role)
			}
		}
	}
}
