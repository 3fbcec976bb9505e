package transport

import (
	"fmt"
	"slices"
	"sync"

	"github.com/replog-io/replog/protocol"
)

// DefaultNetworkQueueSize is the capacity of each node's receive channel on
// an in-memory Network.
const DefaultNetworkQueueSize = 4096

// Network is an in-memory network of Transports for tests, with fault
// controls: partitions, isolation and one-way blocks. It starts no
// goroutines.
//
// Semantics match the TCP transport's: Send never blocks; a message to a
// node that is blocked, closed, or whose receive channel is full is dropped
// silently; messages between a pair of nodes arrive in the order they were
// sent (across all kinds: the in-memory network has no separate fetch lane).
// Send to a node ID the Network has never seen returns ErrUnknownPeer.
//
// Messages are handed off, not shared (see also SetEncoding): the receiver gets a fresh copy of the
// body struct and of its Entries/Records slices, so a sender that sends the
// same body to several nodes (a broadcast) does not share mutable state
// between the receivers. The bytes themselves (Entry.Data, Records[i]) are
// shared read-only between the sender and every receiver: nobody may
// modify them after Send, which the Transport contract already requires of
// the sender.
type Network struct {
	mu       sync.Mutex
	nodes    map[string]*memTransport
	blocked  map[[2]string]bool
	isolated map[string]bool
	queue    int
	dropped  uint64
	encode   bool
}

// NewNetwork returns an empty in-memory network.
func NewNetwork() *Network {
	return &Network{
		nodes:    map[string]*memTransport{},
		blocked:  map[[2]string]bool{},
		isolated: map[string]bool{},
		queue:    DefaultNetworkQueueSize,
	}
}

// Transport returns the Transport of nodeID, creating it on first use. After
// that Transport is closed, the next call returns a new one (a restarted
// node); until then every call returns the same one. Fault settings of the
// node survive a restart.
func (n *Network) Transport(nodeID string) Transport {
	n.mu.Lock()
	defer n.mu.Unlock()
	if t, ok := n.nodes[nodeID]; ok && !t.closed {
		return t
	}
	t := &memTransport{net: n, id: nodeID, recv: make(chan protocol.Message, n.queue)}
	n.nodes[nodeID] = t
	return t
}

// Partition cuts both directions between a and b.
func (n *Network) Partition(a, b string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.blocked[[2]string{a, b}] = true
	n.blocked[[2]string{b, a}] = true
}

// Heal restores both directions between a and b (undoing Partition and
// Block between them; not Isolate).
func (n *Network) Heal(a, b string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.blocked, [2]string{a, b})
	delete(n.blocked, [2]string{b, a})
}

// HealAll removes every partition, block and isolation.
func (n *Network) HealAll() {
	n.mu.Lock()
	defer n.mu.Unlock()
	clear(n.blocked)
	clear(n.isolated)
}

// Isolate cuts id from every other node, in both directions, including
// nodes created later. Undo it with Rejoin or HealAll.
func (n *Network) Isolate(id string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.isolated[id] = true
}

// Rejoin undoes Isolate(id). Partitions and blocks involving id stay.
func (n *Network) Rejoin(id string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.isolated, id)
}

// Block drops messages from from to to (one way). Undo it with Unblock,
// Heal or HealAll.
func (n *Network) Block(from, to string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.blocked[[2]string{from, to}] = true
}

// Unblock undoes Block(from, to).
func (n *Network) Unblock(from, to string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.blocked, [2]string{from, to})
}

// SetEncoding makes the network pass every message through the wire codec
// (AppendFrame, then DecodeFrame) when on, so tests exercise the codec and
// receivers share nothing with senders, not even entry data. A message the
// codec rejects makes Send return the error.
func (n *Network) SetEncoding(on bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.encode = on
}

// Dropped returns how many messages the network has dropped so far
// (blocked, receiver closed, or receive channel full).
func (n *Network) Dropped() uint64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.dropped
}

// deliver hands m to its receiver, or drops it. Called with n.mu held, which
// also orders it against the receiver's Close.
func (n *Network) deliver(m protocol.Message) {
	if n.blocked[[2]string{m.From, m.To}] || (m.From != m.To && (n.isolated[m.From] || n.isolated[m.To])) {
		n.dropped++
		return
	}
	dst := n.nodes[m.To]
	if dst == nil || dst.closed {
		n.dropped++
		return
	}
	if !n.encode {
		m.Body = cloneBody(m.Body)
	}
	select {
	case dst.recv <- m:
	default:
		n.dropped++
	}
}

// cloneBody copies a body struct and its slices of entries or records; the
// byte contents are shared (see Network).
func cloneBody(b protocol.Body) protocol.Body {
	switch x := b.(type) {
	case *protocol.FetchRequest:
		c := *x
		return &c
	case *protocol.FetchResponse:
		c := *x
		c.Entries = slices.Clone(x.Entries)
		return &c
	case *protocol.VoteRequest:
		c := *x
		return &c
	case *protocol.VoteResponse:
		c := *x
		return &c
	case *protocol.BeginEpoch:
		c := *x
		return &c
	case *protocol.AppendRequest:
		c := *x
		c.Records = slices.Clone(x.Records)
		return &c
	case *protocol.AppendResponse:
		c := *x
		return &c
	}
	return b
}

// memTransport is one node's Transport on a Network.
type memTransport struct {
	net    *Network
	id     string
	recv   chan protocol.Message
	closed bool // guarded by net.mu
}

// Send implements Transport. m.From is set to the node's ID if empty; a
// different non-empty From is an error, as on TCP where the receiver would
// drop it.
func (t *memTransport) Send(m protocol.Message) error {
	n := t.net
	n.mu.Lock()
	defer n.mu.Unlock()
	if t.closed {
		return ErrClosed
	}
	if m.Body == nil {
		return fmt.Errorf("replog: message to %s has no body", m.To)
	}
	if m.From == "" {
		m.From = t.id
	} else if m.From != t.id {
		return fmt.Errorf("replog: node %s cannot send as %s", t.id, m.From)
	}
	if _, ok := n.nodes[m.To]; !ok {
		return fmt.Errorf("%w: %s", ErrUnknownPeer, m.To)
	}
	if n.encode {
		frame, err := AppendFrame(nil, m)
		if err != nil {
			return err
		}
		if m, _, err = DecodeFrame(frame, len(frame)); err != nil {
			return err
		}
	}
	n.deliver(m)
	return nil
}

// Receive implements Transport.
func (t *memTransport) Receive() <-chan protocol.Message { return t.recv }

// Close implements Transport.
func (t *memTransport) Close() error {
	n := t.net
	n.mu.Lock()
	defer n.mu.Unlock()
	if !t.closed {
		t.closed = true
		close(t.recv)
	}
	return nil
}
