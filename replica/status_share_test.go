package replica

import (
	"maps"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/replog-io/replog/protocol"
)

// Status shares with the previous Status only what did not change: the
// voter slice and the leader's RemoteLEO and CaughtUp maps of two calls
// with nothing between them are the same ones (the shell asks at every
// round), and once any of them changes the next Status has a new one,
// while every earlier Status still reads what it read when it was taken.
func TestStatusSharesOnlyWhatDidNotChange(t *testing.T) {
	h := newHarness(t)
	h.run(t, "cluster", arg("voters", "n1,n2,n3"))
	h.run(t, "elect", arg("n1"))
	h.run(t, "propose", arg("n1"), arg("a"))
	h.run(t, "run", arg("+1s"), arg("nostatus"))
	n1 := h.node("n1")

	type view struct {
		voters    []protocol.Voter
		remoteLEO map[string]uint64
		caughtUp  map[string]bool
	}
	copyOf := func(s Status) view {
		return view{slices.Clone(s.Voters), maps.Clone(s.RemoteLEO), maps.Clone(s.CaughtUp)}
	}
	unchanged := func(what string, s Status, want view) {
		t.Helper()
		if !slices.Equal(s.Voters, want.voters) || !maps.Equal(s.RemoteLEO, want.remoteLEO) || !maps.Equal(s.CaughtUp, want.caughtUp) {
			t.Errorf("%s: an earlier Status changed under its caller: voters %v remote LEOs %v caught up %v, want %v %v %v",
				what, s.Voters, s.RemoteLEO, s.CaughtUp, want.voters, want.remoteLEO, want.caughtUp)
		}
	}
	sameMap := func(a, b any) bool { return reflect.ValueOf(a).Pointer() == reflect.ValueOf(b).Pointer() }
	sameSlice := func(a, b []protocol.Voter) bool { return len(a) > 0 && len(b) > 0 && &a[0] == &b[0] }

	s1 := n1.r.Status()
	if s1.Role != RoleLeader || len(s1.Voters) != 3 || len(s1.RemoteLEO) != 2 || !s1.CaughtUp["n2"] || !s1.CaughtUp["n3"] {
		t.Fatalf("n1's Status %+v: want the leader, 3 voters, both followers known and caught up", s1)
	}
	v1 := copyOf(s1)
	s2 := n1.r.Status()
	if !sameSlice(s1.Voters, s2.Voters) || !sameMap(s1.RemoteLEO, s2.RemoteLEO) || !sameMap(s1.CaughtUp, s2.CaughtUp) {
		t.Error("two Status calls with nothing between them built new voters, remote LEOs or caught-up maps")
	}

	// n2's LEO moves (n3 is down): a new RemoteLEO, the rest shared.
	h.run(t, "crash", arg("n3"))
	h.run(t, "propose", arg("n1"), arg("b"))
	h.run(t, "stabilize")
	s3 := n1.r.Status()
	if s3.RemoteLEO["n2"] <= s1.RemoteLEO["n2"] {
		t.Fatalf("n2's remote LEO %d after an append, was %d", s3.RemoteLEO["n2"], s1.RemoteLEO["n2"])
	}
	unchanged("after n2's LEO moved", s1, v1)
	if sameMap(s1.RemoteLEO, s3.RemoteLEO) {
		t.Error("a changed RemoteLEO is the earlier Status's map")
	}
	if !sameSlice(s1.Voters, s3.Voters) {
		t.Error("the voters did not change, but Status built a new slice")
	}
	v3 := copyOf(s3)

	// n3 stops counting as caught up (its fetch offset below the HW, or
	// FetchTimeout without its fetch): a new CaughtUp against the first.
	h.run(t, "run", arg("n1"), arg("n2"), arg("+"+(n1.cfg.FetchTimeout+time.Second).String()), arg("nostatus"))
	s4 := n1.r.Status()
	if s4.Role != RoleLeader || s4.CaughtUp["n3"] || !s4.CaughtUp["n2"] {
		t.Fatalf("after FetchTimeout without n3: %v, caught up %v; want the leader, n3 not caught up, n2 caught up", s4.Role, s4.CaughtUp)
	}
	unchanged("after n3 fell behind (first Status)", s1, v1)
	unchanged("after n3 fell behind", s3, v3)
	if sameMap(s1.CaughtUp, s4.CaughtUp) {
		t.Error("a changed CaughtUp is the earlier Status's map")
	}
	if maps.Equal(s3.CaughtUp, s4.CaughtUp) != sameMap(s3.CaughtUp, s4.CaughtUp) {
		t.Errorf("caught up %v then %v: shared %t, want shared only if the same", s3.CaughtUp, s4.CaughtUp, sameMap(s3.CaughtUp, s4.CaughtUp))
	}
	v4 := copyOf(s4)

	// The voter set changes: a new Voters.
	h.run(t, "change", arg("n1"), arg("remove", "n3"))
	h.run(t, "stabilize")
	s5 := n1.r.Status()
	if len(s5.Voters) != 2 {
		t.Fatalf("voters %v after n3's removal, want 2", s5.Voters)
	}
	unchanged("after the voter change (first Status)", s1, v1)
	unchanged("after the voter change", s4, v4)
	if sameSlice(s4.Voters, s5.Voters) {
		t.Error("a changed Voters is the earlier Status's slice")
	}
}
