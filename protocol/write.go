package protocol

import "fmt"

// WriteKind says what a Write changes in a replica's durable store.
// Values are used in simulation trace hashes: never renumber.
type WriteKind uint8

// Write kinds. Each names the field of Write it reads.
const (
	// WriteAppend appends Entries at the end of the log.
	WriteAppend WriteKind = iota + 1
	// WriteTruncate removes every entry at or above Offset (a suffix).
	WriteTruncate
	// WriteQuorumState stores Quorum (epoch, vote, leader).
	WriteQuorumState
	// WriteHWCheckpoint stores Offset as the high-watermark checkpoint.
	WriteHWCheckpoint
	// WriteDeletePrefix removes every entry below Offset and makes Offset
	// the log start (retention). Above the LEO it empties the log and
	// restarts it at Offset (a follower's reset to its leader's log start).
	WriteDeletePrefix
)

// String returns "append", "truncate", "quorum-state", "hw-checkpoint",
// "delete-prefix" or "kind(N)".
func (k WriteKind) String() string {
	switch k {
	case WriteAppend:
		return "append"
	case WriteTruncate:
		return "truncate"
	case WriteQuorumState:
		return "quorum-state"
	case WriteHWCheckpoint:
		return "hw-checkpoint"
	case WriteDeletePrefix:
		return "delete-prefix"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Write is one change to a replica's durable store: the core issues them
// (in a Ready, numbered by Seq), the shell hands them to a store's Apply in
// Seq order, and reports the highest Seq made durable back to the core. A
// store applies a slice of writes in order and atomically (see
// storage.Store.Apply), so a shell may hand it any run of consecutive
// writes at once: that is the group commit.
type Write struct {
	// Seq numbers the core's writes: 1, 2, 3, ... per replica. Stores do
	// not read it.
	Seq uint64
	// Kind says which of the fields below the write uses.
	Kind WriteKind
	// Entries (WriteAppend) are appended; the first at the store's LEO.
	// Their Data is owned by the issuer until the write is durable: nobody
	// may modify it, and a store copies what it keeps.
	Entries []Entry
	// Offset is the truncation point (WriteTruncate), the checkpointed
	// high watermark (WriteHWCheckpoint) or the new log start
	// (WriteDeletePrefix).
	Offset uint64
	// Quorum (WriteQuorumState) is the election state to store.
	Quorum QuorumState
	// Voters (WriteDeletePrefix), when not nil, replace the voter-set rows
	// below Offset: a follower that resets to its leader's log start
	// (docs/protocol.md R53) records the leader's rows there (R55), in the
	// same write, so that no crash leaves it without them. Each row is
	// below Offset, in offset order, with a set ValidateVoterSet accepts.
	// nil keeps the store's own rows (KeptVoterRows).
	Voters []VotersAt
	// Epoch (WriteDeletePrefix), when not 0, is the epoch of the entry
	// just below Offset in a follower's reset to its leader's log start
	// (R53): a deletion that empties the log (Offset at or above the LEO)
	// leaves the one epoch-map row {Epoch, Offset}, so that the empty log
	// compares in elections as the log it stands for (R21). 0: the log is
	// left with no row.
	Epoch uint64
}
