package transport

import (
	"errors"

	"github.com/replog-io/replog/protocol"
)

// Transport carries Messages between nodes. Implementations: TCP (this
// package's NewTCP) and, in this package's tests, an in-memory Network.
//
// Delivery is best effort: a message may be dropped (no connection, queue
// full, peer down), but messages from one node to another that are
// delivered arrive in the order they were sent. The protocol tolerates loss.
//
// The TCP transport keeps that order within each of two classes of
// messages: fetch traffic (FetchRequest, FetchResponse) and the rest. They
// travel on separate connections so a large fetch response never delays a
// vote; a control message may overtake a fetch message sent before it.
// The test Network keeps one order per pair.
type Transport interface {
	// Send queues m for m.To and returns without blocking on the network.
	// It returns ErrUnknownPeer if m.To cannot be resolved to an address and
	// ErrClosed after Close; other failures are dropped and logged. The
	// transport takes ownership of m (the caller must not modify its Body
	// afterwards).
	Send(m protocol.Message) error
	// Receive returns the channel of inbound messages. It is closed by
	// Close. Received messages are owned by the receiver.
	Receive() <-chan protocol.Message
	// Close stops the transport, closes connections and waits for its
	// goroutines. It is safe to call more than once.
	Close() error
}

// Resolver maps a node ID to its RPC address ("host:port"). The TCP
// transport calls it for every new connection, so addresses learned later
// (from gossip) are used. ok is false when the node is unknown.
type Resolver func(nodeID string) (addr string, ok bool)

// Transport errors.
var (
	ErrClosed      = errors.New("replog: transport closed")
	ErrUnknownPeer = errors.New("replog: unknown peer")
	// ErrWrongCluster: the peer's handshake named another cluster ID.
	ErrWrongCluster = errors.New("replog: peer belongs to another cluster")
	// ErrPeerNotVerified: the acceptor refused the peer's node ID (empty,
	// its own, or refused by TCPConfig.VerifyPeer).
	ErrPeerNotVerified = errors.New("replog: peer not verified")
	// ErrUnauthenticated: the handshake failed authentication. A dialer
	// reports it when the acceptor refused it (wrong or missing secret,
	// wrong cluster ID or node, node ID not allowed: a refusal never says
	// which) or when the acceptor failed to prove the secret; an acceptor,
	// when the dialer failed to prove it (TCPConfig.Secret).
	ErrUnauthenticated = errors.New("replog: peer not authenticated")
	// ErrInvalidConfig: TCPConfig.Validate found an invalid field.
	ErrInvalidConfig = errors.New("replog: invalid transport config")
	// ErrFrameTooLarge: a frame above the maximum size was sent or received.
	ErrFrameTooLarge = errors.New("replog: frame too large")
	// ErrBadFrame: a frame could not be decoded (bad magic, version, kind,
	// lengths or checksum).
	ErrBadFrame = errors.New("replog: malformed frame")
)

// StaticResolver returns a Resolver backed by a copy of addrs (node ID →
// "host:port"), for fixed clusters and tests.
func StaticResolver(addrs map[string]string) Resolver {
	m := make(map[string]string, len(addrs))
	for id, a := range addrs {
		m[id] = a
	}
	return func(id string) (string, bool) {
		a, ok := m[id]
		return a, ok
	}
}
