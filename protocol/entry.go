package protocol

import "fmt"

// EntryType says whether an entry carries user data or is a control record
// written by the protocol itself. Values are part of the wire format and of
// the stored format: never renumber.
type EntryType uint8

const (
	// EntryData is an entry appended by a user; readers see it.
	EntryData EntryType = 1
	// EntryControl is written by the protocol (the epoch-start entry a new
	// leader appends); readers never see it, but it takes an offset.
	EntryControl EntryType = 2
	// EntryVoters is a control entry written by a leader whose Data is an
	// encoded voter set (EncodeVoters): the voters in force from this
	// offset on, until the next one (docs/protocol.md R55). Readers never
	// see it. In an AppendRequest the type marks a voter-change request
	// instead, whose one record is an encoded VoterChange.
	EntryVoters EntryType = 3
)

// Known reports whether t is one of the entry types above.
func (t EntryType) Known() bool {
	return t == EntryData || t == EntryControl || t == EntryVoters || t == EntryKeyed || t == EntryState || t == EntryFeature || t == EntryHole
}

// EntryHole is the placeholder of an entry that compaction removed
// (docs/protocol.md R103, R104): a control entry (readers never see it)
// with the removed entry's offset, epoch and time and no data. A store
// that compacted a segment returns one for each removed offset, so the
// log still holds one entry per offset; a follower that fetches it stores
// it as any entry, and its own compaction removes it. Only a log with
// entry keys (FeatureLevelKeys) is compacted, so only a cluster at level
// 10 ever carries one.
const EntryHole EntryType = 7

// Visible reports whether readers see entries of type t (data, keyed data).
func (t EntryType) Visible() bool { return t == EntryData || t == EntryKeyed }

// String returns "data", "control", "voters", "keyed", "state",
// "feature", "hole" or "type(N)".
func (t EntryType) String() string {
	switch t {
	case EntryData:
		return "data"
	case EntryControl:
		return "control"
	case EntryVoters:
		return "voters"
	case EntryKeyed:
		return "keyed"
	case EntryState:
		return "state"
	case EntryFeature:
		return "feature"
	case EntryHole:
		return "hole"
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
	// Time is when the leader appended the entry, in milliseconds since
	// the Unix epoch by the leader's clock (Kafka's record timestamp; 0:
	// unknown, e.g. an entry stored before entries carried a time).
	// Retention by age reads it; nothing in the protocol depends on clocks
	// agreeing.
	Time int64
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
// are counted (a store's Entries maxBytes, fetch responses, forwarded
// batches): at least what its offset, epoch, type and length take in an
// encoded message (see the compile-time check in codec.go). Counting it
// keeps a response of many tiny (or empty) entries as bounded as one of a
// few large ones.
const EntryOverhead = 32

// Budget counts entries against a byte bound: each entry costs len(Data) +
// EntryOverhead, and the first entry always fits so that a reader makes
// progress. The zero Used starts a fresh budget.
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
