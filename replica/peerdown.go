package replica

import (
	"time"

	"github.com/replog-io/replog/replica/internal/bugs"
)

// PeerDown tells the replica that an established connection to or from
// node id closed: the peer's end hung up or was reset (its process ended,
// or it closed its transport). A connection that merely goes quiet (a
// partition, a paused process) is not reported: only the fetch timeout
// notices those. Like a message, it is an input of the deterministic core;
// the shell feeds it from the transport (docs/protocol.md R69).
//
// A voter following id forgets its contact with it, so that it grants
// pre-votes, and starts its own pre-vote within ElectionTimeout/2 rather
// than after FetchTimeout: a crashed leader is replaced in about a round
// trip. The pre-vote keeps this harmless when the leader lives on (a
// connection reset by a flapping link): voters still hearing from it
// refuse, and nothing is persisted or adopted. An observer following id
// looks for the leader at the same time. A leader counts id as not heard
// from, for the choice of a successor (R59), until id fetches again: Close
// must not wait for a voter that is gone.
func (r *Replica) PeerDown(id string) {
	if r.err != nil || id == "" || id == r.id {
		return
	}
	if r.closedAt == nil {
		r.closedAt = make(map[string]time.Time)
	}
	r.closedAt[id] = r.now
	// Whatever was in flight on the connection may be lost, a quiescent
	// fetch or its answer among it (R100).
	r.resync(id)
	if id != r.leaderID {
		return
	}
	switch r.role {
	case RoleFollower, RoleProspective:
		r.logger.Debug("the leader's connection closed: starting a pre-vote", "leader", id, "epoch", r.epoch)
		r.lastLeaderContact = time.Time{}
		if r.role == RoleProspective {
			// Already asking: the round under way now counts on grants
			// from the voters that saw the connection close too.
			return
		}
		if bugs.PeerDownSkipsPreVote {
			r.becomeCandidate()
			return
		}
		if d := r.now.Add(r.randDuration(r.cfg.ElectionTimeout / 2)); d.Before(r.electionDeadline) {
			r.electionDeadline = d
		}
	case RoleObserver:
		if d := r.now.Add(r.randDuration(r.cfg.ElectionTimeout / 2)); d.Before(r.electionDeadline) {
			r.electionDeadline = d
		}
	}
}

// heardFrom reports whether the leader may count voter v as alive for a
// hand-over: it fetched within FetchTimeout, and no connection of it closed
// since that fetch.
func (r *Replica) heardFrom(v string) bool {
	last := r.heardAt(v)
	if r.now.Sub(last) >= r.cfg.FetchTimeout {
		return false
	}
	closed, ok := r.closedAt[v]
	return !ok || closed.Before(last)
}
