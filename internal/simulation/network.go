package simulation

import (
	"github.com/replog-io/replog/internal/shell"
	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/replica"
)

// The simulated network: delays, drops, duplicates, reordering and
// partitions between the nodes' cores.
//
// A message is normally tied to the receiver's incarnation: a restarted
// process has new connections and never sees what reached the old one. But
// a TCP lane also queues frames while it reconnects, and delivers them to
// whatever process accepts the new connection: in runs with params.xinc,
// some messages (and duplicates, which then may come much later) are
// lane-queued (event.inc = anyInc) and reach the receiver's incarnation
// that is up when they arrive, held while it is down. That is how a
// forwarded append duplicated before a leader restarted reaches the new
// leader process (it must not be appended twice: AppendRequest.Epoch).

// anyInc in a delivery event: the message goes to whichever incarnation of
// its receiver is up when it arrives.
const anyInc = -1

// laneRetries bounds how often a lane-queued message waits for its
// receiver to come back up before the lane gives it up.
const laneRetries = 4

// send puts a message on the simulated network.
func (s *sim) send(nd *node, m protocol.Message) {
	if s.tracing() {
		s.tracef("%s send %s", nd.id, m)
	}
	to, ok := s.byID[m.To]
	if !ok || m.From != nd.id {
		s.fail("%s: message with bad addresses: %s", nd.id, m)
		return
	}
	s.checkSend(nd, m)
	s.checkQuiescentSend(nd, to, m)
	s.noteSent(nd, m)
	faulting := s.faulting()
	if faulting && s.rng.Float64() < s.p.dropProb {
		s.tracef("  dropped")
		s.touchLink(nd.idx, to, s.now, "a dropped message")
		return
	}
	copies := 1
	var twin int32
	if faulting && s.rng.Float64() < s.p.dupProb {
		copies = 2
		if protocol.IsQuiescent(m) {
			s.lastTwin++
			twin = s.lastTwin
		}
	}
	if vr, ok := m.Body.(*protocol.VoteResponse); ok && (s.opts.ForgeVotes || s.opts.ForgePreVotes && vr.PreVote) && !vr.Granted && s.rng.Intn(2) == 0 {
		forged := *vr
		forged.Granted = true
		if s.opts.ForgePreVotes {
			forged.LeaderID = "" // a grant names no leader
		}
		m.Body = &forged
		s.tracef("  FORGED into %s", m)
	}
	for i := 0; i < copies; i++ {
		d := s.between(s.p.netMin, s.p.netMax)
		// Late messages (beyond a fetch timeout, in the harsh regime) are
		// a fault: only in the fault phase.
		late := faulting && s.rng.Float64() < s.p.slowProb
		if late {
			d += s.between(0, s.p.slowMax)
		}
		inc := s.nodes[to].inc
		if faulting && s.p.xincProb > 0 && s.rng.Float64() < s.p.xincProb*float64(i+1) {
			// Queued in a lane that reconnects: it may reach a later
			// incarnation. A duplicate (i=1) is more likely to be, and
			// may come as late as a restart takes.
			inc = anyInc
			if i == 1 {
				d += s.between(0, s.p.downMax+s.p.fetchTimeout)
			}
		}
		if i == 1 {
			s.res.Faults.Duplicates++
		}
		if late || i == 1 || inc == anyInc {
			s.touchLink(nd.idx, to, s.now+d, "a late, duplicated or lane-queued message")
			s.fc.lateSent[nd.idx][to] = s.now
		}
		// wseq carries the incarnation the message was sent to.
		s.schedule(d, event{kind: evDeliver, node: to, inc: inc, wseq: uint64(s.nodes[to].inc), msg: s.putMsg(m),
			clean: !late && i == 0 && inc != anyInc, twin: twin})
	}
}

// putMsg stores m for a delivery event and returns its index.
func (s *sim) putMsg(m protocol.Message) int32 {
	if n := len(s.freeMsgs); n > 0 {
		i := s.freeMsgs[n-1]
		s.freeMsgs = s.freeMsgs[:n-1]
		s.msgs[i] = m
		return i
	}
	s.msgs = append(s.msgs, m)
	return int32(len(s.msgs) - 1)
}

func (s *sim) deliver(ev event) {
	m := s.msgs[ev.msg]
	if !s.lanePending(ev) {
		// The event is spent (delivered or dropped): free its slot.
		s.msgs[ev.msg] = protocol.Message{}
		s.freeMsgs = append(s.freeMsgs, ev.msg)
	}
	s.deliverMsg(ev, m)
}

// lanePending says whether deliver will hold ev in its lane and retry it
// (the receiver is down).
func (s *sim) lanePending(ev event) bool {
	nd := s.nodes[ev.node]
	return ev.inc == anyInc && !nd.up && ev.id < laneRetries && s.blocked[s.byID[s.msgs[ev.msg].From]][nd.idx] == 0
}

func (s *sim) deliverMsg(ev event, m protocol.Message) {
	nd := s.nodes[ev.node]
	from := s.byID[m.From]
	if s.blocked[from][nd.idx] > 0 {
		s.tracef("%s lost (partition) %s", nd.id, m)
		return
	}
	if ev.inc == anyInc {
		if !nd.up {
			// The lane holds it and retries after reconnecting.
			if ev.id < laneRetries {
				ev.id++
				s.schedule(s.between(ms(1), s.p.downMax), ev)
			}
			return
		}
		if sent := ev.wseq; sent != 0 && uint64(nd.inc) != sent {
			s.res.Faults.CrossIncarnation++
			s.touchLink(from, nd.idx, s.now, "a message to an earlier incarnation")
			s.tracef("%s recv (sent to incarnation %d, arrives at %d)", nd.id, sent, nd.inc)
		}
	} else if !nd.up || nd.inc != ev.inc {
		return
	}
	if s.tracing() {
		s.tracef("%s recv %s", nd.id, m)
	}
	if s.heardMessage(nd, from, m, ev.twin) {
		return // a heartbeat: node-level, no core sees it
	}
	// Every node's contacts count: observers may become voters (voters.go).
	s.noteContact(nd, from, m, ev.clean)
	if vr, ok := m.Body.(*protocol.VoteRequest); ok && vr.VoterDirID != "" && vr.VoterDirID == nd.dirID {
		if nd.namedIn == nil {
			nd.namedIn = make(map[namedRound]bool)
		}
		nd.namedIn[namedRound{m.From, vr.Round}] = true
	}
	if fr, ok := m.Body.(*protocol.FetchResponse); ok && ev.clean && s.opts.DropAnswers && nd.role != replica.RoleObserver && s.rng.Intn(3) == 0 {
		s.tracef("%s SABOTAGE: answer %d dropped by the shell", nd.id, fr.FetchID)
		return
	}
	m, ok := s.atWire(m, from, nd.idx)
	if !ok {
		s.tracef("%s drop %s: its wire version cannot carry it", nd.id, m)
		return
	}
	s.input(nd, shell.Message(m))
}
