package storage

import "github.com/replog-io/replog/protocol"

// Entries, epoch-map rows, the quorum state and byte budgets moved to
// package protocol; the aliases below keep storage.Entry and friends
// compiling.
//
// temporary: removed once replica, fetcher and simulation import protocol.
// Nothing else may use them (storage itself names protocol's types).

// Deprecated: use protocol.Entry.
type Entry = protocol.Entry

// Deprecated: use protocol.EntryType.
type EntryType = protocol.EntryType

// Deprecated: use protocol.EpochStart.
type EpochStart = protocol.EpochStart

// Deprecated: use protocol.QuorumState.
type QuorumState = protocol.QuorumState

// Deprecated: use protocol.Budget.
type Budget = protocol.Budget

// Deprecated: use the constants of the same names in package protocol.
const (
	EntryData     = protocol.EntryData
	EntryControl  = protocol.EntryControl
	EntryOverhead = protocol.EntryOverhead
)
