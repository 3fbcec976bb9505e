package simulation

import (
	"github.com/replog-io/replog/internal/shell"
	"github.com/replog-io/replog/replica"
)

// Connections that close (docs/protocol.md R69). A process that crashes
// closes its connections: its kernel ends them, and every live node sees
// them end a network delay later (the transport's PeerDown). A machine that
// loses power, a paused process and a partition close nothing: their links
// only go quiet. The nemesis also resets links between live nodes.

// hintPeerDown marks an evHint that is a PeerDown report, not a gossip
// hint: the connection to or from node id closed. It is no replica.HintKind.
const hintPeerDown replica.HintKind = 0xFF

// closeLinks schedules, for every live node, the report that crashed node
// nd's connections closed; a power cut reports nothing.
func (s *sim) closeLinks(nd *node, power bool) {
	if power || s.opts.NoConnClose {
		return
	}
	for _, o := range s.nodes {
		if o != nd && o.up {
			s.scheduleHint(o, s.between(s.p.netMin, s.p.netMax), hintPeerDown, nd.idx, 0)
		}
	}
}

// peerDown feeds nd the report that its connection to node about closed.
// Like a gossip hint, it may start an election sooner (rule 3 of the
// liveness checks lets a voter told so leave its leader), never decide one.
func (s *sim) peerDown(nd *node, about int) {
	id := s.nodes[about].id
	s.hash.byte(0xB9)
	s.hash.str(id)
	s.tracef("%s peer-down %s", nd.id, id)
	nd.failHintAt = s.now
	s.input(nd, shell.PeerDown(id))
}

// linkResetProb is the share of the crash timer's firings that reset a
// connection between two live nodes instead (a flapping link, a proxy or a
// NAT dropping a connection): both ends see it close, neither process
// died. It is a fault on both nodes: the follower it hits forgets its
// leader contact (R69) and, until its leader answers again (within its own
// pre-vote's round trip), grants pre-votes, so a second fault in that
// window may depose a live leader; alone it deposes no one
// (testdata/peer_down.txt).
const linkResetProb = 0.1

// resetLink resets the connections between two live nodes.
func (s *sim) resetLink() {
	a := s.randomUp()
	b := s.randomUp()
	if a == nil || b == nil || a == b {
		return
	}
	until := s.now + s.p.netMax
	s.tracef("RESET link %s-%s", a.id, b.id)
	s.touchNode(a.idx, until, "connection reset")
	s.touchNode(b.idx, until, "connection reset")
	d := s.between(s.p.netMin, s.p.netMax)
	s.scheduleHint(a, d, hintPeerDown, b.idx, 0)
	s.scheduleHint(b, d, hintPeerDown, a.idx, 0)
}
