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
	// lower than the last epoch, or an unknown entry type, or an
	// EntryVoters entry whose Data is not a valid voter set.
	ErrInvalidAppend = errors.New("replog: invalid append")
	// ErrInvalidWrite: a write of an unknown kind was passed to Apply, or
	// a prefix deletion with voter-set rows it cannot hold.
	ErrInvalidWrite = errors.New("replog: invalid write")
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
// Every change goes through Apply: a slice of protocol.Writes (appends,
// suffix truncations, prefix deletions, the quorum state, the HW
// checkpoint) applied in order as one atomic, durable change (one
// transaction; for DirStore one bbolt commit of its active segment file,
// whose two fsyncs are paid once per Apply whatever it holds, or with
// DirOptions.Journal one record of the commit journal and its one
// fdatasync). Calls to Apply are serialized; a caller that
// wants group commit hands the store everything waiting in one call (the
// store does not merge calls itself).
//
// Reads may run concurrently with Apply and with each other; they see each
// Apply wholly or not at all. Returned slices and the Data in returned
// entries are copies owned by the caller.
//
// The epoch map changes in the same transaction as the entries that cause
// it: an append whose first entry of some epoch E is at offset o adds (E,
// o) when E is greater than the last epoch; a truncation removes rows whose
// StartOffset is ≥ the truncation point. At every moment (and after any
// crash) each stored entry's epoch equals the epoch the map gives for its
// offset.
//
// Voter-set rows change the same way (docs/protocol.md R55): an append adds
// a row (o, set) for each EntryVoters entry at offset o; a truncation
// removes the rows at or after the truncation point; a prefix deletion
// removes the rows below the new log start except the newest of them, the
// set in force at the log start, and the newest before it with another set
// (the newest change; protocol.KeptVoterRows), so that retention never
// forgets the voter set; a prefix deletion that carries rows (a follower's
// reset to its leader's log start) puts them there instead.
type Store interface {
	// Apply applies ws in order, atomically and durably: when it returns
	// nil every write is durable (unless the store was opened with NoSync);
	// after a crash, ws is wholly applied or wholly absent, and never
	// applied without the Apply calls that returned before it. Each write
	// is validated against the state the writes before it in ws leave:
	//
	//   - WriteAppend appends Entries. Entries[0].Offset must equal the LEO,
	//     offsets must be contiguous, epochs at least 1 (0 means "no
	//     epoch"), non-decreasing and not below the last epoch, types
	//     EntryData, EntryControl or EntryVoters (whose Data
	//     protocol.DecodeVoters must accept); otherwise ErrInvalidAppend,
	//     naming the offset. Each EntryVoters entry adds a voter-set row.
	//     No entries: a no-op. The store does not keep the entries' Data
	//     slices.
	//   - WriteTruncate removes every entry with offset ≥ Offset, the
	//     epoch-map rows that start at or after it (except, when Offset is
	//     a non-zero log start, the first row: it covers the entries below
	//     the log start, and the emptied log compares its epoch in
	//     elections) and the voter-set rows at or after it. Offset ≥ LEO is a no-op;
	//     below the log start ErrOutOfRange. An HW checkpoint above Offset
	//     is lowered to Offset in the same write (a checkpoint is never
	//     above the LEO).
	//   - WriteDeletePrefix removes every entry with offset < Offset and
	//     makes Offset the log start (retention). Offset ≤ LogStart() is a
	//     no-op. Offset above the LEO empties the log and restarts it at
	//     Offset (LogStart = LEO = Offset, the epoch map emptied: Kafka's
	//     truncateFullyAndStartAt, a follower's reset to its leader's log
	//     start; with Epoch not 0, at or above the LEO, the map is the one
	//     row {Epoch, Offset}); the HW checkpoint is left as it is. Otherwise the epoch map drops the rows
	//     wholly below Offset and keeps the row covering it with its
	//     StartOffset moved up to Offset (Kafka's truncateFromStart), so
	//     every row starts at or after the log start. In both cases the
	//     voter-set rows below Offset go except the newest of them (the set
	//     in force at the new log start) and the newest before it with
	//     another set (protocol.KeptVoterRows), which stay; with Voters not
	//     nil, Voters replace them (at most two rows, each below Offset, in
	//     offset order, with valid sets; otherwise ErrInvalidWrite). The
	//     deleted entries are unreadable at once; an implementation may
	//     reclaim their space later.
	//   - WriteQuorumState stores Quorum.
	//   - WriteHWCheckpoint stores Offset as the HW checkpoint; above the
	//     LEO ErrOutOfRange. It is a starting point after restart, never
	//     used for truncation.
	//   - Any other kind: ErrInvalidWrite.
	//
	// An invalid write fails the whole call: Apply returns its error
	// (wrapping the sentinel above and, when ws holds more than one write,
	// naming its index and kind) and applies nothing. A failed commit
	// (a write or fsync error of the file) also applies nothing and is
	// latched: every later Apply returns it. No writes, or only no-ops:
	// nothing is written and nothing synced. Seq is not read. After Close:
	// ErrClosed.
	Apply(ws []protocol.Write) error

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

	// VoterSets returns the voter-set rows in offset order: one per
	// EntryVoters entry in [LogStart(), LEO()), preceded by at most two
	// rows below LogStart(): of those prefix deletions removed, the newest
	// (the set in force at the log start) and the newest before it with
	// another set (the newest change; protocol.KeptVoterRows). nil if
	// there is none. The slice and
	// the voter sets in it are copies owned by the caller. Served from
	// memory: it never waits for I/O or for Apply.
	VoterSets() []protocol.VotersAt

	// QuorumState returns the last stored quorum state (zero if none).
	QuorumState() (protocol.QuorumState, error)

	// HWCheckpoint returns the last checkpointed high watermark and whether
	// one was stored. It is a starting point after restart, never used for
	// truncation.
	HWCheckpoint() (hw uint64, ok bool, err error)

	// Close releases the store. Later calls return ErrClosed.
	Close() error
}
