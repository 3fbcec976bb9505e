package replica

import (
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// run is one harness command, as a scenario file would give it.
func (h *harness) run(t *testing.T, cmd string, args ...datadriven.CmdArg) string {
	return h.handle(t, &datadriven.TestData{Cmd: cmd, CmdArgs: args})
}

func arg(key string, vals ...string) datadriven.CmdArg {
	return datadriven.CmdArg{Key: key, Vals: vals}
}

// TestFeatureLevelRowsStayBounded (R68): retention copies the level entry
// above the log start at every deletion that passes it, and the rows the
// replicas keep of level entries stay a handful however many deletions
// there are: below the readable HW only the newest is kept. The level
// survives every deletion, on the leader and the follower.
func TestFeatureLevelRowsStayBounded(t *testing.T) {
	h := newHarness(t)
	h.run(t, "cluster", arg("voters", "n1,n2"), arg("supports", "7"))
	h.run(t, "elect", arg("n1"))
	h.run(t, "run", arg("+3s"))
	for i := 0; i < 50; i++ {
		h.run(t, "propose", arg("n1"), arg("x"))
		h.run(t, "run", arg("+100ms"), arg("nostatus"))
		out := h.run(t, "delete", arg("n1"), arg("before", "1000"))
		if strings.Contains(out, "error") {
			t.Fatalf("deletion %d: %s", i, out)
		}
		h.run(t, "run", arg("+100ms"), arg("nostatus"))
	}
	for _, id := range []string{"n1", "n2"} {
		r := h.node(id).r
		if st := r.Status(); st.FeatureLevel != 7 || st.LogStart < 50 {
			t.Fatalf("%s: level %d, log start %d; want 7 after 50 deletions", id, st.FeatureLevel, st.LogStart)
		}
		if n := len(r.keys.levels); n > 3 {
			t.Fatalf("%s keeps %d level rows after 50 deletions: %v", id, n, r.keys.levels)
		}
	}
}

// TestLevelReportOfAHungUpNodeDoesNotStand (R68 with R69): a voter that
// reported level 7 and then hung up may be restarting into the previous
// release, so the leader does not raise the level on that report; with
// the voter still connected (the positive control) it does.
func TestLevelReportOfAHungUpNodeDoesNotStand(t *testing.T) {
	for _, hangUp := range []bool{false, true} {
		h := newHarness(t)
		h.run(t, "cluster", arg("voters", "n1,n2"), arg("supports", "7"))
		h.run(t, "elect", arg("n1"))
		// Just short of the leader's first FetchTimeout, before which it
		// raises nothing: n2 has reported 7 with its every fetch.
		h.run(t, "run", arg("+1900ms"), arg("nostatus"))
		if got := h.node("n1").r.Status().FeatureLevel; got != 6 {
			t.Fatalf("level %d before the leader's first FetchTimeout, want 6", got)
		}
		if hangUp {
			h.run(t, "crash", arg("n2"))
			h.run(t, "hint", arg("n1"), arg("down", "n2"))
		}
		h.run(t, "run", arg("+300ms"), arg("nostatus"))
		want := 7
		if hangUp {
			want = 6
		}
		if got := h.node("n1").r.logLevel(); got != want {
			t.Fatalf("n2 hung up %v: the leader's log is at level %d, want %d", hangUp, got, want)
		}
	}
}
