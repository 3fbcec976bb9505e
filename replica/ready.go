package replica

import "github.com/replog-io/replog/protocol"

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
	// Writes are the store changes to make durable, in Seq order: a shell
	// hands them (or any run of consecutive writes, across Readys) to one
	// storage.Store.Apply, which applies them atomically in one
	// transaction, then reports the last Seq made durable with Persisted.
	// Entries' Data is owned by the core until Persisted covers its write:
	// the shell must not modify it.
	Writes   []protocol.Write
	Messages []protocol.Message
	Acks     []Ack
	// Transfers are the outcomes of leadership transfers started by
	// TransferLeadership (R59), each reported once.
	Transfers []TransferResult
	// KeyCheckpoint, when not nil, is a checkpoint of the keyed-state
	// table (docs/protocol.md R76) for the store to keep in place of the
	// one it holds (storage.KeyCheckpointStore); a shell whose store keeps
	// none drops it. It may be stored before or after the writes of this
	// Ready, durably or not: New checks it against the log.
	KeyCheckpoint *protocol.KeyCheckpoint
	// SnapshotReads are snapshot requests this leader checked, for the
	// shell to answer from its snapshot store off its loop (R92;
	// internal/shell.ServeSnapshot); a shell without one answers
	// SnapshotNone.
	SnapshotReads []SnapshotRead
	// SnapshotChunks are chunks of a snapshot this follower is pulling,
	// for the shell to write (the last one: verify and install), each
	// reported back with SnapshotProgress (R92, R94). Only with
	// Config.ShipSnapshots.
	SnapshotChunks []SnapshotChunk
}

// IsEmpty reports whether rd asks for nothing.
func (rd Ready) IsEmpty() bool {
	return len(rd.Writes) == 0 && len(rd.Messages) == 0 && len(rd.Acks) == 0 && len(rd.Transfers) == 0 && rd.KeyCheckpoint == nil &&
		len(rd.SnapshotReads) == 0 && len(rd.SnapshotChunks) == 0
}
