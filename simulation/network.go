package simulation

import (
	"github.com/replog-io/replog/transport"
)

// The simulated network: delays, drops, duplicates, reordering and
// partitions between the nodes' cores.

// send puts a message on the simulated network.
func (s *sim) send(nd *node, m transport.Message) {
	if s.tracing() {
		s.tracef("%s send %s", nd.id, m)
	}
	to, ok := s.byID[m.To]
	if !ok || m.From != nd.id {
		s.fail("%s: message with bad addresses: %s", nd.id, m)
		return
	}
	s.checkSend(nd, m)
	if s.phase == phaseFaults && s.rng.Float64() < s.p.dropProb {
		s.tracef("  dropped")
		return
	}
	copies := 1
	if s.phase == phaseFaults && s.rng.Float64() < s.p.dupProb {
		copies = 2
	}
	if vr, ok := m.Body.(*transport.VoteResponse); ok && s.opts.ForgeVotes && !vr.Granted && s.rng.Intn(2) == 0 {
		forged := *vr
		forged.Granted = true
		m.Body = &forged
		s.tracef("  FORGED into %s", m)
	}
	for i := 0; i < copies; i++ {
		d := s.between(s.p.netMin, s.p.netMax)
		// Late messages (beyond a fetch timeout, in the harsh regime) are
		// a fault: only in the fault phase.
		if s.phase == phaseFaults && s.rng.Float64() < s.p.slowProb {
			d += s.between(0, s.p.slowMax)
		}
		// A message is tied to the receiver's incarnation: a restarted
		// process has new connections and never sees what was sent to
		// the old one.
		s.schedule(d, event{kind: evDeliver, node: to, inc: s.nodes[to].inc, msg: m})
	}
}

func (s *sim) deliver(ev event) {
	nd := s.nodes[ev.node]
	from := s.byID[ev.msg.From]
	if s.blocked[from][nd.idx] > 0 {
		s.tracef("%s lost (partition) %s", nd.id, ev.msg)
		return
	}
	if !nd.up || nd.inc != ev.inc {
		return
	}
	if s.tracing() {
		s.tracef("%s recv %s", nd.id, ev.msg)
	}
	nd.r.Step(ev.msg)
	s.afterInput(nd)
}
