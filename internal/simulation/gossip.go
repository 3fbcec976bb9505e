package simulation

import (
	"math"
	"time"

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
			s.scheduleHint(nd, s.between(ms(1), ms(20)), replica.HintNodeFailed, o.idx, 0)
		}
	}
	for _, o := range s.nodes {
		if o != nd && o.up && o.role == replica.RoleLeader && s.blocked[o.idx][nd.idx] == 0 {
			s.scheduleHint(nd, s.between(ms(1), ms(20)), replica.HintLeader, o.idx, o.epoch)
		}
	}
	if s.p.falseHintProb > 0 && s.xr.Float64() < s.p.falseHintProb {
		s.falseLeaderHint(nd)
	}
}

// falseLeaderHint sends nd a leader hint that is false, not merely stale
// (a confused or hostile gossip member): naming a voter that does not
// lead, a non-voter, or a bogus epoch far above any real one. Gossip gives
// hints only (docs/protocol.md §3.4): this must neither depose a leader nor keep a
// voter from following it (liveness.go), and a non-voter is never a leader.
func (s *sim) falseLeaderHint(nd *node) {
	var maxEpoch uint64
	var leader *node
	for _, o := range s.nodes {
		maxEpoch = max(maxEpoch, o.epoch)
		if o.up && o.role == replica.RoleLeader {
			leader = o
		}
	}
	h := replica.Hint{Kind: replica.HintLeader}
	switch k := s.xr.Intn(3); {
	case k == 1 && s.p.observers > 0:
		o := s.nodes[s.p.voters+s.xr.Intn(s.p.observers)]
		h.Node, h.Epoch = o.id, maxEpoch+uint64(s.xr.Intn(2))
		s.res.Faults.HintsNonVoter++
	case k == 2 || leader == nil && s.p.voters == 1:
		v := s.nodes[s.xr.Intn(s.p.voters)]
		h.Node, h.Epoch = v.id, maxEpoch+1+uint64(s.xr.Intn(1000))
		if s.xr.Intn(8) == 0 {
			h.Epoch = math.MaxUint64 - uint64(s.xr.Intn(2))
		}
		s.res.Faults.HintsBogusEpoch++
	default:
		v := s.nodes[s.xr.Intn(s.p.voters)]
		if v == leader {
			v = s.nodes[(v.idx+1)%s.p.voters]
		}
		if v == leader {
			return // one voter: nobody else to name
		}
		h.Node, h.Epoch = v.id, maxEpoch+uint64(s.xr.Intn(2))
		s.res.Faults.HintsWrongNode++
	}
	s.tracef("%s FALSE HINT leader=%s epoch=%d", nd.id, h.Node, h.Epoch)
	s.scheduleHint(nd, s.between(ms(1), ms(20)), h.Kind, s.byID[h.Node], h.Epoch)
}

// gossipFailed tells every live node that nd seems dead (it may be back by
// the time they hear it: hints are advisory).
func (s *sim) gossipFailed(nd *node) {
	for _, o := range s.nodes {
		if o != nd && o.up {
			s.scheduleHint(o, s.between(ms(1), ms(20)), replica.HintNodeFailed, nd.idx, 0)
		}
	}
}

// scheduleHint delivers to nd, after d, the hint that node about (an
// index) has kind and epoch.
func (s *sim) scheduleHint(nd *node, d time.Duration, kind replica.HintKind, about int, epoch uint64) {
	s.schedule(d, event{kind: evHint, node: nd.idx, inc: nd.inc, hkind: kind, id: about, wseq: epoch})
}

// memberIDs is what memberlist tells a node at its start, once it has
// joined: every other node of the cluster (the simulated join always
// reaches a member, as Options.Join naming the cluster's nodes does).
func (s *sim) memberIDs(nd *node) []string {
	ids := make([]string, 0, len(s.nodes)-1)
	for _, o := range s.nodes {
		if o != nd {
			ids = append(ids, o.id)
		}
	}
	return ids
}
