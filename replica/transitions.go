package replica

import (
	"fmt"
	"slices"
	"time"

	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/replica/internal/bugs"
)

// This file is the one place that moves a replica between roles: r.role
// is assigned nowhere else. A transition changes the role and what goes
// with it (epoch, vote, leader, election timer, leader state, the fetch
// outstanding), and calls other transitions (an election won at once), the
// bookkeeping and the writes, never a handler. Writes never move a role
// (writes.go): a handler whose write may have changed the voter set in
// force calls settleRole once the write is recorded.

// resetElectionTimer arms a follower's election timer: FetchTimeout plus a
// random part of ElectionTimeout from now.
func (r *Replica) resetElectionTimer() {
	r.electionDeadline = r.now.Add(r.cfg.FetchTimeout + r.randDuration(r.cfg.ElectionTimeout))
}

// leaderContact records a valid message from the leader of our epoch.
func (r *Replica) leaderContact() {
	r.lastLeaderContact = r.now
	r.stoodFirst = false // the loss R106 stood for is over
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
	if leader != "" && !r.mayLead(leader, epoch) {
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
	if r.campaigns() {
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
	if bugs.TruncateToHW && (changed || !wasFollowing) && r.log.LEO() > r.hw {
		r.truncate(r.hw)
		r.settleRole()
	}
}

// restoreRole gives the replica New restored its first role: following if
// it may campaign, else observing, with its election timer armed.
func (r *Replica) restoreRole() {
	if r.campaigns() {
		r.role = RoleFollower
	} else {
		r.role = RoleObserver
	}
	r.resetElectionTimer()
}

// settleRole moves a replica between following (it may campaign) and
// observing (it may not) after its voter sets or its HW changed; a leader
// is left to R58 (resignIfRemoved).
func (r *Replica) settleRole() {
	switch c := r.campaigns(); {
	case c && r.role == RoleObserver:
		r.logger.Info("now a voter", "dir", r.dirID, "voters_offset", r.votersOffset, "outgoing", !r.voter)
		r.role = RoleFollower
		r.resetElectionTimer()
	case !c && (r.role == RoleFollower || r.role == RoleProspective || r.role == RoleCandidate):
		r.logger.Info("no longer a voter: observing", "dir", r.dirID, "voters_offset", r.votersOffset)
		r.role = RoleObserver
		r.votes = nil
	}
}

// becomeProspective starts a pre-vote round (KIP-996): nothing persisted,
// the epoch does not change.
func (r *Replica) becomeProspective() {
	if !r.campaigns() || !r.epochLeft() {
		return
	}
	if r.role == RoleLeader {
		r.stepDown("")
	}
	if r.role == RoleProspective || r.role == RoleCandidate {
		r.logWaiting() // the round that ends had no result
	}
	// The outstanding fetch stays: if our leader answers it after all, we
	// go back to following it (handleFetchResponse).
	r.role = RoleProspective
	r.newRound()
	r.electionDeadline = r.now.Add(r.cfg.ElectionTimeout + r.randDuration(r.cfg.ElectionTimeout))
	r.logger.Debug("prospective", "epoch", r.epoch)
	if r.roundWon() {
		r.becomeCandidate()
		return
	}
	r.requestVotes(true)
}

// requestVotes sends the round's vote requests (pre-votes with preVote),
// each naming the directory the set in force records for its voter (R56);
// a bootstrap round also asks every other member it knows of (R60).
func (r *Replica) requestVotes(preVote bool) {
	r.sendVoteRequests(preVote, nil)
}

// bootstrapResend is how long a bootstrap round waits before it asks its
// silent recipients again (R60): a quarter of ElectionTimeout, a
// sixteenth while a new log's first candidate is eager (R108).
func (r *Replica) bootstrapResend() time.Duration {
	if r.now.Before(r.eagerUntil) {
		return max(r.cfg.ElectionTimeout/16, time.Millisecond)
	}
	return r.cfg.ElectionTimeout / 4
}

// sendVoteRequests sends the round's requests to those of its recipients
// that only accepts (all if nil), and sets when a bootstrap round asks its
// silent ones again (resendBootstrapRequests).
func (r *Replica) sendVoteRequests(preVote bool, only func(string) bool) {
	epoch := r.epoch
	if preVote {
		epoch++
	}
	to := r.voters
	if r.bootstrap {
		to = append(slices.Clone(r.voters), r.askedMembers()...)
		r.resendAt = r.now.Add(r.bootstrapResend())
	}
	for _, v := range to {
		if v != r.id && (only == nil || only(v)) {
			r.send(v, &protocol.VoteRequest{
				Epoch: epoch, CandidateID: r.id, CandidateDirID: r.dirID, VoterDirID: r.voterDir(v),
				LastEpoch: r.log.voteEpoch(), LEO: r.log.LEO(), PreVote: preVote, Round: r.round,
			})
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
	r.logger.Info("candidate", "epoch", r.epoch, "bootstrap", r.bootstrap)
	if r.roundWon() {
		r.becomeLeader()
		return
	}
	r.requestVotes(false)
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
	// The epoch is in the map before anything is served (R25), so that an
	// answer's epochs are already those the epoch's entries will have.
	r.log.addEpoch(r.epoch, leo)
	r.leader = newLeaderState(r, leo)
	// Every committed entry is below leo (R82: so is every copy a deletion
	// of an earlier epoch needed).
	r.keys.completeFrom = min(r.keys.completeFrom, leo)
	r.logger.Info("leader", "epoch", r.epoch, "leo", leo, "hw", r.hw)
	for _, v := range r.voters {
		if v != r.id {
			r.send(v, &protocol.BeginEpoch{Epoch: r.epoch, LeaderID: r.id})
		}
	}
	bootstrapped := false
	if r.bootstrap {
		// The first leader records who elected it, each voter at its
		// directory (R57): from this entry on, a wiped voter is not its
		// old self, and entries commit. It is an entry of this epoch: it
		// also commits what earlier epochs left above the HW.
		if vs, ok := r.voterSetFromGrants(); ok {
			r.logger.Info("recording the first voter set", "voters", vs)
			r.appendVoterSet(vs, nil)
			bootstrapped = true
		} else {
			r.logger.Error("a grant carried no directory: no voter set can be recorded, nothing will commit", "grants", r.grantDirs)
		}
	}
	if !bootstrapped && leo > r.hw {
		// Entries of earlier epochs above the HW can only commit with an
		// entry of this epoch: append one now rather than wait for a user.
		r.appendControlEntry()
	}
	r.updateLeaderHW()
	r.resignIfRemoved()
}

// stepDown ends this replica's leadership: every pending proposal gets an
// unknown outcome (it may or may not commit under the next leader).
func (r *Replica) stepDown(newLeader string) {
	ls := r.leader
	if ls == nil {
		return
	}
	r.logger.Info("stepping down", "epoch", r.epoch, "pending", len(ls.pending))
	r.endTransfer(newLeader) // held proposals were never appended (R59)
	r.answerQuiescentParked(newLeader)
	for _, p := range ls.pending {
		r.failProposal(p, newLeader)
	}
	r.leader = nil
	r.log.dropEmptyTrailingEpochs()
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
	r.grantDirs = map[string]string{}
	r.answered = nil
}

// resignIfRemoved makes a leader that is no longer a voter step down once
// the set that removed it is committed (R58).
func (r *Replica) resignIfRemoved() {
	if r.role != RoleLeader || r.voter || r.hw <= r.votersOffset {
		return
	}
	r.logger.Info("removed from the voters and the change is committed: resigning", "epoch", r.epoch)
	r.becomeFollower(r.epoch, "")
	r.lastLeaderContact = time.Time{}
}
