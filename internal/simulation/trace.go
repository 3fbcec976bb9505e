package simulation

import (
	"fmt"
	"strings"
	"time"

	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/replica"
)

// hasher is FNV-1a over the binary form of everything that happens in a
// run (events, messages, writes, acks, times). Two runs of one seed must
// end with the same hash. It is fed field by field, without formatting, so
// that hashing stays cheap enough to be on in every run.
type hasher uint64

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

func newHasher() hasher { return fnvOffset }

func (h *hasher) byte(b byte) {
	*h ^= hasher(b)
	*h *= fnvPrime
}

// u64 mixes in 8 bytes at once (one multiply-xor round instead of eight
// FNV bytes: the hash only has to be a pure function of the run).
func (h *hasher) u64(x uint64) {
	*h ^= hasher(x)
	*h *= fnvPrime
	*h ^= *h >> 32
}

func (h *hasher) bool(b bool) {
	if b {
		h.byte(1)
	} else {
		h.byte(0)
	}
}

func (h *hasher) str(s string) {
	h.u64(uint64(len(s)))
	for i := 0; i < len(s); i++ {
		h.byte(s[i])
	}
}

func (h *hasher) bytes(b []byte) {
	h.u64(uint64(len(b)))
	for _, c := range b {
		h.byte(c)
	}
}

func (h *hasher) entries(es []protocol.Entry) {
	h.u64(uint64(len(es)))
	for _, e := range es {
		h.u64(e.Offset)
		h.u64(e.Epoch)
		h.byte(byte(e.Type))
		h.bytes(e.Data)
	}
}

func (h *hasher) msg(m protocol.Message) {
	h.str(m.From)
	h.str(m.To)
	switch b := m.Body.(type) {
	case *protocol.FetchRequest:
		h.byte(byte(protocol.KindFetchRequest))
		h.u64(b.FetchID)
		h.str(b.ReplicaID)
		h.u64(b.CurrentEpoch)
		h.u64(b.FetchOffset)
		h.u64(b.LastFetchedEpoch)
		h.u64(uint64(b.MaxBytes))
		h.u64(uint64(b.MaxWaitMs))
		if b.FeatureLevel != 0 {
			h.u64(uint64(b.FeatureLevel))
		}
		if b.HasDurableOffset {
			h.u64(b.DurableOffset)
		}
	case *protocol.FetchResponse:
		h.byte(byte(protocol.KindFetchResponse))
		h.u64(b.FetchID)
		h.str(b.LeaderID)
		h.u64(b.Epoch)
		h.byte(byte(b.Error))
		h.u64(b.DivergingEpoch)
		h.u64(b.DivergingEndOffset)
		h.u64(b.HighWatermark)
		h.u64(b.LogStartOffset)
		h.entries(b.Entries)
	case *protocol.VoteRequest:
		h.byte(byte(protocol.KindVoteRequest))
		h.u64(b.Epoch)
		h.str(b.CandidateID)
		h.u64(b.LastEpoch)
		h.u64(b.LEO)
		h.bool(b.PreVote)
		h.u64(b.Round)
	case *protocol.VoteResponse:
		h.byte(byte(protocol.KindVoteResponse))
		h.u64(b.Epoch)
		h.str(b.VoterID)
		h.bool(b.Granted)
		h.bool(b.PreVote)
		h.u64(b.RequestEpoch)
		h.u64(b.Round)
		h.str(b.LeaderID)
	case *protocol.BeginEpoch:
		h.byte(byte(protocol.KindBeginEpoch))
		h.u64(b.Epoch)
		h.str(b.LeaderID)
	case *protocol.AppendRequest:
		h.byte(byte(protocol.KindAppendRequest))
		h.u64(b.RequestID)
		h.u64(b.Epoch)
		h.u64(uint64(len(b.Records)))
		for _, r := range b.Records {
			h.bytes(r)
		}
	case *protocol.AppendResponse:
		h.byte(byte(protocol.KindAppendResponse))
		h.u64(b.RequestID)
		h.byte(byte(b.Error))
		h.str(b.LeaderID)
		h.u64(b.FirstOffset)
	case *protocol.DeleteRecords:
		h.byte(byte(protocol.KindDeleteRecords))
		h.u64(b.Epoch)
		h.u64(b.Offset)
	case *protocol.SnapshotRequest:
		h.byte(byte(protocol.KindSnapshotRequest))
		h.u64(b.RequestID)
		h.u64(b.Epoch)
		h.u64(b.Offset)
		h.u64(b.SnapshotEpoch)
		h.u64(b.Position)
		h.u64(uint64(b.MaxBytes))
	case *protocol.SnapshotResponse:
		h.byte(byte(protocol.KindSnapshotResponse))
		h.u64(b.RequestID)
		h.str(b.LeaderID)
		h.u64(b.Epoch)
		h.byte(byte(b.Error))
		h.u64(b.LogStartOffset)
		h.u64(b.Offset)
		h.u64(b.SnapshotEpoch)
		h.u64(b.Size)
		h.u64(uint64(b.CRC))
		h.u64(b.Position)
		h.bytes(b.Data)
	default:
		h.byte(0xff)
	}
}

func (h *hasher) write(w protocol.Write) {
	h.u64(w.Seq)
	h.byte(byte(w.Kind))
	h.entries(w.Entries)
	h.u64(w.Offset)
	h.u64(w.Quorum.Epoch)
	h.str(w.Quorum.VotedFor)
	h.str(w.Quorum.LeaderID)
}

func (h *hasher) ack(a replica.Ack) {
	h.u64(a.ID)
	h.u64(a.FirstOffset)
	if a.Err != nil {
		h.str(a.Err.Error())
	} else {
		h.byte(0)
	}
}

// ring keeps the last lines of a trace, for failure reports.
type ring struct {
	lines []string
	next  int
	full  bool
}

func newRing(n int) *ring { return &ring{lines: make([]string, n)} }

func (r *ring) add(s string) {
	r.lines[r.next] = s
	r.next++
	if r.next == len(r.lines) {
		r.next, r.full = 0, true
	}
}

func (r *ring) String() string {
	var b strings.Builder
	if r.full {
		for _, l := range r.lines[r.next:] {
			b.WriteString(l)
			b.WriteByte('\n')
		}
	}
	for _, l := range r.lines[:r.next] {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return b.String()
}

func fmtDur(d time.Duration) string {
	return fmt.Sprintf("%9.3fms", float64(d)/float64(time.Millisecond))
}

func fmtWrite(w protocol.Write) string {
	switch w.Kind {
	case protocol.WriteAppend:
		if len(w.Entries) == 0 {
			return fmt.Sprintf("w%d append[]", w.Seq)
		}
		return fmt.Sprintf("w%d append[%d..%d] epoch=%d..%d", w.Seq, w.Entries[0].Offset,
			w.Entries[len(w.Entries)-1].Offset, w.Entries[0].Epoch, w.Entries[len(w.Entries)-1].Epoch)
	case protocol.WriteTruncate:
		return fmt.Sprintf("w%d truncate(%d)", w.Seq, w.Offset)
	case protocol.WriteQuorumState:
		return fmt.Sprintf("w%d quorum{epoch=%d voted=%q leader=%q}", w.Seq, w.Quorum.Epoch, w.Quorum.VotedFor, w.Quorum.LeaderID)
	case protocol.WriteHWCheckpoint:
		return fmt.Sprintf("w%d hw-checkpoint(%d)", w.Seq, w.Offset)
	case protocol.WriteDeletePrefix:
		return fmt.Sprintf("w%d delete-prefix(%d)", w.Seq, w.Offset)
	}
	return fmt.Sprintf("w%d kind(%d)", w.Seq, w.Kind)
}
