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
