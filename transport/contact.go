package transport

import (
	"math/rand/v2"
	"sync"
	"time"

	"github.com/replog-io/replog/internal/contact"
	"github.com/replog-io/replog/protocol"
)

// The node's contact with its peers (docs/protocol.md R98, R100), kept by
// the transport: every authenticated frame received from a peer is
// contact with it, whatever its log; a peer whose connection speaks
// protocol.QuiescenceVersion and that was sent nothing for
// HeartbeatInterval gets a Heartbeat, which no log sees. internal/contact
// holds the decisions (the simulation runs the same); this file drives
// them with the wall clock under its own lock, with one timer goroutine
// per transport.

// contactEvents buffers Silent and Resyncs: a report beyond it is
// dropped (a silent peer is reported again once heard and silent anew; a
// missed resync is found again at the next heartbeat).
const contactEvents = 256

// peerContact is the transport's contact clock and its reports.
type peerContact struct {
	mu    sync.Mutex
	clock *contact.Clock
	// wake ends the timer's sleep early (a resync to send).
	wake   chan struct{}
	silent chan string
	resync chan string

	heartbeatsSent, heartbeatsReceived, resyncs, silences uint64
}

func newPeerContact(cfg TCPConfig) *peerContact {
	timeout := cfg.ContactTimeout
	if timeout == 0 {
		timeout = 5 * cfg.HeartbeatInterval
	}
	return &peerContact{
		clock:  contact.New(rand.Uint64(), cfg.HeartbeatInterval, timeout),
		wake:   make(chan struct{}, 1),
		silent: make(chan string, contactEvents),
		resync: make(chan string, contactEvents),
	}
}

// LastHeard is when anything was last received from peer (zero: never,
// or no contact clock: HeartbeatInterval 0). It makes the transport a
// replica.PeerContact.
func (t *TCP) LastHeard(peer string) time.Time {
	c := t.contact
	if c == nil {
		return time.Time{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.clock.LastHeard(peer)
}

// Silent returns the channel of peers that sent nothing for
// ContactTimeout (each once until heard from again): the root wakes its
// logs with them (replica.PeerSilent). nil without a contact clock.
func (t *TCP) Silent() <-chan string {
	if t.contact == nil {
		return nil
	}
	return t.contact.silent
}

// Resyncs returns the channel of peers a quiescent message with may have
// been lost (R100): the root hands its logs a resync with each
// (replica.Resync). nil without a contact clock.
func (t *TCP) Resyncs() <-chan string {
	if t.contact == nil {
		return nil
	}
	return t.contact.resync
}

// noteSent records m, queued for its peer.
func (t *TCP) noteSent(m protocol.Message) {
	if c := t.contact; c != nil {
		c.mu.Lock()
		c.clock.Sent(m.To, m, time.Now())
		c.mu.Unlock()
	}
}

// noteHeard records m, received from its peer over an authenticated
// connection. It reports whether m was a heartbeat, which it consumes.
func (t *TCP) noteHeard(m protocol.Message) bool {
	c := t.contact
	if c == nil {
		return false
	}
	hb, isHB := m.Body.(*protocol.Heartbeat)
	c.mu.Lock()
	c.clock.Heard(m.From, m, time.Now())
	resync := isHB && c.clock.OnHeartbeat(m.From, hb)
	if isHB {
		c.heartbeatsReceived++
	}
	if resync {
		c.resyncs++
	}
	c.mu.Unlock()
	if resync {
		select {
		case c.resync <- m.From:
		default:
		}
		select {
		case c.wake <- struct{}{}: // the peer is asked to resync too, at once
		default:
		}
	}
	return isHB
}

// LostQuiescent tells the transport that a quiescent message m received
// from its peer was dropped on this node before any log took it (a full
// queue): the node's logs resync with the peer (Resyncs), and the peer
// is asked to (R100). Without a contact clock it does nothing.
func (t *TCP) LostQuiescent(m protocol.Message) {
	c := t.contact
	if c == nil || !protocol.IsQuiescent(m) {
		return
	}
	c.mu.Lock()
	c.clock.Lost(m.From)
	c.resyncs++
	c.mu.Unlock()
	select {
	case c.resync <- m.From:
	default:
	}
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// ResyncAll asks every peer heartbeats go to to resync with this node
// (R100), at once: a log of this node that stopped (halted, its disk
// failed) while the node lives on answers no quiescent fetch, and its
// followers, which hear the node, would wait for ever; resynced, they
// fetch normally, find no answer, and elect. Every quiesced log of the
// peers on this node fetches once more. Without a contact clock it does
// nothing.
func (t *TCP) ResyncAll() {
	c := t.contact
	if c == nil {
		return
	}
	c.mu.Lock()
	c.clock.LostAll()
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// contactStats fills the contact clock's counters into st.
func (t *TCP) contactStats(st *TCPStats) {
	c := t.contact
	if c == nil {
		return
	}
	c.mu.Lock()
	st.HeartbeatsSent, st.HeartbeatsReceived = c.heartbeatsSent, c.heartbeatsReceived
	st.ContactResyncs, st.PeersSilent = c.resyncs, c.silences
	c.mu.Unlock()
}

// enableContact says whether heartbeats go to peer: its connection
// negotiated wire version wire.
func (t *TCP) enableContact(peer string, wire uint8) {
	if c := t.contact; c != nil {
		c.mu.Lock()
		c.clock.Enable(peer, wire >= protocol.QuiescenceVersion, time.Now())
		c.mu.Unlock()
	}
}

// contactLoop is the transport's one contact timer: it sends the
// heartbeats due and reports the peers that fell silent, sleeping until
// the next of either is due.
func (t *TCP) contactLoop() {
	defer t.wg.Done()
	c := t.contact
	timer := time.NewTimer(t.cfg.HeartbeatInterval)
	defer timer.Stop()
	for {
		select {
		case <-t.done:
			return
		case <-timer.C:
		case <-c.wake:
		}
		now := time.Now()
		c.mu.Lock()
		due := c.clock.Due(now)
		hbs := make([]*protocol.Heartbeat, len(due))
		for i, id := range due {
			hbs[i] = c.clock.Heartbeat(id)
		}
		silent := c.clock.Silent(now)
		c.heartbeatsSent += uint64(len(due))
		c.silences += uint64(len(silent))
		c.mu.Unlock()
		for i, id := range due {
			_ = t.Send(protocol.Message{To: id, Body: hbs[i]})
		}
		for _, id := range silent {
			select {
			case c.silent <- id:
			default:
			}
		}
		c.mu.Lock()
		next := c.clock.NextDue()
		if s := c.clock.NextSilent(); !s.IsZero() && (next.IsZero() || s.Before(next)) {
			next = s
		}
		c.mu.Unlock()
		wait := t.cfg.HeartbeatInterval
		if !next.IsZero() {
			wait = max(time.Until(next), time.Millisecond)
		}
		timer.Reset(wait)
	}
}
