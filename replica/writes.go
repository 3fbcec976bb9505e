package replica

import (
	"fmt"
	"slices"

	"github.com/replog-io/replog/protocol"
)

// This file issues the writes (emit) and the messages that wait for them
// (send). A write records what it changes and nothing more: the log view,
// the voter set in force (refreshVoters, with a leader's grace for a voter
// new to it) and the key table; a truncation below the HW halts instead.
// It never moves the replica between roles, nor changes its epoch, vote or
// leader: the handler that wrote settles the role through transitions.go
// (settleRole) once the write is recorded.

// send queues m to be handed out once every quorum-state write issued so
// far is persisted.
func (r *Replica) send(to string, body protocol.Body) {
	r.held = append(r.held, heldMessage{dep: r.quorumSeq, msg: protocol.Message{From: r.id, To: to, Body: body}})
}

// emit issues a write.
func (r *Replica) emit(w protocol.Write) uint64 {
	r.lastSeq++
	w.Seq = r.lastSeq
	r.writes = append(r.writes, w)
	if w.Kind != protocol.WriteHWCheckpoint {
		r.stateSeq = w.Seq
	}
	if w.Kind != protocol.WriteHWCheckpoint && w.Kind != protocol.WriteAppend {
		r.barrierSeq = w.Seq
	}
	if w.Kind == protocol.WriteQuorumState {
		r.quorumSeq = w.Seq
	}
	return w.Seq
}

// appendEntries issues an append of entries (starting at the LEO), merged
// into the previous write if that is an append not yet handed out. That is
// representation only (one Write, one Seq, for a step's proposals instead
// of one each); batching for the disk is the shell's, which applies any run
// of writes in one transaction.
func (r *Replica) appendEntries(entries []protocol.Entry) {
	if n := len(r.writes); n > 0 && r.writes[n-1].Kind == protocol.WriteAppend {
		w := &r.writes[n-1]
		w.Entries = append(w.Entries, entries...)
		if r.log.append(entries, w.Seq) {
			r.refreshVoters()
		}
		r.keysAppended(entries)
		return
	}
	seq := r.emit(protocol.Write{Kind: protocol.WriteAppend, Entries: slices.Clone(entries)})
	if r.log.append(entries, seq) {
		r.refreshVoters() // in force once appended (R55)
	}
	r.keysAppended(entries)
}

// truncate issues a truncation of the log to to (< LEO). Truncating below
// the HW would remove committed entries: that is an invariant violation.
// It is refused, counted (Status.Violations) and halts the replica (Err
// wraps ErrCommittedTruncation): nothing committed is ever destroyed on
// anyone's word.
func (r *Replica) truncate(to uint64) {
	// Nothing below the log start is held (retention, R51–R53): a point
	// below it means "all we hold". A follower restarted between a reset's
	// deletion and its truncation holds divergent entries above a log
	// start that is also its HW; a leader's diverging answer below that
	// log start must empty them, not halt it.
	to = max(to, r.log.logStart)
	if to >= r.log.LEO() {
		return
	}
	if to < r.hw {
		r.violations++
		r.halt(fmt.Errorf("%w: asked to truncate to offset %d, below the high watermark %d (LEO %d, epoch %d, leader %q)",
			ErrCommittedTruncation, to, r.hw, r.log.LEO(), r.epoch, r.leaderID))
		return
	}
	r.emit(protocol.Write{Kind: protocol.WriteTruncate, Offset: to})
	if r.log.truncate(to) {
		r.refreshVoters() // the previous set is in force again (R55)
	}
	r.keysTruncated(to)
}

// writeQuorumState issues a write of the current quorum state.
//
// A replica that led its epoch keeps naming itself as the epoch's leader
// durably after it stepped down, until the epoch changes: after a restart
// it must still know that a forwarded append naming this epoch may have
// been appended by its earlier life, and answer a late copy "unknown",
// never a final "not leader" (R47). New never follows itself, so the
// stored name only says who led.
func (r *Replica) writeQuorumState() {
	leader := r.leaderID
	if r.epochLeader == r.id {
		leader = r.id
	}
	r.emit(protocol.Write{Kind: protocol.WriteQuorumState, Quorum: protocol.QuorumState{
		Epoch: r.epoch, VotedFor: r.votedFor, LeaderID: leader,
	}})
}

// maybeCheckpoint writes the HW checkpoint at most once per interval, never
// above the durable LEO.
func (r *Replica) maybeCheckpoint() {
	if r.now.Sub(r.lastCheckpointAt) < hwCheckpointInterval {
		return
	}
	hw := min(r.hw, r.log.durableEnd)
	if r.checkpointed && hw == r.lastCheckpointHW {
		return
	}
	r.emit(protocol.Write{Kind: protocol.WriteHWCheckpoint, Offset: hw})
	r.lastCheckpointAt, r.lastCheckpointHW, r.checkpointed = r.now, hw, true
}
