package replica

import (
	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/replica/internal/bugs"
)

// Retention (docs/protocol.md R51–R53): the log start moves up, never down.
// The leader moves its own (DeleteBefore, on the shell's word: an explicit
// call or a retention policy), never to or above its HW; its log start
// travels in every fetch response, and a follower or observer follows it,
// never above its own HW; one whose fetch offset is below the leader's log
// start resets to it (Kafka's OffsetOutOfRange handling).

// DeleteBefore moves this leader's log start up to offset, bounded as
// deletePrefix bounds it (below its HW and its durable LEO: nothing that may
// still be needed to commit or to read is deleted), and returns the log
// start after the call. Followers
// follow through fetch responses. On a replica that does not lead it
// changes nothing and returns ErrNotLeader (the shell forwards the request
// to the leader). A halted replica returns its error.
func (r *Replica) DeleteBefore(offset uint64) (uint64, error) {
	if r.err != nil {
		return r.log.logStart, r.err
	}
	if r.role != RoleLeader {
		return r.log.logStart, &NotLeaderError{LeaderID: r.leaderID}
	}
	r.deletePrefix(offset)
	return r.log.logStart, nil
}

// RequestDeleteBefore is DeleteBefore from any replica (R54): a leader
// moves its log start at once; a follower or observer that knows its
// leader asks it with a DeleteRecords message (one-way, never retried
// here: the caller watches its own log start, which follows the leader's,
// and asks again if it must). With no leader known it returns a
// *NotLeaderError; a halted replica returns its error.
func (r *Replica) RequestDeleteBefore(offset uint64) error {
	if r.err != nil {
		return r.err
	}
	switch {
	case r.role == RoleLeader:
		_, err := r.DeleteBefore(offset)
		return err
	case r.leaderID != "" && (r.role == RoleFollower || r.role == RoleObserver):
		if offset > r.log.logStart {
			r.send(r.leaderID, &protocol.DeleteRecords{Epoch: r.epoch, Offset: offset})
		}
		return nil
	}
	return &NotLeaderError{}
}

// handleDeleteRecords is the leader's side of R54: a member's request in
// this leader's epoch moves its log start (bounded as DeleteBefore bounds
// it); any other is dropped (the sender asks again after learning the
// leader).
func (r *Replica) handleDeleteRecords(from string, req *protocol.DeleteRecords) {
	if req.Epoch != r.epoch || !r.isVoter(from) && !r.fetchSession(from) {
		r.logger.Debug("dropping a DeleteRecords request", "from", from, "epoch", req.Epoch)
		return
	}
	before := r.log.logStart
	if after, _ := r.DeleteBefore(req.Offset); after != before {
		r.logger.Info("log start moved on request", "from", from, "log_start", after)
	}
}

// followLogStart moves a follower's log start up to the leader's, never
// to its own HW (R52): it deletes only what it knows to be committed.
func (r *Replica) followLogStart(leaderLogStart uint64) {
	r.deletePrefix(leaderLogStart)
}

// deletePrefix issues a deletion of the entries below upTo if that moves the
// log start, keeping two things (R51, R52). The last committed, durable
// entry: the log start stays below the HW and the durable LEO, so no
// deletion empties the log and no truncation (never below the HW) reaches
// the log start. And the epoch of the entry below the log start: it is
// never the first offset of an epoch (then lower), so the row covering it
// also covers the offset before. Without the first, a follower that deleted
// up to its HW and then truncated what it held above it would have no
// entry and no epoch row left, and grant votes as an empty log to
// candidates that lack the committed entries it deleted; without the
// second, a follower caught up to exactly the log start would fetch with
// an epoch the leader no longer has, and be answered diverging for ever.
func (r *Replica) deletePrefix(upTo uint64) {
	limit := min(r.hw, r.log.durableEnd)
	if bugs.RetentionAboveHW && r.role == RoleLeader {
		limit = r.log.durableEnd // deliberately ignores the HW (a test-only bug)
	}
	upTo = DeletionReach(r.log.epochs, r.log.logStart, upTo, limit)
	if upTo <= r.log.logStart {
		return
	}
	if r.role == RoleLeader {
		// R66: never past an entry a live key needs; copies of those
		// below upTo are appended, and a later deletion moves on.
		if b := r.keepLiveKeys(upTo); b < upTo {
			if upTo = DeletionReach(r.log.epochs, r.log.logStart, b, limit); upTo <= r.log.logStart {
				return
			}
		}
	}
	r.emit(protocol.Write{Kind: protocol.WriteDeletePrefix, Offset: upTo})
	r.log.deletePrefix(upTo)
	if r.role == RoleLeader && !r.bootstrap && r.votersOffset < upTo {
		// The set in force is now below the log start: the store keeps
		// its row (R55), but a follower that resets to our log start (R53)
		// would never fetch it. A copy above the log start tells it; it is
		// the same set, no change (R58 does not apply).
		r.appendVoterSet(r.voterSet(), r.owed)
	}
}

// resetToLogStart empties a follower whose fetch offset (its LEO) is below
// its leader's log start and restarts its log there, with the leader's
// voter-set rows below it (R53, R55): what it holds is
// all below the leader's log start, so it is either committed and deleted by
// retention everywhere, or uncommitted and never needed. Its HW does not
// move until the leader answers a fetch sent after the reset is durable:
// until then a reader here must not be told that offsets the old store
// still holds up to the new start are committed.
func (r *Replica) resetToLogStart(leaderLogStart uint64, resp *protocol.FetchResponse) {
	if leaderLogStart <= r.log.LEO() {
		return // our next fetch is within the leader's log
	}
	if r.snapshotFirst(resp.LeaderID, resp, false) {
		return // the reset follows the transfer (R92)
	}
	r.logger.Info("fetch offset below the leader's log start: resetting the log to it",
		"leo", r.log.LEO(), "log_start", r.log.logStart, "leader_log_start", leaderLogStart)
	r.resetLog(leaderLogStart, false, resp.LogStartVoters, resp.LogStartEpoch)
}

// resetLog empties the log and restarts it at start, the leader's log start
// (R53): with truncate, a truncation to start of what the log held at or
// above it, then a prefix deletion to start (a crash between the two
// leaves the log below start, its own, and nothing of epochs the leader
// does not have: those were never committed). epoch is the epoch of the
// leader's entry below start (FetchResponse.LogStartEpoch): the emptied
// log keeps it as its one epoch row, in the store too (Write.Epoch), so
// that it compares in elections as the log it stands for (R21); without
// it, it would compare as an empty log and grant a candidate that lacks
// committed entries below start, which could then be elected without them.
// The HW does not move at once: until the reset is durable the store still
// holds the old entries, and readers read the store below the HW. Once it
// is (Persisted), the HW rises to start: everything below the leader's log
// start was committed (R51), and a node that leads before any leader
// answered it must not name a log start above its own HW.
//
// rows are the leader's voter-set rows below start (its log start): the
// set in force there and the newest change before it. The reset records
// them, in its deletion, in place of its own (which may be of entries
// never committed): it holds none of their entries, and until it fetched
// the leader's copy of the set above start it would hold no set at all and
// take itself for a bootstrap voter (an election then needs every
// bootstrap voter): with the leader lost, no leader could be elected
// again. Rows that do not fit
// below start are not taken (the store would refuse the write); nil keeps
// the view's own (R55).
func (r *Replica) resetLog(start uint64, truncate bool, rows []protocol.VotersAt, epoch uint64) {
	if !rowsBelow(rows, start) || bugs.ResetNoSet {
		rows = nil
	}
	if epoch > r.epoch || bugs.ResetNoEpoch {
		epoch = 0 // never above an epoch this replica knows of (a malformed answer)
	}
	if truncate {
		r.emit(protocol.Write{Kind: protocol.WriteTruncate, Offset: start})
	}
	seq := r.emit(protocol.Write{Kind: protocol.WriteDeletePrefix, Offset: start, Voters: rows, Epoch: epoch})
	r.log.reset(start, rows, epoch)
	r.refreshVoters() // the sets of discarded entries are gone
	r.keysReset(start)
	r.leaderHW = min(r.leaderHW, r.hw)
	r.resetHW, r.resetSeq = start, seq
}

// rowsBelow reports whether rows are voter-set rows a reset to start can
// record: at most two (protocol.KeptVoterRows), each below start, in
// offset order, with valid sets. A leader sends no other (a fetch answer
// decodes only valid sets).
func rowsBelow(rows []protocol.VotersAt, start uint64) bool {
	if len(rows) > 2 {
		return false
	}
	for i, row := range rows {
		if row.Offset >= start || i > 0 && row.Offset <= rows[i-1].Offset || protocol.ValidateVoterSet(row.Voters, row.Owed) != nil {
			return false
		}
	}
	return true
}

// logStartEpoch is the epoch of this log's entry just below its log start,
// which an answer that may reset a follower carries (R53): the epoch of the
// first epoch row, which covers it (a deletion never leaves the log start
// at the first offset of an epoch, R52; a reset's row is the one it was
// given). 0 for a log that starts at 0 or has no row.
func (l *logView) logStartEpoch() uint64 {
	if l.logStart == 0 || len(l.epochs) == 0 || l.epochs[0].StartOffset > l.logStart {
		return 0
	}
	return l.epochs[0].Epoch
}

// logStartVoters are the rows a leader's answer that may reset its
// follower carries (R53, R55): its voter-set rows below its log start.
func (r *Replica) logStartVoters() []protocol.VotersAt {
	var rows []protocol.VotersAt
	for _, row := range r.log.voterSets {
		if row.Offset >= r.log.logStart {
			break
		}
		rows = append(rows, row)
	}
	return rows
}

// resetPersisted raises the HW to the log start of a reset once it is
// durable (resetLog). It moves no role: its caller then calls settleRole.
func (r *Replica) resetPersisted(seq uint64) {
	if r.resetSeq != 0 && seq >= r.resetSeq {
		r.hw = max(r.hw, r.resetHW)
		r.resetSeq = 0
	}
}

// DeletionReach is where a deletion below offset leaves the log start of a
// log with this epoch map and log start, whose HW and durable LEO are at
// least limit (R51, R52): below min(offset, limit), lowered while it is the
// first offset of an epoch (the row covering it then starts before it). At
// or below logStart it moves nothing. Log.DeleteBefore uses it to know
// how far a request takes this node's log start.
func DeletionReach(epochs []protocol.EpochStart, logStart, offset, limit uint64) uint64 {
	if limit == 0 {
		return logStart
	}
	p := min(offset, limit-1)
	for i := len(epochs) - 1; i >= 0 && p > logStart; i-- {
		switch start := epochs[i].StartOffset; {
		case start < p:
			return p
		case start == p:
			p--
		}
	}
	return max(p, logStart)
}

// voteEpoch is the last epoch this log compares in elections (R21): the
// epoch of its last entry or, when retention deleted every entry (LEO =
// log start), of the row covering its log start, which the deletion keeps
// (R52): a log emptied by retention is exactly as up to date as before.
// Comparing 0 instead granted votes to candidates that lacked the deleted
// committed entries. A reset log (R53) has no row left: 0. Fetches still
// send the last entry's epoch, 0 for an empty log (the leader serves an
// empty log from its offset).
func (l *logView) voteEpoch() uint64 {
	if l.LEO() == l.logStart && len(l.epochs) > 0 {
		return l.epochs[0].Epoch
	}
	return l.LastEntryEpoch()
}
