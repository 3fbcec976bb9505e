package storage

import "github.com/replog-io/replog/protocol"

// Entries, epoch-map rows, the quorum state and byte budgets moved to
// package protocol; the aliases below keep storage.Entry and friends
// compiling.
//
// temporary: removed once replica, fetcher and simulation import protocol.
// Nothing else may use them (storage itself names protocol's types).
// They are deprecated, but not marked with the "Deprecated:" convention on
// purpose: staticcheck (SA1019, run on ./... in CI) would then fail
// replica, fetcher and simulation, whose owners switch them later.

// Entry is a temporary alias of protocol.Entry: name that instead.
type Entry = protocol.Entry

// EntryType is a temporary alias of protocol.EntryType: name that instead.
type EntryType = protocol.EntryType

// EpochStart is a temporary alias of protocol.EpochStart: name that instead.
type EpochStart = protocol.EpochStart

// QuorumState is a temporary alias of protocol.QuorumState: name that instead.
type QuorumState = protocol.QuorumState

// Budget is a temporary alias of protocol.Budget: name that instead.
type Budget = protocol.Budget

// Temporary aliases of the constants of the same names in package protocol:
// name those instead.
const (
	EntryData     = protocol.EntryData
	EntryControl  = protocol.EntryControl
	EntryOverhead = protocol.EntryOverhead
)
