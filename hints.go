package replog

import (
	"github.com/replog-io/replog/membership"
	"github.com/replog-io/replog/replica"
)

// coreHint turns a membership hint into the core's input: the one place
// where gossip's vocabulary meets the core's, so membership never imports
// the core. ok is false for a kind the core has no use for (none today;
// a newer membership may report more than the core knows).
func coreHint(h membership.Hint) (replica.Hint, bool) {
	var kind replica.HintKind
	switch h.Kind {
	case membership.NodeFailed:
		kind = replica.HintNodeFailed
	case membership.LeaderClaim:
		kind = replica.HintLeader
	case membership.MemberJoined:
		kind = replica.HintMember
	default:
		return replica.Hint{}, false
	}
	return replica.Hint{Kind: kind, Node: h.Node, Epoch: h.Epoch}, true
}
