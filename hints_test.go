package replog

import (
	"testing"

	"github.com/replog-io/replog/membership"
	"github.com/replog-io/replog/replica"
)

// TestCoreHint: each membership hint reaches the core as the hint of the
// same meaning, node and epoch; an unknown kind is dropped, not passed on
// as some other kind.
func TestCoreHint(t *testing.T) {
	cases := []struct {
		in   membership.Hint
		want replica.Hint
		ok   bool
	}{
		{membership.Hint{Kind: membership.NodeFailed, Node: "n2", Epoch: 4}, replica.Hint{Kind: replica.HintNodeFailed, Node: "n2", Epoch: 4}, true},
		{membership.Hint{Kind: membership.LeaderClaim, Node: "n3", Epoch: 7}, replica.Hint{Kind: replica.HintLeader, Node: "n3", Epoch: 7}, true},
		{membership.Hint{Kind: membership.MemberJoined, Node: "n4"}, replica.Hint{Kind: replica.HintMember, Node: "n4"}, true},
		{membership.Hint{Kind: 0, Node: "n3", Epoch: 7}, replica.Hint{}, false},
		{membership.Hint{Kind: 99, Node: "n3", Epoch: 7}, replica.Hint{}, false},
	}
	for _, c := range cases {
		got, ok := coreHint(c.in)
		if got != c.want || ok != c.ok {
			t.Errorf("coreHint(%+v) = %+v, %t; want %+v, %t", c.in, got, ok, c.want, c.ok)
		}
	}
}
