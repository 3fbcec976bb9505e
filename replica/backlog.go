package replica

import (
	"fmt"

	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/replica/internal/bugs"
)

// The uncommitted backlog (docs/protocol.md R74; etcd raft's
// MaxUncommittedEntriesSize). A leader whose HW does not move (its own
// disk stalled, followers that cannot keep up) would otherwise take every
// append it is given and hold each in memory (its unsynced tail, the
// pending acknowledgements, the fetch responses) until it commits. So the
// data entries it appended in its epoch and not yet committed are bounded
// by Config.MaxUncommittedBytes: a data proposal (data, keyed, a cursor)
// that would take them over it is refused, nothing appended, and its
// caller tries again (the root's appends retry until their context ends,
// as they do without a leader: the wait is in the caller, holding its own
// records, not in the leader). A proposal arriving while the backlog is
// empty is appended whatever its size, so that every proposal that fits
// a record and a frame can commit. Barriers and voter changes are
// neither counted nor refused: they carry no data, and a voter change may
// be what unsticks the HW.
//
// A forwarded proposal is refused with AppendNotLeader naming the leader
// itself: on the wire that says exactly what happened (nothing was
// appended, and this request never will be: send it again), so no new
// answer is needed and a follower of any release retries it as it does
// any not-leader answer (its Ack is a *NotLeaderError naming the leader).
// It is remembered as refused, as R39 wants of every not-leader answer: a
// copy is answered the same way.

// backlog is a leader's count of its uncommitted data bytes. It lives in
// leaderState: a new leadership starts at zero (entries of earlier epochs
// above its HW were bounded by their own leader).
type backlog struct {
	bytes int64
	// marks are the appended proposals not yet known committed, in offset
	// order: each one's end offset and bytes.
	marks []backlogMark
}

type backlogMark struct {
	end   uint64
	bytes int64
}

// BacklogStats are the uncommitted backlog's gauge and counter (R74).
type BacklogStats struct {
	// Bytes is the leader's uncommitted data bytes now (0 on a replica
	// that does not lead).
	Bytes uint64
	// Refused counts the data proposals this replica refused, as leader,
	// for a full backlog (local and forwarded; each retry counts).
	Refused uint64
}

// backlogBytes returns the leader's uncommitted data bytes, forgetting
// what the HW has passed.
func (r *Replica) backlogBytes() int64 {
	b := &r.leader.backlog
	n := 0
	for n < len(b.marks) && b.marks[n].end <= r.hw {
		b.bytes -= b.marks[n].bytes
		n++
	}
	if n > 0 {
		b.marks = append(b.marks[:0], b.marks[n:]...)
	}
	return b.bytes
}

// backlogData reports whether entries of type typ count in the backlog.
func backlogData(typ protocol.EntryType) bool {
	return typ == protocol.EntryData || typ == protocol.EntryKeyed || typ == protocol.EntryState
}

// recordsBytes is what records take in the backlog.
func recordsBytes(records [][]byte) int64 {
	var n int64
	for _, rec := range records {
		n += int64(len(rec) + protocol.EntryOverhead)
	}
	return n
}

// backlogRefuses refuses p, a proposal of records of type typ about to be
// appended, if the backlog has no room for them, and reports whether it
// did.
func (r *Replica) backlogRefuses(p proposal, typ protocol.EntryType, records [][]byte) bool {
	limit := int64(r.cfg.MaxUncommittedBytes)
	if limit < 0 || !backlogData(typ) || bugs.BacklogUnbounded {
		return false
	}
	cur := r.backlogBytes()
	n := recordsBytes(records)
	if cur == 0 || cur+n <= limit {
		return false
	}
	r.backlogStats.Refused++
	if p.local {
		r.acks = append(r.acks, Ack{ID: p.id, Err: fmt.Errorf("%w: %d bytes uncommitted, %d more would pass MaxUncommittedBytes %d", ErrBacklogFull, cur, n, limit)})
		return true
	}
	r.memo.set(doneKey{p.from, p.requestID}, forwardMemo{state: forwardRefused})
	r.send(p.from, &protocol.AppendResponse{RequestID: p.requestID, Error: protocol.AppendNotLeader, LeaderID: r.id})
	return true
}

// noteBacklog counts records of type typ, just appended up to end, in the
// backlog.
func (r *Replica) noteBacklog(typ protocol.EntryType, records [][]byte, end uint64) {
	if !backlogData(typ) {
		return
	}
	b := &r.leader.backlog
	n := recordsBytes(records)
	b.bytes += n
	b.marks = append(b.marks, backlogMark{end: end, bytes: n})
}

// BacklogStats returns the uncommitted backlog's gauge and counter (R74).
func (r *Replica) BacklogStats() BacklogStats {
	s := r.backlogStats
	if r.leader != nil {
		s.Bytes = uint64(r.backlogBytes())
	}
	return s
}
