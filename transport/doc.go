// Package transport carries replog's protocol messages (package protocol)
// between nodes: it frames each encoded message on a connection (a length
// prefix and a CRC-32C around protocol.AppendMessage's bytes; AppendFrame,
// DecodeFrame, Reader), runs the TCP (and TLS) transport with its handshake,
// and offers an in-memory network with the same interface for tests.
//
// Given a cluster secret (TCPConfig.Secret), the TCP transport
// authenticates both ends of every connection with a challenge-response
// handshake that tells a peer without the secret nothing about the
// cluster; every message it delivers carries the node ID its connection
// authenticated as. It also bounds what any peer can cost a node:
// inbound connections (in total and per address), idle time, and the
// memory of partly received frames. See TCP and TCPConfig.
//
// # What it owns, and who may use it
//
// transport owns the wire: the frame format, the handshake (its version,
// ProtocolVersion, and its proof of the secret), the connections and their
// limits. It frames and delivers messages but never acts on what they
// say: it looks at a message's kind only to pick its connection (fetch
// traffic and control messages travel apart, so a large fetch response
// never delays a vote) and at From and To only to refuse a message its
// connection may not carry. What a message means is the protocol core's
// business (package replica).
//
// transport imports protocol for the messages and nothing else of
// replog's (not storage, not the core). It is imported by the node's shell
// (the root replog package, which starts one TCP per node and pumps it
// into the core's loop) and by tests (the hostile-peer suite uses the
// exported codec as an attacker would). The core and the simulation never
// import it: they speak protocol.Message and leave the sockets to the
// shell.
//
// # Concurrency and ownership
//
// A Transport's Send, Receive and Close may be called from any goroutine.
// Send never waits for the network: it queues the message (dropping it
// when the peer's queue is full) and returns; the transport then owns the
// message, and the sender must not modify its body or the bytes it points
// to. A message taken from Receive belongs to the receiver, but its entry
// Data and AppendRequest Records are read-only: TCP decodes each frame into
// a buffer of its own, while TCP hands a message a node sends itself over
// with the sender's bytes.
// Close blocks until every goroutine the transport started has returned,
// then closes the Receive channel; a consumer ranging over Receive ends
// there. The TCP transport's goroutines (one accept loop, a writer per
// outbound connection, a reader per inbound one) all end in Close, so a
// closed transport leaks nothing. (The in-memory Network the contract
// tests run against lives in the package's test files: no production code
// uses it.)
//
// The codec functions hold no state. A message returned by DecodeFrame
// aliases the frame it was decoded from (do not modify the frame while the
// message is in use); a Reader is for one goroutine, and each message it
// returns is the caller's.
//
// # Errors
//
// Send returns ErrUnknownPeer (the Resolver does not know the addressee)
// or ErrClosed; every other failure is the network's and the message is
// dropped, counted in TCPStats and logged: delivery is best effort, and
// the protocol tolerates loss. NewTCP returns a *ConfigError wrapping
// ErrInvalidConfig naming the bad TCPConfig field, or the listener's
// error. A failed handshake is logged by the dialer and counted by the
// acceptor as ErrUnauthenticated, ErrWrongCluster or ErrPeerNotVerified
// (with a Secret a refusal never says which). The codec returns
// ErrFrameTooLarge and ErrBadFrame.
//
// See docs/architecture.md: section 2 (which package owns what), 5 (who
// imports whom); and docs/security.md (R48, the authenticated transport
// and its limits).
package transport
