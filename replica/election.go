package replica

import (
	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/replica/internal/bugs"
)

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
	if r.quiesced() {
		// R99: the leader parks our quiescent fetch, and its node was
		// heard from within FetchTimeout (else PeerSilent would have
		// ended the quiescence).
		return true
	}
	return !r.lastLeaderContact.IsZero() && r.now.Sub(r.lastLeaderContact) < r.cfg.FetchTimeout
}

// leaderAlive reports whether this replica leads, or follows a leader it
// heard from within FetchTimeout.
func (r *Replica) leaderAlive() bool {
	return r.role == RoleLeader || r.role == RoleFollower && r.leaderID != "" && r.heardFromLeaderRecently()
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
	if bugs.VoteNoLogCheck {
		return true
	}
	own := r.log.voteEpoch()
	return lastEpoch > own || lastEpoch == own && leo >= r.log.LEO()
}

func (r *Replica) handleVoteRequest(from string, req *protocol.VoteRequest) {
	if req.CandidateID != from {
		r.logger.Debug("dropping a vote request naming another candidate", "from", from)
		return
	}
	// The candidate's set names us at our directory: it holds a set in
	// which we vote, perhaps one newer than ours.
	named := req.VoterDirID != "" && req.VoterDirID == r.dirID
	if !r.isVoter(from) && !named {
		// Not a voter of our set, and its set does not name us: never
		// granted. It is answered (a refusal naming our leader, as any
		// refusal does), because a node removed while it was cut off
		// still takes itself for a voter and would campaign for ever: the
		// answer sends it to the leader, whose log tells it it was
		// removed (R24, R58).
		r.logger.Debug("refusing a vote request from a non-voter", "from", from)
		r.send(from, r.voteResponse(req, false))
		return
	}
	// A replica votes if its set makes it a voter, or if the candidate's
	// set does, naming its directory: a voter just added may not have
	// fetched the entry that adds it, and the candidate may need its vote
	// (KIP-853; an add from one voter to two wedged without it). Likewise
	// it votes for a candidate its own set lacks whose set names it (Raft
	// §4.2.3: requests are judged without consulting the configuration; a
	// majority of the candidate's set, counted by the candidate, elects):
	// a voter that has not fetched the set adding the candidate may be the
	// vote that set needs (if the added voter holds the longest log, no
	// one else can be elected).
	if !r.voter && !named || !r.dirsMatch(from, req) {
		r.send(from, r.voteResponse(req, false))
		return
	}
	if req.PreVote {
		if req.Epoch > r.epoch {
			r.leaderNotLeading(from)
		}
		// Nothing changes here: no epoch adopted, nothing persisted.
		grant := req.Epoch > r.epoch && !r.heardFromLeaderRecently() && r.logUpToDate(req.LastEpoch, req.LEO)
		r.send(from, r.voteResponse(req, grant))
		return
	}
	if req.Epoch > r.epoch && r.leaderAlive() && from != r.leaderID {
		// Raft §6 / KIP-996: while this replica leads, or hears from its
		// leader, a vote request for a later epoch is disregarded, so that
		// no single message can depose a healthy leader. A legitimate
		// candidate is not hurt: it only exists after a majority granted it
		// pre-votes, and a voter grants a pre-vote only after FetchTimeout
		// without its leader, so that majority takes its vote request.
		// Our leader's own request is the exception: fenced by a later
		// epoch, it stands again (R20, fenceFetchRequest).
		r.logger.Debug("ignoring a vote request while the leader is alive", "from", from, "epoch", req.Epoch)
		if !r.isVoter(from) {
			// Outside our set (removed while cut off, most likely): the
			// refusal names the leader, whose log tells it (R58).
			r.send(from, r.voteResponse(req, false))
		}
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

// dirsMatch is R56's check of a vote request: the candidate must take
// this replica for the incarnation it is (the directory it records for us
// is ours; "" only while neither log holds a voter set, R57). A wiped voter
// therefore grants nothing as its old self, and its old self's place in a
// majority is never taken by it. The candidate's own directory is not
// checked against our set: a candidate whose set names us holds a set in
// which it votes at the directory it has (else it would observe, R55), and
// the candidate counts its majority in that set (R56); our set may be
// older (a voter without the entry that re-added the candidate at its new
// directory would refuse it as another incarnation, and with one more
// voter wiped the rest could never agree).
func (r *Replica) dirsMatch(from string, req *protocol.VoteRequest) bool {
	if bugs.IgnoreDirs {
		return true
	}
	if req.VoterDirID != r.dirID && (req.VoterDirID != "" || !r.bootstrap) {
		r.logger.Debug("refusing a vote request for another incarnation of us", "from", from, "their_record", req.VoterDirID, "dir", r.dirID)
		return false
	}
	return true
}

// voteResponse answers req, naming the round it answers.
func (r *Replica) voteResponse(req *protocol.VoteRequest, grant bool) *protocol.VoteResponse {
	return &protocol.VoteResponse{
		Epoch: r.epoch, VoterID: r.id, Granted: grant, LeaderID: r.leaderID,
		PreVote: req.PreVote, RequestEpoch: req.Epoch, Round: req.Round, VoterDirID: r.dirID,
		// Only a candidate whose set does not record us may be
		// bootstrapping (R60); others need not be told.
		Formed: req.VoterDirID == "" && r.formedFor(req.CandidateID, req.CandidateDirID),
	}
}

// countGrant counts a grant from voter from in this round, if it comes from
// the incarnation the set in force records (R56); in the bootstrap set its
// directory is kept for the binding (R57). It reports whether the round
// now has its quorum.
func (r *Replica) countGrant(from string, resp *protocol.VoteResponse) bool {
	if !r.bootstrap && r.voterDir(from) != resp.VoterDirID && !bugs.IgnoreDirs {
		r.logger.Debug("not counting a grant from another incarnation of a voter", "from", from, "dir", resp.VoterDirID)
		return false
	}
	r.votes[from] = true
	if r.bootstrap {
		r.grantDirs[from] = resp.VoterDirID
	}
	return r.roundWon()
}

// answersRound does what every vote response goes through: only an answer
// from the voter it names, to the round this replica is in (inRound, as
// the role's step function judges it), counts for anything, its epoch
// included: a late answer to an earlier round (the voter's situation may
// have changed since) is dropped whole (KRaft ignores answers of older
// epochs; naming the round is stricter). An answer naming a later epoch
// makes this replica follow it. It reports whether the answer is left for
// the round to count.
func (r *Replica) answersRound(from string, resp *protocol.VoteResponse, inRound bool) bool {
	if resp.VoterID != from || !r.isVoter(from) {
		return false
	}
	if !inRound {
		r.logger.Debug("dropping vote response not for the current round", "from", from, "resp", resp)
		return false
	}
	if resp.Epoch > r.epoch {
		r.becomeFollower(resp.Epoch, resp.LeaderID)
		r.leaderAnswered(from, resp)
		return false
	}
	return true
}

// dropVoteResponse drops a vote response reaching a replica with no round
// open (a leader, follower or observer).
func (r *Replica) dropVoteResponse(from string, resp *protocol.VoteResponse) {
	r.answersRound(from, resp, false)
}

// handlePreVoteResponse counts a prospective replica's pre-votes (KIP-996).
func (r *Replica) handlePreVoteResponse(from string, resp *protocol.VoteResponse) {
	inRound := resp.PreVote && resp.RequestEpoch == r.epoch+1 && resp.Round == r.round
	if r.bootstrapAnswer(from, resp, inRound) || !r.answersRound(from, resp, inRound) {
		return
	}
	if resp.Granted {
		if r.countGrant(from, resp) {
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
		// our epoch, asking it to stand again: fencing makes it step
		// down, and if its log is at least as up to date as ours it
		// stands at once in the epoch after ours, which its followers
		// and we grant (else the cluster elects a leader in an epoch we
		// can join after a timeout, and two overlapping pre-vote rounds
		// could depose leader after leader).
		r.becomeFollower(r.epoch, "")
		r.fetchHint = resp.LeaderID
		r.restand = true
	}
}

// handleVoteResponse counts a candidate's votes.
func (r *Replica) handleVoteResponse(from string, resp *protocol.VoteResponse) {
	inRound := !resp.PreVote && resp.RequestEpoch == r.epoch && resp.Round == r.round
	if r.bootstrapAnswer(from, resp, inRound) || !r.answersRound(from, resp, inRound) {
		return
	}
	if resp.Epoch == r.epoch && resp.Granted && r.countGrant(from, resp) {
		r.becomeLeader()
	}
}

// leaderAnswered counts a refusal from the leader itself, answering this
// round, as contact with it: it proves the leader alive now (else a voter
// that just learned its leader this way would grant the next pre-vote it
// sees, before its first fetch is answered).
func (r *Replica) leaderAnswered(from string, resp *protocol.VoteResponse) {
	if resp.LeaderID == from && r.leaderID == from && resp.Epoch == r.epoch {
		r.leaderContact()
	}
}

// handleBeginEpoch follows the new leader of an epoch. A leader sends
// BeginEpoch once per epoch and voter, so a second copy is a late duplicate:
// it proves nothing about the leader now and is dropped (counting it as
// contact would make this voter refuse pre-votes for a FetchTimeout after
// the leader died).
func (r *Replica) handleBeginEpoch(from string, b *protocol.BeginEpoch) {
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
