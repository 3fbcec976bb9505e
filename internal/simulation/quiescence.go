package simulation

import (
	nodecontact "github.com/replog-io/replog/internal/contact"
	"github.com/replog-io/replog/internal/shell"
	"github.com/replog-io/replog/protocol"
)

// Quiescent idle logs (docs/protocol.md R98-R100). Every process has the
// node-level contact clock the TCP transport drives in production
// (internal/contact), on its own clock: a delivered message of any kind
// is contact, and so is a heartbeat, which a node sends on its ticks to
// a peer it sent nothing to for FetchMaxWait. Heartbeats travel on the
// simulated network like any message (delays, loss, duplicates,
// partitions) and reach no core (a duplicated quiescent message is
// counted once: heardMessage); a heartbeat whose counts show a lost
// quiescent message becomes a Resync event, a peer silent for
// FetchTimeout a PeerSilent event. Heartbeats and quiescent fetches go
// only where both ends speak protocol.QuiescenceVersion: the checker
// fails a run that sends either to a node of an older release.

// wireBetween is the wire version nodes a and b speak (the lower of
// their releases' highest).
func (s *sim) wireBetween(a, b int) int {
	if !s.p.ver.on {
		return protocol.Version
	}
	return min(s.ver.nodes[a].supported, s.ver.nodes[b].supported)
}

// startContact gives nd's new process its contact clock: a session of
// its own (the incarnation), heartbeats to the peers whose release reads
// them.
func (s *sim) startContact(nd *node) {
	now := nd.clock(s.now)
	nd.contact = nodecontact.New(uint64(nd.idx)<<32|uint64(nd.inc), s.p.fetchMaxWait, s.p.fetchTimeout)
	nd.asked = map[string]bool{}
	for _, o := range s.nodes {
		if o != nd {
			nd.contact.Enable(o.id, s.wireBetween(nd.idx, o.idx) >= protocol.QuiescenceVersion, now)
		}
	}
}

// scheduleContact arms nd's contact timer (evContact), the node's one
// timer of its own besides its core's: every tenth to fifth of
// FetchMaxWait, so that a heartbeat leaves and a silence is seen at most
// that late (the transport's timer in production, transport/contact.go,
// sleeps until the next instant due instead).
func (s *sim) scheduleContact(nd *node) {
	s.schedule(s.between(s.p.fetchMaxWait/10, s.p.fetchMaxWait/5), event{kind: evContact, node: nd.idx, inc: nd.inc})
}

// contactTick is nd's node-level contact timer: it sends the heartbeats
// due and hands its core a PeerSilent for each peer that fell silent (a
// paused process's timer waits with it: deferredWhilePaused).
func (s *sim) contactTick(nd *node) {
	if nd.contact == nil {
		return
	}
	now := nd.clock(s.now)
	for _, o := range s.nodes {
		if o != nd {
			// A peer's release changes at its restarts.
			nd.contact.Enable(o.id, s.wireBetween(nd.idx, o.idx) >= protocol.QuiescenceVersion, now)
		}
	}
	for _, id := range nd.contact.Due(now) {
		s.res.Heartbeats++
		hb := nd.contact.Heartbeat(id)
		if hb.Resync && nd.asked[id] {
			s.res.ResyncAsksRepeated++
		}
		nd.asked[id] = hb.Resync
		s.send(nd, protocol.Message{From: nd.id, To: id, Body: hb})
	}
	for _, id := range nd.contact.Silent(now) {
		s.input(nd, shell.PeerSilent(id))
	}
}

// noteSent records m, sent by nd, on nd's contact clock.
func (s *sim) noteSent(nd *node, m protocol.Message) {
	if nd.contact != nil {
		nd.contact.Sent(m.To, m, nd.clock(s.now))
	}
}

// checkQuiescentSend fails a run whose node sends a quiescent message or
// a heartbeat to a node whose release cannot read it.
func (s *sim) checkQuiescentSend(nd *node, to int, m protocol.Message) {
	if f, ok := m.Body.(*protocol.FetchRequest); ok && f.Quiescent {
		s.res.QuiescentFetches++
	}
	_, hb := m.Body.(*protocol.Heartbeat)
	if (hb || protocol.IsQuiescent(m)) && s.wireBetween(nd.idx, to) < protocol.QuiescenceVersion {
		s.fail("%s sends %s to %s, whose wire version is %d (quiescence needs %d)", nd.id, m, s.nodes[to].id,
			s.wireBetween(nd.idx, to), protocol.QuiescenceVersion)
	}
}

// heardMessage records m, delivered to nd from node from, on nd's
// contact clock. It reports whether m is a heartbeat (consumed here: no
// core sees it). twin numbers m's pair of copies if the network
// duplicated it (a quiescent message): the counts of quiescent messages
// (R100) rest on the transport delivering each frame at most once, as
// TCP does, so only the first copy to arrive is counted; the other is
// contact and reaches the core (which must take duplicates) but is not
// counted. Counted twice, it would hide a later quiescent message lost
// on the same link: the receiver's count would match the sender's.
func (s *sim) heardMessage(nd *node, from int, m protocol.Message, twin int32) bool {
	if nd.contact == nil {
		return false
	}
	if twin != 0 {
		if s.twins == nil {
			s.twins = make(map[int32]bool)
		}
		if s.twins[twin] {
			delete(s.twins, twin)                        // both copies are spent
			m = protocol.Message{From: m.From, To: m.To} // contact, not counted
		} else {
			s.twins[twin] = true
		}
	}
	nd.contact.Heard(m.From, m, nd.clock(s.now))
	hb, ok := m.Body.(*protocol.Heartbeat)
	if !ok {
		return false
	}
	if nd.contact.OnHeartbeat(m.From, hb) {
		s.res.Resyncs++
		s.input(nd, shell.Resync(m.From))
	}
	return true
}
