package storage

import (
	"errors"

	"github.com/replog-io/replog/protocol"
)

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
	Append(entries []protocol.Entry) error

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
	Entries(from uint64, maxCount int, maxBytes int) ([]protocol.Entry, error)

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
	EpochMap() []protocol.EpochStart

	// QuorumState returns the last stored quorum state (zero if none).
	QuorumState() (protocol.QuorumState, error)
	// SetQuorumState stores s durably.
	SetQuorumState(s protocol.QuorumState) error

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
