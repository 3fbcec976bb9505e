package replica

import (
	"fmt"
	"time"

	"github.com/replog-io/replog/transport"
)

// resetElectionTimer arms a follower's election timer: FetchTimeout plus a
// random part of ElectionTimeout from now.
func (r *Replica) resetElectionTimer() {
	r.electionDeadline = r.now.Add(r.cfg.FetchTimeout + r.randDuration(r.cfg.ElectionTimeout))
}

// heardFromLeaderRecently reports whether this replica is a leader or had
// contact with a leader within FetchTimeout: it then refuses pre-votes, so
// an isolated voter coming back cannot depose a healthy leader.
//
// A gossip report that the leader failed (HintNodeFailed) changes nothing
// here: gossip may make this node's own election start sooner, never make
// it grant a pre-vote while it still hears from the leader.
func (r *Replica) heardFromLeaderRecently() bool {
	if r.role == RoleLeader {
		return true
	}
	return !r.lastLeaderContact.IsZero() && r.now.Sub(r.lastLeaderContact) < r.cfg.FetchTimeout
}

// leaderAlive reports whether this replica leads, or follows a leader it
// heard from within FetchTimeout.
func (r *Replica) leaderAlive() bool {
	return r.role == RoleLeader || r.role == RoleFollower && r.leaderID != "" && r.heardFromLeaderRecently()
}

// leaderContact records a valid message from the leader of our epoch.
func (r *Replica) leaderContact() {
	r.lastLeaderContact = r.now
	r.resetElectionTimer()
}

// becomeFollower makes this replica a follower (observer if not a voter)
// of leader in epoch (epoch ≥ current). A higher epoch is adopted with no
// vote. The quorum state is written if it changed; messages sent after this
// wait for that write.
func (r *Replica) becomeFollower(epoch uint64, leader string) {
	if epoch < r.epoch {
		return
	}
	if leader == r.id {
		leader = ""
	}
	if leader != "" && !r.isVoter(leader) {
		// Only a voter leads (Step drops messages naming anyone else; this
		// keeps every other path honest too).
		r.logger.Warn("not following a non-voter", "leader", leader, "epoch", epoch)
		leader = ""
	}
	if r.role == RoleLeader {
		r.stepDown(leader)
	}
	changed, newEpoch := false, false
	if epoch > r.epoch {
		r.epoch = epoch
		r.votedFor = ""
		changed, newEpoch = true, true
	}
	if leader != r.leaderID {
		r.leaderID = leader
		r.leaderHW = 0
		changed = true
	}
	if newEpoch {
		r.epochLeader, r.begun = "", ""
	}
	if leader != "" {
		r.epochLeader = leader
	}
	wasFollowing := r.role == RoleFollower || r.role == RoleObserver
	wasProspective := r.role == RoleProspective
	if r.voter {
		r.role = RoleFollower
	} else {
		r.role = RoleObserver
	}
	r.votes = nil
	if changed {
		// Forwarded proposals went to the old leader: nobody will answer.
		r.abandonForwarded(leader)
		r.writeQuorumState()
		// A fetch outstanding to the leader just learned, in this epoch,
		// stays: its answer is this leader's (dropping it cost a follower
		// that found its leader by round-robin a whole election timeout).
		if newEpoch || leader == "" || r.fetch.Target() != leader {
			r.fetch.Cancel()
		}
		r.fetchBackoff = time.Time{}
		r.fetchHint = ""
	}
	// Learning a leader's name is no contact with it: only a new epoch or
	// a change of role restarts the election timer (else two followers
	// naming a dead leader to each other could postpone elections). A
	// prospective sent back to its leader by a refused pre-vote times out
	// FetchTimeout after its last contact with the leader (when the others
	// stop vouching for it too), but not before another ElectionTimeout.
	switch {
	case newEpoch || !wasFollowing && !wasProspective:
		r.resetElectionTimer()
	case wasProspective:
		d := r.now.Add(r.cfg.ElectionTimeout + r.randDuration(r.cfg.ElectionTimeout))
		if !r.lastLeaderContact.IsZero() {
			d = later(d, r.lastLeaderContact.Add(r.cfg.FetchTimeout+r.randDuration(r.cfg.ElectionTimeout)))
		}
		r.electionDeadline = d
	}
	if bugTruncateToHW && (changed || !wasFollowing) && r.log.LEO() > r.hw {
		r.truncate(r.hw)
	}
}

// becomeProspective starts a pre-vote round (KIP-996): nothing persisted,
// the epoch does not change.
func (r *Replica) becomeProspective() {
	if !r.voter || !r.epochLeft() {
		return
	}
	if r.role == RoleLeader {
		r.stepDown("")
	}
	// The outstanding fetch stays: if our leader answers it after all, we
	// go back to following it (handleFetchResponse).
	r.role = RoleProspective
	r.newRound()
	r.electionDeadline = r.now.Add(r.cfg.ElectionTimeout + r.randDuration(r.cfg.ElectionTimeout))
	r.logger.Debug("prospective", "epoch", r.epoch)
	if r.countVotes() >= r.majority {
		r.becomeCandidate()
		return
	}
	req := &transport.VoteRequest{
		Epoch: r.epoch + 1, CandidateID: r.id,
		LastEpoch: r.log.LastEntryEpoch(), LEO: r.log.LEO(), PreVote: true, Round: r.round,
	}
	for _, v := range r.voters {
		if v != r.id {
			r.send(v, req)
		}
	}
}

// becomeCandidate starts an election in epoch+1 with a durable self-vote;
// the vote requests wait for it.
func (r *Replica) becomeCandidate() {
	if !r.epochLeft() {
		return
	}
	if r.role == RoleLeader {
		r.stepDown("")
	}
	r.epoch++
	r.votedFor = r.id
	r.leaderID = ""
	r.epochLeader, r.begun = "", ""
	r.leaderHW = 0
	r.role = RoleCandidate
	r.abandonForwarded("")
	r.fetch.Cancel()
	r.writeQuorumState()
	r.newRound()
	r.electionDeadline = r.now.Add(r.cfg.ElectionTimeout + r.randDuration(r.cfg.ElectionTimeout))
	r.logger.Info("candidate", "epoch", r.epoch)
	if r.countVotes() >= r.majority {
		r.becomeLeader()
		return
	}
	req := &transport.VoteRequest{
		Epoch: r.epoch, CandidateID: r.id,
		LastEpoch: r.log.LastEntryEpoch(), LEO: r.log.LEO(), Round: r.round,
	}
	for _, v := range r.voters {
		if v != r.id {
			r.send(v, req)
		}
	}
}

// epochLeft reports whether an election may start (its epoch stays below
// MaxEpoch); if not, the replica halts loudly (ErrEpochExhausted).
func (r *Replica) epochLeft() bool {
	if r.epoch+1 < MaxEpoch {
		return true
	}
	r.halt(fmt.Errorf("%w: epoch %d, an election would reach MaxEpoch %d", ErrEpochExhausted, r.epoch, MaxEpoch))
	return false
}

// newRound starts a new pre-vote or vote round: only answers that echo its
// Round (and the request's epoch and kind) are counted, so a grant that
// arrives late from an earlier round can never elect anyone.
func (r *Replica) newRound() {
	r.round++
	if r.round == 0 {
		r.round = 1
	}
	r.votes = map[string]bool{r.id: true}
}

// inRound reports whether resp answers the round this prospective or
// candidate is in.
func (r *Replica) inRound(resp *transport.VoteResponse) bool {
	switch r.role {
	case RoleProspective:
		return resp.PreVote && resp.RequestEpoch == r.epoch+1 && resp.Round == r.round
	case RoleCandidate:
		return !resp.PreVote && resp.RequestEpoch == r.epoch && resp.Round == r.round
	}
	return false
}

func (r *Replica) countVotes() int {
	n := 0
	for _, v := range r.voters {
		if r.votes[v] {
			n++
		}
	}
	return n
}

// logUpToDate reports whether a candidate's (LastEpoch, LEO) is at least
// this replica's.
func (r *Replica) logUpToDate(lastEpoch, leo uint64) bool {
	if bugVoteNoLogCheck {
		return true
	}
	own := r.log.LastEntryEpoch()
	return lastEpoch > own || lastEpoch == own && leo >= r.log.LEO()
}

func (r *Replica) handleVoteRequest(from string, req *transport.VoteRequest) {
	if req.CandidateID != from || !r.isVoter(from) {
		r.logger.Debug("dropping vote request from a non-voter", "from", from)
		return
	}
	if !r.voter {
		r.send(from, r.voteResponse(req, false))
		return
	}
	if req.PreVote {
		// Nothing changes here: no epoch adopted, nothing persisted.
		grant := req.Epoch > r.epoch && !r.heardFromLeaderRecently() && r.logUpToDate(req.LastEpoch, req.LEO)
		r.send(from, r.voteResponse(req, grant))
		return
	}
	if req.Epoch > r.epoch && r.leaderAlive() {
		// Raft §6 / KIP-996: while this replica leads, or hears from its
		// leader, a vote request for a later epoch is disregarded, so that
		// no single message can depose a healthy leader. A legitimate
		// candidate is not hurt: it only exists after a majority granted it
		// pre-votes, and a voter grants a pre-vote only after FetchTimeout
		// without its leader, so that majority takes its vote request.
		r.logger.Debug("ignoring a vote request while the leader is alive", "from", from, "epoch", req.Epoch)
		return
	}
	if req.Epoch > r.epoch {
		r.becomeFollower(req.Epoch, "")
	}
	// A voter that knows the leader of this epoch has nothing to vote for
	// (KRaft); otherwise one vote per epoch, for an up-to-date log.
	grant := req.Epoch == r.epoch && (r.votedFor == "" || r.votedFor == from) &&
		(r.leaderID == "" || r.leaderID == from) && r.role != RoleLeader &&
		r.logUpToDate(req.LastEpoch, req.LEO)
	if grant && r.votedFor == "" {
		r.votedFor = from
		r.writeQuorumState() // the response waits for it
		r.resetElectionTimer()
	}
	r.send(from, r.voteResponse(req, grant))
}

// voteResponse answers req, naming the round it answers.
func (r *Replica) voteResponse(req *transport.VoteRequest, grant bool) *transport.VoteResponse {
	return &transport.VoteResponse{
		Epoch: r.epoch, VoterID: r.id, Granted: grant, LeaderID: r.leaderID,
		PreVote: req.PreVote, RequestEpoch: req.Epoch, Round: req.Round,
	}
}

func (r *Replica) handleVoteResponse(from string, resp *transport.VoteResponse) {
	if resp.VoterID != from || !r.isVoter(from) {
		return
	}
	// Only an answer to the round we are in counts for anything, its epoch
	// included: a late answer to an earlier round (the voter's situation
	// may have changed since) is dropped whole (KRaft ignores answers of
	// older epochs; naming the round is stricter).
	if !r.inRound(resp) {
		r.logger.Debug("dropping vote response not for the current round", "from", from, "resp", resp)
		return
	}
	if resp.Epoch > r.epoch {
		r.becomeFollower(resp.Epoch, resp.LeaderID)
		r.leaderAnswered(from, resp)
		return
	}
	switch {
	case r.role == RoleProspective:
		if resp.Granted {
			r.votes[from] = true
			if r.countVotes() >= r.majority {
				r.becomeCandidate()
			}
			return
		}
		switch {
		case resp.LeaderID == "" || resp.LeaderID == r.id:
		case resp.Epoch == r.epoch:
			// A voter refused and names a leader of our epoch: it has heard
			// from it (or has a better log). Go back to following it
			// instead of disrupting it.
			r.becomeFollower(r.epoch, resp.LeaderID)
			r.leaderAnswered(from, resp)
		default:
			// It names a live leader of an older epoch, while ours (durable,
			// from a failed candidacy) is higher: we can never follow it,
			// and our pre-votes will keep failing. Fetch from it once with
			// our epoch: fencing makes it step down, and the cluster elects
			// a leader in an epoch we can join.
			r.becomeFollower(r.epoch, "")
			r.fetchHint = resp.LeaderID
		}
	case r.role == RoleCandidate && resp.Epoch == r.epoch:
		if resp.Granted {
			r.votes[from] = true
			if r.countVotes() >= r.majority {
				r.becomeLeader()
			}
		}
	}
}

// leaderAnswered counts a refusal from the leader itself, answering this
// round, as contact with it: it proves the leader alive now (else a voter
// that just learned its leader this way would grant the next pre-vote it
// sees, before its first fetch is answered).
func (r *Replica) leaderAnswered(from string, resp *transport.VoteResponse) {
	if resp.LeaderID == from && r.leaderID == from && resp.Epoch == r.epoch {
		r.leaderContact()
	}
}

// handleBeginEpoch follows the new leader of an epoch. A leader sends
// BeginEpoch once per epoch and voter, so a second copy is a late duplicate:
// it proves nothing about the leader now and is dropped (counting it as
// contact would make this voter refuse pre-votes for a FetchTimeout after
// the leader died).
func (r *Replica) handleBeginEpoch(from string, b *transport.BeginEpoch) {
	if b.LeaderID != from || b.Epoch < r.epoch {
		return
	}
	if b.Epoch == r.epoch {
		if r.epochLeader != "" && r.epochLeader != from {
			r.logger.Error("BeginEpoch from a second leader of our epoch", "from", from, "epoch", b.Epoch, "leader", r.epochLeader)
			return
		}
		if r.begun == from {
			r.logger.Debug("dropping a duplicate BeginEpoch", "from", from, "epoch", b.Epoch)
			return
		}
	}
	r.becomeFollower(b.Epoch, from)
	r.begun = from
	r.leaderContact()
}

// becomeLeader makes a candidate with a majority the leader of its epoch.
func (r *Replica) becomeLeader() {
	r.role = RoleLeader
	r.leaderID = r.id
	r.epochLeader = r.id
	r.votes = nil
	r.fetch.Cancel()
	r.writeQuorumState()
	leo := r.log.LEO()
	// KAFKA-7415: the epoch is in the map before anything is served.
	r.log.addEpoch(r.epoch, leo)
	r.leader = newLeaderState(r, leo)
	r.logger.Info("leader", "epoch", r.epoch, "leo", leo, "hw", r.hw)
	for _, v := range r.voters {
		if v != r.id {
			r.send(v, &transport.BeginEpoch{Epoch: r.epoch, LeaderID: r.id})
		}
	}
	if leo > r.hw {
		// Entries of earlier epochs above the HW can only commit with an
		// entry of this epoch: append one now rather than wait for a user.
		r.appendControlEntry()
	}
	r.updateLeaderHW()
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
