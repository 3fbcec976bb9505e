package protocol

import "fmt"

// Quiescent idle logs (docs/protocol.md 3.15, R98-R100): a caught-up
// follower's fetch is parked without a deadline, and the liveness its
// periodic fetches used to prove comes from the node: every frame of any
// log between two nodes, and a Heartbeat when nothing else was sent.

// QuiescenceVersion is the wire version that brought FetchRequest.Quiescent,
// FetchResponse.Quiescent and the Heartbeat kind: below it the flags are
// not encoded (they decode as false) and a Heartbeat cannot be encoded
// (AppendMessageAt fails with ErrVersion), so a peer of an older release
// never receives one.
const QuiescenceVersion = 10

// FeatureLevelQuiescence is the cluster level from which a caught-up
// follower sends quiescent fetches (R99): every node then supports wire
// version QuiescenceVersion and sends heartbeats (R98).
const FeatureLevelQuiescence = 10

// KindHeartbeat is a node's heartbeat to a peer (Heartbeat), from
// QuiescenceVersion on.
const KindHeartbeat Kind = 12

// Heartbeat is a node-level message: no log sees it (its Message.Log is
// ""), the transport or the simulation's network consumes it. It is sent
// to a peer when nothing else was sent to it for about FetchMaxWait, so
// that the peer's contact with this node (R98) stays fresh, and it
// carries what R100 needs to find lost quiescent messages.
type Heartbeat struct {
	// Session names the sender's incarnation (random at start): a new
	// one resets the receiver's counts of quiescent messages.
	Session uint64
	// Quiescent is how many quiescent messages (fetches marked
	// Quiescent, and answers to them) the sender sent the receiver in
	// this session.
	Quiescent uint64
	// Resync asks the receiver to resend what its logs have quiesced on
	// with the sender (R100): the sender found one of its messages lost.
	Resync bool
}

// heartbeatSize is a Heartbeat's body: Session, Quiescent, Resync.
const heartbeatSize = 8 + 8 + 1

func (*Heartbeat) isBody()    {}
func (*Heartbeat) Kind() Kind { return KindHeartbeat }

// String formats the heartbeat for logs and traces.
func (h *Heartbeat) String() string {
	return fmt.Sprintf("Heartbeat{session=%d quiescent=%d resync=%t}", h.Session, h.Quiescent, h.Resync)
}

// IsQuiescent reports whether m is a quiescent message (R100): a fetch
// marked Quiescent or an answer to one. A node counts those it sends and
// receives per peer, and its heartbeats carry the count.
func IsQuiescent(m Message) bool {
	switch b := m.Body.(type) {
	case *FetchRequest:
		return b.Quiescent
	case *FetchResponse:
		return b.Quiescent
	}
	return false
}
