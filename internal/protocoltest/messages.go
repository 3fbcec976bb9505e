// Package protocoltest holds messages for codec tests of the packages that
// encode protocol messages (protocol's own codec, transport's frames):
// samples of every kind with their edge cases, random messages, both also
// as messages of named logs, and the normal form a message decodes to.
package protocoltest

import (
	"bytes"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/replog-io/replog/protocol"
)

// Normalize maps empty slices to nil, and an AppendRequest's Type
// EntryData to zero, which is how they decode: a decoded message equals
// Normalize of the message that was encoded.
func Normalize(m protocol.Message) protocol.Message {
	switch b := m.Body.(type) {
	case *protocol.FetchResponse:
		c := *b
		if len(c.Entries) == 0 {
			c.Entries = nil
		} else {
			c.Entries = append([]protocol.Entry(nil), c.Entries...)
			for i := range c.Entries {
				if len(c.Entries[i].Data) == 0 {
					c.Entries[i].Data = nil
				}
			}
		}
		if len(c.LogStartVoters) == 0 {
			c.LogStartVoters = nil
		}
		m.Body = &c
	case *protocol.SnapshotResponse:
		c := *b
		if len(c.Data) == 0 {
			c.Data = nil
		}
		m.Body = &c
	case *protocol.AppendRequest:
		c := *b
		if c.Type == protocol.EntryData {
			c.Type = 0
		}
		if len(c.Records) == 0 {
			c.Records = nil
		} else {
			c.Records = append([][]byte(nil), c.Records...)
			for i := range c.Records {
				if len(c.Records[i]) == 0 {
					c.Records[i] = nil
				}
			}
		}
		m.Body = &c
	}
	return m
}

// Samples returns one or more messages of every kind, edge cases included
// (zero and maximal values, empty and nil slices, a 1 MiB entry and
// record, an unknown error code and entry type, non-UTF-8 IDs).
func Samples() []protocol.Message {
	big := bytes.Repeat([]byte{0x5A}, 1<<20)
	return []protocol.Message{
		{From: "a", To: "b", Body: &protocol.FetchRequest{FetchID: 1, ReplicaID: "a", CurrentEpoch: 2, FetchOffset: 3, LastFetchedEpoch: 1, MaxBytes: 1 << 20, MaxWaitMs: 500}},
		{Body: &protocol.FetchRequest{}},
		{From: "n1", To: "n2", Body: &protocol.FetchRequest{FetchID: math.MaxUint64, CurrentEpoch: math.MaxUint64, FetchOffset: math.MaxUint64, LastFetchedEpoch: math.MaxUint64, MaxBytes: math.MaxUint32, MaxWaitMs: math.MaxUint32}},
		{From: "b", To: "a", Body: &protocol.FetchResponse{FetchID: 9, LeaderID: "b", Epoch: 4, HighWatermark: 10, LogStartOffset: 0}},
		{From: "b", To: "a", Body: &protocol.FetchResponse{FetchID: 9, LeaderID: "b", Epoch: 4, Entries: []protocol.Entry{}}},
		{From: "b", To: "a", Body: &protocol.FetchResponse{FetchID: 1, LeaderID: "b", Epoch: 5, Error: protocol.FetchDivergingEpoch, DivergingEpoch: 3, DivergingEndOffset: 77}},
		{From: "b", To: "a", Body: &protocol.FetchResponse{FetchID: 2, LeaderID: "", Epoch: 5, Error: protocol.FetchError(200)}},
		{From: "b", To: "a", Body: &protocol.FetchResponse{FetchID: 3, LeaderID: "b", Epoch: 4, HighWatermark: 3, Entries: []protocol.Entry{
			{Offset: 0, Epoch: 1, Type: protocol.EntryData, Data: []byte("hello")},
			{Offset: 1, Epoch: 1, Type: protocol.EntryControl},
			{Offset: 2, Epoch: 4, Type: protocol.EntryData, Data: []byte{}},
			{Offset: 3, Epoch: 4, Type: protocol.EntryType(99), Data: big},
		}}},
		{From: "x", To: "y", Body: &protocol.VoteRequest{Epoch: 7, CandidateID: "x", LastEpoch: 6, LEO: 100, PreVote: true, Round: 41}},
		{From: "x", To: "y", Body: &protocol.VoteRequest{Epoch: math.MaxUint64, CandidateID: "x", Round: math.MaxUint64}},
		{Body: &protocol.VoteRequest{}},
		{From: "y", To: "x", Body: &protocol.VoteResponse{Epoch: 7, VoterID: "y", Granted: true, PreVote: true, RequestEpoch: 8, Round: 41, LeaderID: "z"}},
		{From: "y", To: "x", Body: &protocol.VoteResponse{Epoch: 7, VoterID: "y", RequestEpoch: math.MaxUint64, Round: math.MaxUint64}},
		{Body: &protocol.VoteResponse{}},
		{From: "l", To: "f", Body: &protocol.BeginEpoch{Epoch: 8, LeaderID: "l"}},
		{Body: &protocol.BeginEpoch{}},
		{From: "f", To: "l", Body: &protocol.AppendRequest{RequestID: 5, Epoch: 3, Records: [][]byte{[]byte("r1"), nil, {}, big}}},
		{From: "f", To: "l", Body: &protocol.AppendRequest{RequestID: 7, Epoch: math.MaxUint64, Records: [][]byte{[]byte("r")}}},
		{From: "f", To: "l", Body: &protocol.AppendRequest{RequestID: 6}},
		{From: "f", To: "l", Body: &protocol.AppendRequest{RequestID: 6, Records: [][]byte{}}},
		{From: "l", To: "f", Body: &protocol.AppendResponse{RequestID: 5, Error: protocol.AppendNotLeader, LeaderID: "q", FirstOffset: 12}},
		{Body: &protocol.AppendResponse{}},
		{From: "f", To: "l", Body: &protocol.DeleteRecords{Epoch: 3, Offset: 1 << 40}},
		{Body: &protocol.DeleteRecords{}},
		{From: strings.Repeat("é", 100), To: "\x00", Body: &protocol.BeginEpoch{Epoch: 1, LeaderID: "\xff\xfe"}},
		{From: "a", To: "b", Body: &protocol.FetchRequest{FetchID: 2, ReplicaID: "a", ReplicaDirID: "0123456789abcdef0123456789abcdef", CurrentEpoch: 2, Restand: true}},
		{From: "x", To: "y", Body: &protocol.VoteRequest{Epoch: 7, CandidateID: "x", CandidateDirID: "d-x", VoterDirID: "d-y", Round: 1}},
		{From: "y", To: "x", Body: &protocol.VoteResponse{Epoch: 7, VoterID: "y", Granted: true, RequestEpoch: 7, Round: 1, VoterDirID: "d-y"}},
		{From: "y", To: "x", Body: &protocol.VoteResponse{Epoch: 3, VoterID: "y", RequestEpoch: 1, Round: 2, LeaderID: "z", VoterDirID: "d-y", Formed: true}},
		{From: "f", To: "l", Body: &protocol.AppendRequest{RequestID: 8, Epoch: 3, Records: [][]byte{protocol.EncodeVoterChange(protocol.VoterChange{NodeID: "n2"})}, Type: protocol.EntryVoters}},
		{From: "l", To: "f", Body: &protocol.AppendResponse{RequestID: 8, Error: protocol.AppendNotCaughtUp}},
		{From: "b", To: "a", Body: &protocol.FetchResponse{FetchID: 4, LeaderID: "b", Epoch: 4, HighWatermark: 1, Entries: []protocol.Entry{
			{Offset: 0, Epoch: 4, Type: protocol.EntryVoters, Data: protocol.EncodeVoters([]protocol.Voter{{ID: "a", DirID: "da"}, {ID: "b", DirID: "db"}})},
		}}},
		{From: "b", To: "a", Body: &protocol.FetchResponse{FetchID: 5, LeaderID: "b", Epoch: 6, Error: protocol.FetchOffsetOutOfRange, HighWatermark: 90, LogStartOffset: 80,
			LogStartVoters: []protocol.VotersAt{
				{Offset: 3, Voters: []protocol.Voter{{ID: "a", DirID: "da"}, {ID: "b", DirID: "db"}, {ID: "c", DirID: "dc"}}},
				{Offset: 41, Voters: []protocol.Voter{{ID: "a", DirID: "da"}, {ID: "b", DirID: "db"}}, Owed: []protocol.Voter{{ID: "c", DirID: "dc"}}},
			}, LogStartEpoch: 5}},
		{From: "b", To: "a", Body: &protocol.FetchResponse{FetchID: 6, LeaderID: "b", Epoch: 6, Error: protocol.FetchOffsetOutOfRange, LogStartOffset: 80, LogStartVoters: []protocol.VotersAt{}}},
		{From: "l", To: "f", Body: &protocol.EndEpoch{Epoch: 9, LeaderID: "l", Successor: "f"}},
		{From: "l", To: "f", Body: &protocol.EndEpoch{Epoch: math.MaxUint64}},
		{Body: &protocol.EndEpoch{}},
	}
}

// SnapshotSamples returns messages of the kinds that wire version
// protocol.SnapshotTransferVersion added (snapshot transfer), edge cases
// included. They are not among Samples, whose frames golden files of
// older versions pin.
func SnapshotSamples() []protocol.Message {
	big := bytes.Repeat([]byte{0x5A}, 1<<20)
	return []protocol.Message{
		{From: "f", To: "l", Body: &protocol.SnapshotRequest{RequestID: 3, Epoch: 4, MaxBytes: 1 << 20}},
		{From: "f", To: "l", Body: &protocol.SnapshotRequest{RequestID: math.MaxUint64, Epoch: math.MaxUint64, Offset: math.MaxUint64, SnapshotEpoch: math.MaxUint64, Position: math.MaxUint64, MaxBytes: math.MaxUint32}},
		{Body: &protocol.SnapshotRequest{}},
		{From: "l", To: "f", Body: &protocol.SnapshotResponse{RequestID: 3, LeaderID: "l", Epoch: 4, LogStartOffset: 80, Offset: 90, SnapshotEpoch: 3, Size: 1<<20 + 7, CRC: 0xdeadbeef, Position: 7, Data: big}},
		{From: "l", To: "f", Body: &protocol.SnapshotResponse{RequestID: 4, LeaderID: "l", Epoch: 4, Offset: 90, Size: 5, Position: 5, Data: []byte{}}},
		{From: "l", To: "f", Body: &protocol.SnapshotResponse{RequestID: 5, Epoch: 4, Error: protocol.SnapshotError(200)}},
		{Body: &protocol.SnapshotResponse{}},
	}
}

// NamedSamples returns Samples as messages of named logs (Message.Log set,
// which only wire versions from protocol.LogNameVersion on carry): names
// of one byte, of every allowed kind of byte, and of
// protocol.MaxLogNameLength bytes, in turn.
func NamedSamples() []protocol.Message {
	names := []string{"orders", "a", "tenant-42.outbox_v2", strings.Repeat("z", protocol.MaxLogNameLength), "0.-_"}
	ms := Samples()
	for i := range ms {
		ms[i].Log = names[i%len(names)]
	}
	return ms
}

// RandomNamed is Random as a message of a random valid named log. Random
// itself never names a log, so the streams of messages it draws (which
// golden files of older wire versions pin) stay as they were.
func RandomNamed(r *rand.Rand) protocol.Message {
	m := Random(r)
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789._-"
	b := make([]byte, 1+r.IntN(protocol.MaxLogNameLength))
	for i := range b {
		b[i] = alphabet[r.IntN(len(alphabet))]
	}
	if b[0] == '.' {
		b[0] = 'a'
	}
	m.Log = string(b)
	return m
}

func randString(r *rand.Rand) string {
	b := make([]byte, r.IntN(12))
	for i := range b {
		b[i] = byte(r.IntN(256))
	}
	return string(b)
}

func randBytes(r *rand.Rand) []byte {
	switch r.IntN(4) {
	case 0:
		return nil
	case 1:
		return []byte{}
	}
	b := make([]byte, r.IntN(300))
	for i := range b {
		b[i] = byte(r.IntN(256))
	}
	return b
}

// Random builds a random message of a random kind from r (deterministic
// for a given r).
func Random(r *rand.Rand) protocol.Message {
	m := protocol.Message{From: randString(r), To: randString(r)}
	u64 := func() uint64 {
		if r.IntN(4) == 0 {
			return math.MaxUint64 - uint64(r.IntN(3))
		}
		return r.Uint64() >> uint(r.IntN(64))
	}
	switch r.IntN(9) + 1 {
	case 1:
		m.Body = &protocol.FetchRequest{FetchID: u64(), ReplicaID: randString(r), ReplicaDirID: randString(r), CurrentEpoch: u64(), FetchOffset: u64(), LastFetchedEpoch: u64(), MaxBytes: r.Uint32(), MaxWaitMs: r.Uint32(), Restand: r.IntN(2) == 0}
	case 2:
		b := &protocol.FetchResponse{FetchID: u64(), LeaderID: randString(r), Epoch: u64(), Error: protocol.FetchError(r.IntN(6)), DivergingEpoch: u64(), DivergingEndOffset: u64(), HighWatermark: u64(), LogStartOffset: u64(), LogStartEpoch: u64()}
		if n := r.IntN(20); n > 0 || r.IntN(2) == 0 {
			b.Entries = make([]protocol.Entry, n)
			for i := range b.Entries {
				b.Entries[i] = protocol.Entry{Offset: u64(), Epoch: u64(), Time: int64(u64()), Type: protocol.EntryType(r.IntN(5)), Data: randBytes(r)}
			}
		}
		m.Body = b
	case 3:
		m.Body = &protocol.VoteRequest{Epoch: u64(), CandidateID: randString(r), LastEpoch: u64(), LEO: u64(), PreVote: r.IntN(2) == 0, Round: u64(), CandidateDirID: randString(r), VoterDirID: randString(r)}
	case 4:
		m.Body = &protocol.VoteResponse{Epoch: u64(), VoterID: randString(r), Granted: r.IntN(2) == 0, PreVote: r.IntN(2) == 0, RequestEpoch: u64(), Round: u64(), LeaderID: randString(r), VoterDirID: randString(r), Formed: r.IntN(2) == 0}
	case 5:
		m.Body = &protocol.BeginEpoch{Epoch: u64(), LeaderID: randString(r)}
	case 6:
		b := &protocol.AppendRequest{RequestID: u64(), Epoch: u64()}
		if n := r.IntN(10); n > 0 || r.IntN(2) == 0 {
			b.Records = make([][]byte, n)
			for i := range b.Records {
				b.Records[i] = randBytes(r)
			}
		}
		if r.IntN(4) == 0 {
			b.Type = protocol.EntryControl + protocol.EntryType(r.IntN(2))
		}
		m.Body = b
	case 7:
		m.Body = &protocol.AppendResponse{RequestID: u64(), Error: protocol.AppendError(r.IntN(9)), LeaderID: randString(r), FirstOffset: u64()}
	case 8:
		m.Body = &protocol.DeleteRecords{Epoch: u64(), Offset: u64()}
	case 9:
		m.Body = &protocol.EndEpoch{Epoch: u64(), LeaderID: randString(r), Successor: randString(r)}
	}
	return m
}

// FetchResponse1024 is a full fetch answer (1,024 entries of 128 bytes)
// for benchmarks and allocation tests of encoding, decoding and framing.
func FetchResponse1024() protocol.Message {
	entries := make([]protocol.Entry, 1024)
	for i := range entries {
		data := make([]byte, 128)
		for j := range data {
			data[j] = byte(i + j)
		}
		entries[i] = protocol.Entry{Offset: uint64(1000 + i), Epoch: 3, Type: protocol.EntryData, Data: data}
	}
	return protocol.Message{From: "leader-1", To: "follower-2", Body: &protocol.FetchResponse{
		FetchID: 77, LeaderID: "leader-1", Epoch: 3, HighWatermark: 1500, Entries: entries,
	}}
}
