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
	// prevQ is the count its previous heartbeat carried.
	sentQ, recvQ, prevQ uint64
	recvSession         uint64
	// resync: the next heartbeat asks the peer to resync (R100).
	resync bool
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
// enabled peer sent nothing for interval, or one whose next heartbeat
// asks it to resync. The caller sends each Heartbeat(id) (and records it
// with Sent).
func (c *Clock) Due(now time.Time) []string {
	var due []string
	for _, id := range c.ids {
		p := c.peers[id]
		if p.on && (p.resync || now.Sub(p.sent) >= c.interval) {
			due = append(due, id)
		}
	}
	return due
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
		at := p.sent.Add(c.interval)
		if p.resync {
			at = p.sent
		}
		if next.IsZero() || at.Before(next) {
			next = at
		}
	}
	return next
}

// Heartbeat returns the heartbeat for peer id and clears its resync
// request.
func (c *Clock) Heartbeat(id string) *protocol.Heartbeat {
	p := c.peer(id)
	hb := &protocol.Heartbeat{Session: c.session, Quiescent: p.sentQ, Resync: p.resync}
	p.resync = false
	return hb
}

// OnHeartbeat takes heartbeat hb from peer id, received at now (the
// caller records it with Heard too). It reports whether this node's logs
// must resync with the peer (R100): the peer asks, or a quiescent message
// it sent before its previous heartbeat never came (then the next
// heartbeat asks the peer to resync too, at once). Counting against the
// previous heartbeat's count, not this one's, leaves a message that
// travels on another lane, or was delayed, a heartbeat interval to
// arrive before it counts as lost.
func (c *Clock) OnHeartbeat(id string, hb *protocol.Heartbeat) (resync bool) {
	p := c.peer(id)
	if hb.Session != p.recvSession {
		// A new incarnation: what its predecessor sent is gone with it
		// (the closed connection is its own news, R69).
		p.recvSession, p.recvQ, p.prevQ = hb.Session, 0, 0
	}
	resync = hb.Resync
	if p.recvQ < p.prevQ {
		resync, p.resync = true, true
		p.recvQ = p.prevQ
	}
	p.prevQ = hb.Quiescent
	return resync
}

// Lost records that a quiescent message from peer id was received but
// lost on this side (a full queue dropped it): the logs resync (the
// caller tells them), and the next heartbeat, due at once, asks the peer
// to resync too.
func (c *Clock) Lost(id string) {
	c.peer(id).resync = true
}

// LostAll is Lost for every enabled peer: the next heartbeats, due at
// once, ask each to resync.
func (c *Clock) LostAll() {
	for _, p := range c.peers {
		if p.on {
			p.resync = true
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
