package replica

import "github.com/replog-io/replog/protocol"

// WriteKind says what a Write asks the shell to do.
type WriteKind uint8

// Write kinds.
const (
	// WriteAppend: store.Append(w.Entries).
	WriteAppend WriteKind = iota + 1
	// WriteTruncate: store.TruncateSuffix(w.Offset).
	WriteTruncate
	// WriteQuorumState: store.SetQuorumState(w.Quorum).
	WriteQuorumState
	// WriteHWCheckpoint: store.SetHWCheckpoint(w.Offset).
	WriteHWCheckpoint
)

// Write is one storage operation the shell must perform, in Seq order, then
// report with Persisted(Seq). Consecutive WriteAppends may be merged into
// one store call (group commit). Entries' Data is owned by the core until
// Persisted is called for this write: the shell must not modify it.
type Write struct {
	Seq     uint64
	Kind    WriteKind
	Entries []protocol.Entry
	Offset  uint64
	Quorum  protocol.QuorumState
}

// Ack reports the outcome of a Propose.
type Ack struct {
	// ID is the proposal's ID.
	ID uint64
	// FirstOffset is the offset of the proposal's first record when Err is
	// nil: the records are committed (below the HW) at FirstOffset,
	// FirstOffset+1, ...
	FirstOffset uint64
	// Err is nil, a *NotLeaderError, ErrUnknownOutcome, or ErrTooLarge.
	Err error
}

// Ready is what the core asks the shell to do. The slices are owned by the
// shell after Ready returns.
type Ready struct {
	Writes   []Write
	Messages []protocol.Message
	Acks     []Ack
}

// IsEmpty reports whether rd asks for nothing.
func (rd Ready) IsEmpty() bool {
	return len(rd.Writes) == 0 && len(rd.Messages) == 0 && len(rd.Acks) == 0
}
