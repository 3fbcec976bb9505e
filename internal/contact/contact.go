// Package contact holds a node's contact with its peers (docs/protocol.md
// R98, R100): when it last heard anything from each peer, when it last
// sent anything to it, whether a heartbeat is due, which peers fell
// silent, and the counts of quiescent messages that find one lost. It is
// deterministic (no clock, goroutine or lock of its own): the TCP
// transport drives it under its lock with the wall clock, the simulation
// with its own, so both run one definition of the heartbeat and silence
// decisions.
package contact

import (
	"slices"
	"time"

	"github.com/replog-io/replog/protocol"
)

// Clock is one node's contact with its peers. The zero value is not
// usable: call New.
type Clock struct {
	session  uint64
	interval time.Duration
	timeout  time.Duration
	peers    map[string]*peer
	ids      []string // sorted, for a deterministic order
}

type peer struct {
	heard, sent time.Time
	// on: heartbeats go to this peer (it speaks QuiescenceVersion).
	on bool
	// silent: Silent reported the peer since it was last heard.
	silent bool
	// sentQ counts the quiescent messages sent to the peer in this
	// session; recvQ those received from it in its session recvSession;
	// prevQ is the count its previous heartbeat carried; lostQ those
	// taken for lost (found by a count, R100), so that one loss is found
	// once.
	sentQ, recvQ, prevQ, lostQ uint64
	recvSession                uint64
	// asking: this node's heartbeats ask the peer to resync (R100),
	// until the peer's count passes askMark (the count its latest
	// heartbeat carried when the asking began or that heartbeat's
	// session started): it then sent a quiescent message after the ask
	// could have reached it.
	asking  bool
	askMark uint64
	// askNow: the next heartbeat, due at once, is the first to ask.
	askNow bool
	// answer: the peer asked this node to resync since the last
	// heartbeat to it; the next one, which tells the peer this node's
	// count, is due within half an interval of the last (R109).
	answer bool
	// hbSent is when a heartbeat last went to the peer.
	hbSent time.Time
}

// New returns a Clock for a node whose session (incarnation) is session
// (random, so that a restart is told apart), which sends a heartbeat to a
// peer that has been sent nothing for interval (FetchMaxWait) and calls
// a peer silent when nothing came from it for timeout (FetchTimeout).
func New(session uint64, interval, timeout time.Duration) *Clock {
	return &Clock{session: session, interval: interval, timeout: timeout, peers: make(map[string]*peer)}
}

func (c *Clock) peer(id string) *peer {
	p := c.peers[id]
	if p == nil {
		p = &peer{}
		c.peers[id] = p
		i, _ := slices.BinarySearch(c.ids, id)
		c.ids = slices.Insert(c.ids, i, id)
	}
	return p
}

// Enable says whether heartbeats go to peer id: only to a peer that reads
// them (one that speaks protocol.QuiescenceVersion). Its contact clock
// starts at now, as if just heard from: a peer is not silent before it
// could have been heard.
func (c *Clock) Enable(id string, on bool, now time.Time) {
	p := c.peer(id)
	if on && !p.on && p.heard.Before(now) {
		p.heard = now
	}
	p.on = on
}

// Heard records a message m received from peer id at now: any
// authenticated message of any log counts as contact (R98), and a
// quiescent one is counted (R100).
func (c *Clock) Heard(id string, m protocol.Message, now time.Time) {
	p := c.peer(id)
	if now.After(p.heard) {
		p.heard = now
	}
	p.silent = false
	if protocol.IsQuiescent(m) {
		p.recvQ++
	}
}

// Sent records a message m sent to peer id at now.
func (c *Clock) Sent(id string, m protocol.Message, now time.Time) {
	p := c.peer(id)
	if now.After(p.sent) {
		p.sent = now
	}
	if _, ok := m.Body.(*protocol.Heartbeat); ok && now.After(p.hbSent) {
		p.hbSent = now
	}
	if protocol.IsQuiescent(m) {
		p.sentQ++
	}
}

// LastHeard is when anything was last heard from peer id (zero: never).
func (c *Clock) LastHeard(id string) time.Time {
	if p := c.peers[id]; p != nil {
		return p.heard
	}
	return time.Time{}
}

// Due returns the peers a heartbeat is due to at now, in ID order: each
// enabled peer sent nothing for interval, one this node just began to
// ask to resync, one it still asks that was sent no heartbeat for
// interval (other traffic to it does not carry the request), and one
// that asked this node and was sent no heartbeat for half an interval
// (the answer tells it this node's count, which its asking waits for,
// also while other traffic goes to it). The caller sends each
// Heartbeat(id) (and records it with Sent).
func (c *Clock) Due(now time.Time) []string {
	var due []string
	for _, id := range c.ids {
		if p := c.peers[id]; p.on && !c.dueAt(p).After(now) {
			due = append(due, id)
		}
	}
	return due
}

// dueAt is when the next heartbeat to p falls due. Half an interval
// bounds the answers: two nodes that ask each other send each other at
// most two heartbeats an interval.
func (c *Clock) dueAt(p *peer) time.Time {
	if p.askNow {
		return p.sent
	}
	at := p.sent.Add(c.interval)
	if p.asking {
		at = minTime(at, p.hbSent.Add(c.interval))
	}
	if p.answer {
		at = minTime(at, p.hbSent.Add(c.interval/2))
	}
	return at
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// NextDue is when the next heartbeat falls due (zero: none enabled), for
// a caller that sleeps until then.
func (c *Clock) NextDue() time.Time {
	var next time.Time
	for _, id := range c.ids {
		p := c.peers[id]
		if !p.on {
			continue
		}
		if at := c.dueAt(p); next.IsZero() || at.Before(next) {
			next = at
		}
	}
	return next
}

// Heartbeat returns the heartbeat for peer id: it asks the peer to
// resync while this node asks (see OnHeartbeat).
func (c *Clock) Heartbeat(id string) *protocol.Heartbeat {
	p := c.peer(id)
	p.askNow, p.answer = false, false
	return &protocol.Heartbeat{Session: c.session, Quiescent: p.sentQ, Resync: p.asking}
}

// Asking reports whether this node's heartbeats ask peer id to resync.
func (c *Clock) Asking(id string) bool {
	p := c.peers[id]
	return p != nil && p.asking
}

// ask makes the heartbeats to p ask it to resync, the next one at once.
func (p *peer) ask() {
	p.asking, p.askMark, p.askNow = true, p.prevQ, true
}

// OnHeartbeat takes heartbeat hb from the peer id (the caller records it
// with Heard too). It reports whether this node's logs must resync with
// the peer (R100): the peer asks, or a quiescent message it sent before
// its previous heartbeat never came (then this node asks the peer to
// resync too, the next heartbeat at once). Counting against the previous
// heartbeat's count, not this one's, leaves a message that travels on
// another lane, or was delayed, a heartbeat interval to arrive before it
// counts as lost.
//
// The request is repeated in every heartbeat to the peer, at least one
// per interval, until the peer's count moves (R109): a heartbeat can be
// lost as any message can, and the peer's logs act on the first that
// arrives (a follower quiesced here fetches again and quiesces anew, a
// leader answers the quiescent fetch it parks), each a quiescent message
// that moves the count. A node asked answers with a heartbeat soon (see
// Due), so that the asker learns the count even while other traffic
// keeps the asked node's heartbeats from falling due. A peer with
// nothing quiescent here keeps being asked, which its logs ignore, until
// one quiesces.
func (c *Clock) OnHeartbeat(id string, hb *protocol.Heartbeat) (resync bool) {
	p := c.peer(id)
	if hb.Session != p.recvSession {
		// A new incarnation: what its predecessor sent is gone with it
		// (the closed connection is its own news, R69); a request still
		// asked is asked of it, counted from its own start.
		p.recvSession, p.recvQ, p.prevQ, p.lostQ, p.askMark = hb.Session, 0, 0, 0, 0
	}
	if p.asking && hb.Quiescent > p.askMark {
		p.asking = false
	}
	resync = hb.Resync
	p.answer = p.answer || hb.Resync
	if p.recvQ+p.lostQ > hb.Quiescent {
		// A message taken for lost was only late (delayed, or on the
		// other connection) and is counted now: it must not stand in
		// for a later one that is lost. No more came than the peer sent.
		p.lostQ = hb.Quiescent - min(p.recvQ, hb.Quiescent)
	}
	lost := p.recvQ+p.lostQ < p.prevQ
	if lost {
		p.lostQ = p.prevQ - p.recvQ
	}
	p.prevQ = hb.Quiescent
	if lost {
		resync = true
		p.ask()
	}
	return resync
}

// Lost records that a quiescent message from peer id was received but
// lost on this side (a full queue dropped it): the logs resync (the
// caller tells them), and the next heartbeat, due at once, asks the peer
// to resync too.
func (c *Clock) Lost(id string) {
	c.peer(id).ask()
}

// LostAll is Lost for every enabled peer: the next heartbeats, due at
// once, ask each to resync.
func (c *Clock) LostAll() {
	for _, p := range c.peers {
		if p.on {
			p.ask()
		}
	}
}

// Silent returns the enabled peers that nothing came from for timeout at
// now, each once until it is heard from again, in ID order: the caller
// wakes the logs that rely on their contact (R99).
func (c *Clock) Silent(now time.Time) []string {
	var out []string
	for _, id := range c.ids {
		p := c.peers[id]
		if p.on && !p.silent && now.Sub(p.heard) >= c.timeout {
			p.silent = true
			out = append(out, id)
		}
	}
	return out
}

// NextSilent is when the next enabled peer that is not silent yet turns
// silent if nothing comes from it (zero: none).
func (c *Clock) NextSilent() time.Time {
	var next time.Time
	for _, id := range c.ids {
		p := c.peers[id]
		if !p.on || p.silent {
			continue
		}
		if at := p.heard.Add(c.timeout); next.IsZero() || at.Before(next) {
			next = at
		}
	}
	return next
}
