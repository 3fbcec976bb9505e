package replica

import (
	"slices"

	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/replica/internal/bugs"
)

// A fresh store does not know whether it is the first of a new cluster or
// a node of an existing one that lost its disk: both open an empty log
// with the same Config.Voters. R57 lets the bootstrap voters elect the
// first leader only all together, but if every one of them is fresh (a
// single-voter list, or every listed voter wiped) they would start a
// second cluster beside the one that exists, and the existing one's
// acknowledged entries would be lost to them. So a replica whose log holds
// no voter set asks everyone it knows of, not only its bootstrap voters,
// and bootstraps only once all have answered that they know of no cluster
// (R60, Consul's bootstrap check; KIP-853 leaves it to the operator). The
// question is the bootstrap round itself: its (pre-)vote requests go to
// the members too, and every answer says whether its sender's cluster is
// formed (VoteResponse.Formed).

// addMember records a node membership reported.
func (r *Replica) addMember(id string) {
	if id == "" || id == r.id {
		return
	}
	if r.members == nil {
		r.members = make(map[string]bool)
	}
	r.members[id] = true
}

// askedMembers returns the members a bootstrap round asks besides the
// bootstrap voters, sorted (messages go out in a deterministic order).
func (r *Replica) askedMembers() []string {
	if bugs.FreshBootstrap {
		return nil
	}
	var ms []string
	for m := range r.members {
		if !slices.Contains(r.voters, m) {
			ms = append(ms, m)
		}
	}
	slices.Sort(ms)
	return ms
}

// formedFor reports whether this replica must tell a bootstrapping node,
// candidate at directory dir, that a cluster exists which it is not part
// of as it is now: this replica holds a voter set that does not record
// id at dir (id is new, or a wiped incarnation of a voter), or someone told
// it so (clusterSeen). A set that records id at dir needs no warning: id
// is a voter of it that lacks its entries, and R57's unanimity already
// keeps id from bootstrapping past voters that hold them (a first leader's
// set that no voter kept, held by an observer alone, would make every
// bootstrap voter observe for ever). Whether the set is committed is no
// criterion: a restarted node's HW may be 0 for a while, and a wiped sole
// bootstrap voter it answered "no cluster" would bootstrap a second one.
func (r *Replica) formedFor(id, dir string) bool {
	return r.clusterSeen || !r.bootstrap && r.voterDirs[id] != dir
}

// roundWon reports whether the round has what it needs: the votes of the
// election quorum and, while the log holds no voter set, an answer from
// every member outside the bootstrap voters that it knows of no cluster
// (R60).
func (r *Replica) roundWon() bool {
	if r.countVotes() < r.electionQuorum() {
		return false
	}
	if r.bootstrap && !bugs.FreshBootstrap {
		for m := range r.members {
			if !slices.Contains(r.voters, m) && !r.answered[m] {
				return false
			}
		}
	}
	return true
}

// bootstrapAnswer takes what a bootstrap round learns from an answer to it
// (inRound: it echoes the round this replica is in): a member that knows
// of a cluster ends bootstrapping for good (this replica observes and
// fetches from the cluster's leader until the voter set it fetches says
// what it is), and one outside the bootstrap voters that knows of none is
// counted as answered. It reports whether the answer is used up (the
// caller counts nothing more of it).
func (r *Replica) bootstrapAnswer(from string, resp *protocol.VoteResponse, inRound bool) bool {
	if !r.bootstrap || !inRound || resp.VoterID != from || bugs.FreshBootstrap {
		return false
	}
	if resp.Formed {
		r.logger.Warn("a cluster exists: not bootstrapping one; observing until its voter set is fetched (R60)",
			"told_by", from, "leader", resp.LeaderID, "epoch", resp.Epoch)
		r.clusterSeen = true
		r.refreshVoters() // no longer a voter of the bootstrap set (R60)
		r.settleRole()    // an observer now
		r.fetchHint = resp.LeaderID
		if r.fetchHint == "" || r.fetchHint == r.id {
			r.fetchHint = from
		}
		return true
	}
	if slices.Contains(r.voters, from) || !r.members[from] {
		return false
	}
	if r.answered == nil {
		r.answered = make(map[string]bool)
	}
	r.answered[from] = true
	if r.roundWon() {
		if resp.PreVote {
			r.becomeCandidate()
		} else {
			r.becomeLeader()
		}
	}
	return true
}

// resendBootstrapRequests asks again, every quarter of ElectionTimeout (a
// sixteenth for a new log's first candidate at first, R108), the
// bootstrap voters and members that have not answered the round: a round
// that needs every one of them (R57, R60) would otherwise fail whenever one
// message of it is lost, and with many voters and observers to ask it
// would fail round after round. Answers are idempotent: a
// voter grants the candidate it voted for again, and a pre-vote changes
// nothing.
func (r *Replica) resendBootstrapRequests() {
	if !r.bootstrap || r.now.Before(r.resendAt) {
		return
	}
	missing := func(id string) bool {
		if slices.Contains(r.voters, id) {
			return !r.votes[id]
		}
		return !r.answered[id]
	}
	r.sendVoteRequests(r.role == RoleProspective, missing)
}

// logWaiting says, when a bootstrap round ends without a result, which
// members it still waits for: a listed peer that never starts holds a
// brand-new cluster's first election back (R60), and the operator must be
// able to see why.
func (r *Replica) logWaiting() {
	if !r.bootstrap || r.votes == nil {
		return
	}
	var waiting []string
	for _, m := range r.askedMembers() {
		if !r.answered[m] {
			waiting = append(waiting, m)
		}
	}
	for _, v := range r.voters {
		if !r.votes[v] {
			waiting = append(waiting, v)
		}
	}
	if len(waiting) > 0 {
		r.logger.Warn("bootstrapping a new cluster: waiting for answers (every bootstrap voter's grant, and every known member's word that no cluster exists)", "waiting_for", waiting)
	}
}
