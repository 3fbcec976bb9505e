package simulation

import (
	"github.com/replog-io/replog/replica"
)

// Gossip: membership hints (memberlist's view), true, stale and false.

// gossip models memberlist: the node hears, a little later, which node
// claims to lead (possibly stale by then), and which nodes seem dead.
func (s *sim) gossip(nd *node) {
	for _, o := range s.nodes {
		if o != nd && s.blocked[o.idx][nd.idx] > 0 && s.rng.Intn(4) == 0 {
			// Cut off from o, memberlist would suspect it: a false (or
			// true) failure hint.
			s.schedule(s.between(ms(1), ms(20)), event{kind: evHint, node: nd.idx, inc: nd.inc,
				hint: replica.Hint{Kind: replica.HintNodeFailed, Node: o.id}})
		}
	}
	for _, o := range s.nodes {
		if o != nd && o.up && o.role == replica.RoleLeader && s.blocked[o.idx][nd.idx] == 0 {
			s.schedule(s.between(ms(1), ms(20)), event{kind: evHint, node: nd.idx, inc: nd.inc,
				hint: replica.Hint{Kind: replica.HintLeader, Node: o.id, Epoch: o.epoch}})
		}
	}
}

// gossipFailed tells every live node that nd seems dead (it may be back by
// the time they hear it: hints are advisory).
func (s *sim) gossipFailed(nd *node) {
	for _, o := range s.nodes {
		if o != nd && o.up {
			s.schedule(s.between(ms(1), ms(20)), event{kind: evHint, node: o.idx, inc: o.inc,
				hint: replica.Hint{Kind: replica.HintNodeFailed, Node: nd.id}})
		}
	}
}
