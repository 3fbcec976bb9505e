package protocol

// KeyCheckpoint is a stored copy of a replica's keyed-state table
// (docs/protocol.md R62, R76): the table as it stood once the entries
// below Offset were applied, with Epoch the epoch of the entry at
// Offset-1. Data is the replica's own encoding, versioned by its first
// byte; a store keeps it whole and returns it unchanged, and never reads
// it. A checkpoint whose Epoch is not the epoch of its log's entry at
// Offset-1, or whose Offset is not above the log start or is above the
// LEO, describes another log and is ignored by the replica: so a store
// may keep it apart from the log, write it at any time and lose it at a
// crash.
type KeyCheckpoint struct {
	Offset uint64
	Epoch  uint64
	Data   []byte
}
