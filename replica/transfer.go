package replica

import (
	"fmt"
	"time"

	"github.com/replog-io/replog/protocol"
)

// Leadership transfer (docs/protocol.md R59; KRaft's EndQuorumEpoch with a
// preferred successor, Raft §3.10's TimeoutNow). The leader stops
// appending: new proposals are held, neither appended nor failed. Once the
// successor's fetch offset (from its recorded directory, R56) has reached
// the leader's LEO and everything the leader appended is committed, the
// leader refuses the held proposals as never appended (NotLeaderError
// naming the successor: the shell sends them again to the new leader),
// sends EndEpoch to every voter and steps down: it stays in its epoch,
// names no leader and forgets leader contact, so it grants the successor
// its vote. The successor, on EndEpoch from the leader of its epoch,
// becomes a candidate at once (no pre-vote: the leader vouched for it, and
// its log is the leader's); the other voters forget their contact with the
// leader, so that they grant votes at once rather than disregard them
// (R24). A transfer that does not complete within FetchTimeout is
// abandoned: the held proposals are taken as if they had just arrived.
// Every started transfer ends with one TransferResult in Ready.

// transferState is a leader's hand-over under way. It lives in
// leaderState: it ends with the leadership, whatever ends that.
type transferState struct {
	to string
	// fetched: the successor fetched (from its recorded directory, R56)
	// since the transfer began: it is alive now, not just caught up once.
	fetched  bool
	deadline time.Time
	held     []heldProposal
}

// heldProposal is a proposal a transferring leader set aside without
// appending it: a local one (records of type typ, or a voter change), or a
// forwarded request (from != "").
type heldProposal struct {
	id      uint64
	typ     protocol.EntryType
	records [][]byte
	change  *protocol.VoterChange

	from string
	req  *protocol.AppendRequest

	// key is a keyed proposal's (R61); requestID a forwarded one's, held
	// while the keyed-state table catches up (keys.go: from without req).
	key       protocol.Key
	requestID uint64
}

// TransferResult is the outcome of a leadership transfer that
// TransferLeadership started, reported once in Ready.Transfers.
type TransferResult struct {
	// To is the successor.
	To string
	// Epoch is the epoch this replica led.
	Epoch uint64
	// Err is nil when the leadership was handed over: EndEpoch went to
	// every voter and this replica stepped down (the successor is
	// expected to win the next epoch's election; nothing guarantees it).
	// Otherwise an error wrapping ErrTransferTimedOut (the successor did
	// not catch up in time: this replica leads on and takes the held
	// proposals), or a *NotLeaderError (leadership ended otherwise
	// first: a higher epoch, check-quorum, removal from the voters).
	Err error
}

// TransferLeadership starts handing this leader's leadership over to voter
// to, or, with to == "", to the voter with the longest log among those
// that fetched from this leader within FetchTimeout (R59). From now on the
// leader appends nothing new: Propose, ProposeBarrier, ProposeVoterChange
// and forwarded appends are held, and answered when the transfer ends (as
// never appended, NotLeaderError naming the successor, when it completes;
// as usual when it is abandoned). The outcome comes later as a
// TransferResult in Ready.
//
// Errors, at once, nothing started: r.Err() once halted; a *NotLeaderError
// when this replica does not lead; ErrNoSuccessor (wrapped) when to is not
// another voter of the set in force, or with to == "" when no other voter
// fetches from this leader; ErrTransferInProgress (wrapped) when a
// transfer to another node is under way. A call for the successor of the
// transfer under way (or with to == "") joins it: nil, and that transfer's
// one TransferResult answers both.
func (r *Replica) TransferLeadership(to string) error {
	if r.err != nil {
		return r.err
	}
	if r.role != RoleLeader {
		return &NotLeaderError{LeaderID: r.leaderID}
	}
	ls := r.leader
	if t := ls.transfer; t != nil {
		if to == "" || to == t.to {
			return nil
		}
		return fmt.Errorf("%w: to %s", ErrTransferInProgress, t.to)
	}
	switch {
	case to == "":
		if to = r.mostCaughtUpVoter(); to == "" {
			return fmt.Errorf("%w: no other voter fetches from this leader", ErrNoSuccessor)
		}
	case to == r.id || !r.isVoter(to):
		return fmt.Errorf("%w: %q is not another voter", ErrNoSuccessor, to)
	}
	ls.transfer = &transferState{to: to, deadline: r.now.Add(r.cfg.FetchTimeout)}
	r.logger.Info("transferring leadership", "to", to, "epoch", r.epoch, "leo", r.log.LEO(), "remote", ls.remote[to])
	if p := ls.parkedFrom(to); p != nil {
		// A caught-up successor's fetch waits here for news: answer it
		// now, so that its next fetch comes at once and tells us it is
		// alive, rather than after FetchMaxWait.
		req := p.req
		ls.unpark(to)
		r.respondFetch(to, req)
	}
	return nil
}

// Transfer reports the leadership transfer under way, if any: its
// successor and the epoch this replica leads (a TransferResult for it
// carries the same two).
func (r *Replica) Transfer() (to string, epoch uint64, ok bool) {
	if !r.transferring() {
		return "", 0, false
	}
	return r.leader.transfer.to, r.epoch, true
}

// mostCaughtUpVoter returns the other voter with the highest fetch offset
// from its recorded directory among those that fetched within
// FetchTimeout and whose connection has not closed since (R69), the first
// in voter order on a tie; "" if none.
func (r *Replica) mostCaughtUpVoter() string {
	ls := r.leader
	best, bestLEO := "", uint64(0)
	for _, v := range r.voters {
		leo, ok := ls.remote[v] // only fetches from the recorded directory
		if v == r.id || !ok || !r.heardFrom(v) {
			continue
		}
		if best == "" || leo > bestLEO {
			best, bestLEO = v, leo
		}
	}
	return best
}

// transferFetch notes a valid fetch from node from (voter: from its
// recorded directory) during a transfer.
func (r *Replica) transferFetch(from string, voter bool) {
	if t := r.leader.transfer; t != nil && from == t.to && voter {
		t.fetched = true
	}
}

// transferring reports whether this replica leads and hands over: it then
// appends nothing new.
func (r *Replica) transferring() bool {
	return r.leader != nil && r.leader.transfer != nil
}

// holdProposal sets a local proposal aside if a transfer is under way, and
// reports whether it did.
func (r *Replica) holdProposal(h heldProposal) bool {
	if !r.transferring() {
		return false
	}
	r.leader.transfer.held = append(r.leader.transfer.held, h)
	return true
}

// holdAppendRequest sets a forwarded append aside if a transfer is under
// way and the request is one this leader would append: of its epoch (any
// other is refused without an append, and must never be answered
// not-leader, see refuseForward) and not answered before (a copy of a
// request it handled is answered from the memo, never appended again). A
// copy of a held request is dropped: the held one is answered. It reports
// whether the request was taken care of.
func (r *Replica) holdAppendRequest(from string, req *protocol.AppendRequest) bool {
	if !r.transferring() || req.Epoch != r.epoch {
		return false
	}
	if _, ok := r.memo.get(doneKey{from, req.RequestID}); ok {
		return false
	}
	t := r.leader.transfer
	for _, h := range t.held {
		if h.from == from && h.req.RequestID == req.RequestID {
			return true
		}
	}
	t.held = append(t.held, heldProposal{from: from, req: req})
	return true
}

// progressTransfer ends the transfer under way, if it can: handed over
// once the successor, in a fetch since the transfer started, holds the
// whole log and all of it is committed (no append in flight is left with
// an unknown outcome), abandoned once its deadline has passed. Ready runs it on a leader, after the round's
// messages (the fetch that completes it) and check-quorum.
func (r *Replica) progressTransfer() {
	t := r.leader.transfer
	if t == nil {
		return
	}
	leo := r.log.LEO()
	off, ok := r.leader.remote[t.to]
	if t.fetched && ok && off >= leo && r.hw >= leo {
		r.handOver(t)
		return
	}
	if !r.now.Before(t.deadline) {
		r.leader.transfer = nil
		r.logger.Warn("leadership transfer timed out: leading on", "to", t.to, "epoch", r.epoch,
			"leo", leo, "remote", r.leader.remote[t.to], "hw", r.hw, "held", len(t.held))
		r.transfers = append(r.transfers, TransferResult{To: t.to, Epoch: r.epoch,
			Err: fmt.Errorf("%w: %s did not fetch the whole log within %v", ErrTransferTimedOut, t.to, r.cfg.FetchTimeout)})
		for _, h := range t.held {
			r.releaseHeld(h)
		}
	}
}

// handOver completes transfer t: the held proposals are refused (before
// EndEpoch, so that a forwarding voter has its answers first), every voter
// is told, and this replica steps down naming no leader, with no leader
// contact (it grants the successor's vote request at once).
func (r *Replica) handOver(t *transferState) {
	r.logger.Info("handing leadership over", "to", t.to, "epoch", r.epoch, "leo", r.log.LEO(), "held", len(t.held))
	r.leader.transfer = nil
	r.refuseHeld(t, t.to)
	for _, v := range r.voters {
		if v != r.id {
			r.send(v, &protocol.EndEpoch{Epoch: r.epoch, LeaderID: r.id, Successor: t.to})
		}
	}
	r.transfers = append(r.transfers, TransferResult{To: t.to, Epoch: r.epoch})
	r.handedOver = r.epoch
	r.becomeFollower(r.epoch, "")
	r.lastLeaderContact = time.Time{}
}

// endTransfer ends the transfer under way, if any, when the leadership
// ends otherwise (stepDown): the held proposals were never appended, and
// this replica will never append them (it does not lead its epoch again).
func (r *Replica) endTransfer(newLeader string) {
	t := r.leader.transfer
	if t == nil {
		return
	}
	r.leader.transfer = nil
	r.refuseHeld(t, newLeader)
	r.transfers = append(r.transfers, TransferResult{To: t.to, Epoch: r.epoch, Err: &NotLeaderError{LeaderID: newLeader}})
}

// refuseHeld answers every proposal t held as never appended, naming
// leader. A forwarded one is remembered as refused, so that a copy gets
// the same answer (R39: nothing of it is appended, ever: only this replica
// could append it, in the epoch it names, and it no longer leads that
// epoch).
func (r *Replica) refuseHeld(t *transferState, leader string) {
	for _, h := range t.held {
		if h.from == "" {
			r.acks = append(r.acks, Ack{ID: h.id, Err: &NotLeaderError{LeaderID: leader}})
			continue
		}
		r.memo.set(doneKey{h.from, h.req.RequestID}, forwardMemo{state: forwardRefused})
		r.send(h.from, &protocol.AppendResponse{RequestID: h.req.RequestID, Error: protocol.AppendNotLeader, LeaderID: leader})
	}
}

// refuseHandedOver answers a forwarded append naming the epoch this
// replica handed over, which it has no memory of, as never appended (and
// remembers that), whatever its role and epoch now. It was sent before its
// sender heard of the hand-over and arrived after it: this replica was
// the only leader of that epoch, led it in this life only (a restarted
// replica never leads its stored epoch again), appends nothing in it any
// more, and remembers every request it appended in it (the memo); the
// other path would answer it with an unknown outcome, and the append
// would fail instead of going to the new leader. It reports whether it
// answered.
func (r *Replica) refuseHandedOver(from string, req *protocol.AppendRequest) bool {
	if r.handedOver == 0 || req.Epoch != r.handedOver {
		return false
	}
	k := doneKey{from, req.RequestID}
	if _, ok := r.memo.get(k); ok {
		return false // answered from the memo, as every copy is
	}
	r.memo.set(k, forwardMemo{state: forwardRefused})
	r.send(from, &protocol.AppendResponse{RequestID: req.RequestID, Error: protocol.AppendNotLeader, LeaderID: r.leaderID})
	return true
}

// awaitAnswersFrom records that leader, the leader of our epoch, told us
// itself that it stopped leading it (EndEpoch; a not-leader answer to our
// fetch, or a fetch of its own in a later epoch, both of which travel on
// the fetch connection and may overtake EndEpoch): it is alive, and
// answers every request we forwarded to it.
// A leader that handed over answers them as never appended (the ones it
// held before, refuseHeld; those that crossed its EndEpoch, on arrival,
// refuseHandedOver) or from its memo: failing them at once with an unknown
// outcome, as a replica does with what it forwarded to a leader it stops
// following, would fail appends that the shell can send again.
func (r *Replica) awaitAnswersFrom(leader string) {
	r.answering, r.answeringEpoch = leader, r.epoch
}

// answeredAfterHandOver reports whether forwarded proposal f went to the
// leader awaitAnswersFrom recorded, in its epoch: it is kept for that
// leader's answer when this replica moves on (a new epoch's leader may be
// known before the answer arrives), and still expires (expireForwarded)
// if none comes.
func (r *Replica) answeredAfterHandOver(f forwardedProposal) bool {
	return r.answering != "" && f.to == r.answering && f.epoch == r.answeringEpoch
}

// releaseHeld takes a held proposal as if it had just arrived (the
// transfer was abandoned).
func (r *Replica) releaseHeld(h heldProposal) {
	switch {
	case h.from != "":
		r.leaderAppendRequest(h.from, h.req)
	case h.change != nil:
		r.leaderVoterChange(proposal{id: h.id, local: true}, *h.change)
	case !h.key.IsZero():
		r.leaderKeyed(proposal{id: h.id, local: true}, h.typ, h.records, h.key)
	default:
		r.leaderPropose(proposal{id: h.id, local: true}, h.typ, h.records)
	}
}

// handleEndEpoch takes a leader's hand-over (R59). Only EndEpoch from the
// leader of this replica's epoch, naming that epoch, to a voter, counts:
// anything else is dropped. The voter forgets its contact with the leader
// and stops following it (so it grants the successor's vote at once, R19
// and R24); it and the successor keep the proposals they forwarded there,
// for the leader's answer. The successor becomes a candidate at once. The others time out a little sooner than they would
// have, in case the successor does not win (a lost EndEpoch, a successor
// that died): never before an ElectionTimeout, so as not to compete with
// it.
func (r *Replica) handleEndEpoch(from string, b *protocol.EndEpoch) {
	if b.LeaderID != from || b.Epoch != r.epoch || r.epochLeader != from || !r.mayLead(from, b.Epoch) || !r.voter {
		r.logger.Debug("dropping EndEpoch", "from", from, "msg", b, "epoch", r.epoch, "epoch_leader", r.epochLeader)
		return
	}
	r.logger.Info("the leader handed its leadership over", "leader", from, "epoch", b.Epoch, "successor", b.Successor)
	r.lastLeaderContact = time.Time{}
	r.awaitAnswersFrom(from)
	if r.role == RoleFollower && r.leaderID == from {
		r.becomeFollower(r.epoch, "")
	}
	if b.Successor == r.id {
		r.becomeCandidate()
		return
	}
	if r.role == RoleFollower {
		if d := r.now.Add(r.cfg.ElectionTimeout + r.randDuration(r.cfg.ElectionTimeout)); d.Before(r.electionDeadline) {
			r.electionDeadline = d
		}
	}
}
