package shell

import (
	"errors"
	"testing"
	"time"

	"github.com/replog-io/replog/replica"
)

// TestTransferEvent: a transfer event is resolved as a proposal is: a
// refusal in its round, the outcome once the core's transfer ends (every
// event that joined it gets it), and a proposal made meanwhile on the
// leader is resolved not-leader naming the successor, which then leads.
func TestTransferEvent(t *testing.T) {
	c := newCluster(t, "a", "b", "c")
	leader, now := c.elect(t)
	succ, follower := "a", "b"
	switch leader {
	case "a":
		succ, follower = "b", "c"
	case "b":
		follower = "c"
	}
	lp, fp := c.procs[leader], c.procs[follower]
	resolved := map[string][]Resolved{}
	rounds := func(n int) {
		for range n {
			now = now.Add(5 * time.Millisecond)
			for _, id := range c.ids {
				out := c.procs[id].round(t, now)
				c.send(out.Messages)
				resolved[id] = append(resolved[id], out.Resolved...)
			}
		}
	}
	rounds(5)

	// Refusals, in the round of the event: a follower, and no successor.
	fp.inbox = append(fp.inbox, Transfer(1, ""))
	lp.inbox = append(lp.inbox, Transfer(2, "zz"))
	rounds(1)
	var nle *replica.NotLeaderError
	if rs := resolved[follower]; len(rs) != 1 || rs[0].ID != 1 || !errors.As(rs[0].Err, &nle) || nle.LeaderID != leader {
		t.Fatalf("on a follower: %+v, want NotLeaderError naming %s", rs, leader)
	}
	if rs := resolved[leader]; len(rs) != 1 || rs[0].ID != 2 || !errors.Is(rs[0].Err, replica.ErrNoSuccessor) {
		t.Fatalf("to a non-voter: %+v, want ErrNoSuccessor", rs)
	}
	if lp.n.Pending() != 0 || fp.n.Pending() != 0 {
		t.Fatalf("refused events still pending: %d, %d", lp.n.Pending(), fp.n.Pending())
	}

	// The transfer, a proposal held meanwhile, and a second event that
	// joins the transfer.
	clear(resolved)
	lp.inbox = append(lp.inbox, Transfer(3, succ), Propose(4, [][]byte{[]byte("x")}), Transfer(5, ""))
	rounds(40)
	got := map[uint64]error{}
	for _, r := range resolved[leader] {
		got[r.ID] = r.Err
	}
	if len(resolved[leader]) != 3 || got[3] != nil || got[5] != nil {
		t.Fatalf("resolved %+v, want 3 and 5 handed over", resolved[leader])
	}
	if !errors.As(got[4], &nle) || nle.LeaderID != succ {
		t.Fatalf("the held proposal: %v, want NotLeaderError naming %s", got[4], succ)
	}
	if st := c.procs[succ].out.Status; st.Role != replica.RoleLeader {
		t.Fatalf("%s is %v, want leader", succ, st.Role)
	}
	if st := lp.out.Status; st.Role != replica.RoleFollower || st.LeaderID != succ {
		t.Fatalf("the old leader: %v following %q", st.Role, st.LeaderID)
	}
}

// TestTransferEventClosed: a transfer waiting when the Node closes is
// resolved with the close, like a proposal.
func TestTransferEventClosed(t *testing.T) {
	c := newCluster(t, "a", "b", "c")
	leader, now := c.elect(t)
	lp := c.procs[leader]
	for _, id := range c.ids {
		if id != leader {
			lp.inbox = append(lp.inbox, Transfer(1, id))
			break
		}
	}
	if out := lp.round(t, now.Add(time.Millisecond)); len(out.Resolved) != 0 {
		t.Fatalf("resolved at once: %+v", out.Resolved)
	}
	rs := lp.n.Close(errors.New("closing"))
	if len(rs) != 1 || rs[0].ID != 1 || !errors.Is(rs[0].Err, replica.ErrUnknownOutcome) {
		t.Fatalf("close resolved %+v", rs)
	}
}
