package replog

import (
	"slices"
	"testing"
	"time"
)

// TestWipedSoleBootstrapVoterJoinsItsCluster: a cluster begun with one
// voter (every node's Options.Voters is just n1) grows to three; then n1's
// directory is wiped. Its options make it the sole bootstrap voter of an
// empty log, which before R60 was enough to elect itself and start a second
// cluster: the entries the first one acknowledged were not in it. Now it
// asks the members gossip's join found whether a cluster exists, observes,
// and is replaced at its new directory; it reads what was acknowledged.
func TestWipedSoleBootstrapVoterJoinsItsCluster(t *testing.T) {
	c := newCluster(t, 3, func(id string, o *Options) { o.Voters = []string{"n1"} })
	ctx, cancel := appendCtx(t)
	defer cancel()
	for _, id := range []string{"n2", "n3"} {
		if err := c.nodes["n1"].AddVoter(ctx, id); err != nil {
			t.Fatalf("AddVoter(%s): %v", id, err)
		}
	}
	for range 3 {
		if _, err := c.nodes["n1"].Append(ctx, []byte("acked")); err != nil {
			t.Fatal(err)
		}
	}
	old, _ := voterOf(c.nodes["n2"].Status(), "n1")
	l := c.wipe("n1")
	dir := l.Status().DirectoryID
	if dir == old.DirectoryID {
		t.Fatalf("the wiped node kept directory %q", dir)
	}
	waitFor(t, "n1 a voter again at its new directory", 30*time.Second, func() bool {
		v, ok := voterOf(c.nodes["n2"].Status(), "n1")
		return ok && v.DirectoryID == dir
	})
	got := readN(t, l, 3, 20*time.Second)
	var data []string
	for _, e := range got {
		data = append(data, string(e.Data))
	}
	if want := []string{"acked", "acked", "acked"}; !slices.Equal(data[:3], want) {
		t.Fatalf("the new incarnation of n1 reads %q, want %q first: it did not join the cluster that acknowledged them", data, want)
	}
	if st := l.Status(); st.Epoch == 1 && st.Role == RoleLeader {
		t.Fatalf("n1 leads epoch 1 again: a second cluster (%+v)", st)
	}
}
