package storage

import (
	"errors"
	"fmt"
)

// EntryType says whether an entry carries user data or is a control record
// written by the protocol itself.
type EntryType uint8

const (
	// EntryData is an entry appended by a user; readers see it.
	EntryData EntryType = 1
	// EntryControl is written by the protocol (the epoch-start entry a new
	// leader appends); readers never see it, but it takes an offset.
	EntryControl EntryType = 2
)

// String returns "data", "control" or "type(N)".
func (t EntryType) String() string {
	switch t {
	case EntryData:
		return "data"
	case EntryControl:
		return "control"
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

// Entry is one record of the log.
type Entry struct {
	// Offset is the entry's position; the first entry of a fresh log has 0.
	Offset uint64
	// Epoch is the leader epoch of the leader that appended the entry.
	Epoch uint64
	// Type is EntryData or EntryControl.
	Type EntryType
	// Data is the payload. Stores return copies the caller owns.
	Data []byte
}

// EpochStart is one row of the epoch map: the first offset written in Epoch.
type EpochStart struct {
	Epoch       uint64
	StartOffset uint64
}

// QuorumState is the durable election state of a replica.
type QuorumState struct {
	// Epoch is the highest epoch this replica has seen.
	Epoch uint64
	// VotedFor is the node this replica voted for in Epoch ("" if none).
	VotedFor string
	// LeaderID is the leader of Epoch if known ("" if not).
	LeaderID string
}

// EntryOverhead is what an entry costs beyond its Data when byte budgets
// are counted (Entries' maxBytes, fetch responses): about what its offset,
// epoch, type and framing take on the wire. Counting it keeps a response of
// many tiny (or empty) entries as bounded as one of a few large ones.
const EntryOverhead = 32

// Budget counts entries against a byte bound the way Entries does: each
// entry costs len(Data) + EntryOverhead, and the first entry always fits so
// that a reader makes progress. The zero Used starts a fresh budget.
type Budget struct {
	Max  int // the bound (maxBytes)
	Used int // what the entries taken so far cost
	N    int // how many were taken
}

// Take reports whether an entry with dataLen bytes of Data fits, and if so
// counts it.
func (b *Budget) Take(dataLen int) bool {
	cost := dataLen + EntryOverhead
	if b.N > 0 && b.Used+cost > b.Max {
		return false
	}
	b.Used += cost
	b.N++
	return true
}

// Sentinel errors. Implementations wrap them with %w and add context (the
// offset, the file), so test with errors.Is.
var (
	// ErrCorrupt: a stored entry or record failed its checksum or could not
	// be decoded (the message names the offset), or a file of the store is
	// damaged, truncated, missing or empty where the directory shows it
	// existed (the message names the file and what is wrong).
	ErrCorrupt = errors.New("replog: corrupt stored data")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("replog: store closed")
	// ErrOutOfRange: an offset below the log start or at/after the LEO was
	// asked for.
	ErrOutOfRange = errors.New("replog: offset out of range")
	// ErrInvalidAppend: entries not contiguous with the LEO, or an epoch
	// lower than the last epoch, or an unknown entry type.
	ErrInvalidAppend = errors.New("replog: invalid append")
	// ErrLocked: another process holds the store's file (returned by Open
	// after its timeout).
	ErrLocked = errors.New("replog: store is locked by another process")
	// ErrIdentityMismatch: OpenDir was asked to open a data directory that
	// belongs to another cluster or node (or another incarnation). The
	// message names the field, what the directory holds and what was
	// expected; nothing was changed.
	ErrIdentityMismatch = errors.New("replog: data directory belongs to another node")
)

// Store is the durable log of one replica.
//
// Writes (Append, TruncateSuffix, DeletePrefix, SetQuorumState,
// SetHWCheckpoint) are durable when they return (unless the store was
// opened with NoSync) and are applied in the order they are called. An
// implementation may merge concurrent writes into one transaction (group
// commit), but a write never becomes visible partially: after a crash each
// call is either wholly applied or wholly absent, and a later call is never
// applied without the earlier ones.
//
// Reads may run concurrently with writes and with each other. Returned slices
// and the Data in returned entries are copies owned by the caller.
//
// The epoch map changes in the same transaction as the entries that cause
// it: an Append whose first entry of some epoch E is at offset o adds (E, o)
// when E is greater than the last epoch; a TruncateSuffix removes rows whose
// StartOffset is ≥ the truncation point. At every moment (and after any
// crash) each stored entry's epoch equals the epoch the map gives for its
// offset.
type Store interface {
	// Append writes entries at the end of the log. entries[0].Offset must
	// equal LEO(), offsets must be contiguous, epochs at least 1 (0 means
	// "no epoch"), non-decreasing and not below LastEpoch(), types EntryData
	// or EntryControl. Otherwise it returns ErrInvalidAppend and writes
	// nothing. An empty slice is a no-op. The store does not keep entries'
	// Data slices after it returns.
	Append(entries []Entry) error

	// TruncateSuffix removes every entry with offset ≥ from and the epoch-map
	// rows that start at or after from. from ≥ LEO() is a no-op; from below
	// LogStart() returns ErrOutOfRange. An HW checkpoint above from is
	// lowered to from in the same write (a checkpoint is never above LEO()).
	TruncateSuffix(from uint64) error

	// DeletePrefix removes every entry with offset < upTo and makes upTo the
	// log start (for retention). upTo ≤ LogStart() is a no-op; upTo > LEO()
	// returns ErrOutOfRange. The epoch map drops the rows wholly below upTo
	// and keeps the row covering upTo with its StartOffset moved up to upTo
	// (Kafka's truncateFromStart), so every row starts at or after
	// LogStart(). The deleted entries are unreadable at once; an
	// implementation may reclaim their space later.
	DeletePrefix(upTo uint64) error

	// Entries returns entries from offset from upward, at most maxCount of
	// them (maxCount ≤ 0: no limit on the count) and, after the first, at
	// most maxBytes in total, counting each entry as len(Data) +
	// EntryOverhead (the first entry is always returned whole so that
	// progress is possible). from ==
	// LEO() returns nothing and no error; from outside [LogStart(), LEO())
	// otherwise returns ErrOutOfRange. Every entry's checksum is verified: a
	// mismatch returns an error wrapping ErrCorrupt naming the offset, and no
	// entries.
	Entries(from uint64, maxCount int, maxBytes int) ([]Entry, error)

	// LEO returns the log end offset: the offset the next entry gets.
	LEO() uint64
	// LogStart returns the offset of the first stored entry (0 until a
	// prefix is deleted).
	LogStart() uint64
	// LastEpoch returns the epoch of the last epoch-map row (0 if none).
	LastEpoch() uint64

	// EndOffsetForEpoch answers Kafka's OffsetsForLeaderEpoch: it finds the
	// largest epoch e ≤ epoch in the epoch map and returns e and the first
	// offset after e's entries (the start of the next epoch in the map, or
	// LEO() if e is the last epoch). An epoch absent from the map but
	// between two present ones therefore gets the largest epoch below it
	// (KIP-279). If epoch is below every epoch in the map, or the map is
	// empty, it returns (0, LogStart()), which a follower treats as
	// "truncate to the log start".
	EndOffsetForEpoch(epoch uint64) (e uint64, endOffset uint64)

	// EpochMap returns a copy of the epoch map, ordered by epoch.
	EpochMap() []EpochStart

	// QuorumState returns the last stored quorum state (zero if none).
	QuorumState() (QuorumState, error)
	// SetQuorumState stores s durably.
	SetQuorumState(s QuorumState) error

	// HWCheckpoint returns the last checkpointed high watermark and whether
	// one was stored. It is a starting point after restart, never used for
	// truncation.
	HWCheckpoint() (hw uint64, ok bool, err error)
	// SetHWCheckpoint stores hw. Implementations refuse (ErrOutOfRange) an hw
	// above LEO().
	SetHWCheckpoint(hw uint64) error

	// Close releases the store. Later calls return ErrClosed.
	Close() error
}
