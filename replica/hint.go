package replica

import "time"

// HintKind is a membership hint's kind.
type HintKind uint8

// Hint kinds.
const (
	// HintNodeFailed: gossip says the node is dead or has left. If it is
	// the leader this replica follows, the replica may start an election
	// sooner (after a short random delay) rather than wait out
	// FetchTimeout. It never decides an election.
	HintNodeFailed HintKind = iota + 1
	// HintLeader: gossip says Node claims to lead Epoch. An observer or a
	// follower without a leader may start fetching from it; the claim is
	// verified by the fetch (fencing), never trusted.
	HintLeader
	// HintMember: gossip says Node is a member of the cluster (it joined,
	// or came back). A replica whose log holds no voter set asks it, before
	// bootstrapping, whether a cluster exists (R60; Config.Members).
	HintMember
)

// Hint is advisory information from membership.
type Hint struct {
	Kind  HintKind
	Node  string
	Epoch uint64
}

// Hint passes advisory membership information.
func (r *Replica) Hint(h Hint) {
	if r.err != nil {
		return
	}
	switch h.Kind {
	case HintMember:
		r.addMember(h.Node)
	case HintNodeFailed:
		if r.role == RoleFollower && h.Node != "" && h.Node == r.leaderID {
			// Gossip thinks our leader is dead: start our own pre-vote
			// soon. It decides nothing: what we grant still depends only
			// on our own contact with the leader, and a majority decides.
			d := r.now.Add(r.randDuration(r.cfg.ElectionTimeout / 2))
			if d.Before(r.electionDeadline) {
				r.electionDeadline = d
			}
		}
	case HintLeader:
		// A leaderless replica, or one that hears of a newer epoch than
		// its own, tries the named node next. The claim only says where to
		// fetch: the epoch and leader are adopted from that voter's own
		// answer (fencing), never from gossip. Only a voter can lead.
		if !r.mayLead(h.Node, h.Epoch) {
			r.logger.Debug("ignoring a leader hint naming a non-voter", "node", h.Node, "epoch", h.Epoch)
			return
		}
		if (r.role == RoleFollower || r.role == RoleObserver) && h.Node != r.id &&
			(r.leaderID == "" && h.Epoch >= r.epoch || h.Epoch > r.epoch && h.Node != r.leaderID) {
			r.fetchHint = h.Node
			r.fetchBackoff = time.Time{}
			// A false claim must cost nothing. A fetch to the leader we
			// follow is left to be answered; the hinted node gets the next
			// fetch. A leaderless replica redirects at once, but its
			// outstanding fetch may have gone to the real leader, so that
			// fetch's OK answer is still taken (TimeOut, not Cancel: the
			// fetcher's late-answer rule).
			if r.leaderID == "" && r.fetch.Outstanding() && r.fetch.Target() != h.Node {
				r.fetch.TimeOut()
			}
		}
	}
}
