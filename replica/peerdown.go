package replica

import (
	"hash/fnv"
	"slices"
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
// pre-votes, and stands for election sooner than after FetchTimeout: a
// crashed leader is replaced in about a round trip. One voter, the
// successor (R106), starts its pre-vote at once; every other voter starts
// its own a random time in [ElectionTimeout/2, ElectionTimeout) later, so
// that the successor's round runs alone and the vote is not split. The
// pre-vote keeps this harmless when the leader lives on (a connection
// reset by a flapping link): voters still hearing from it refuse, and
// nothing is persisted or adopted. An observer following id looks for the
// leader within ElectionTimeout/2. A leader counts id as not heard from,
// for the choice of a successor (R59), until id fetches again: Close must
// not wait for a voter that is gone.
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
		if r.standsFirst(id) {
			// R106: once per leader loss. If the round fails (a voter
			// still hears from the leader, or holds a longer log), the
			// round's own timeout, or the refusal's (R20), sets the next
			// one, as for any pre-vote.
			r.stoodFirst = true
			r.logger.Debug("the leader's successor: standing at once", "leader", id, "epoch", r.epoch)
			r.becomeProspective()
			return
		}
		half := r.cfg.ElectionTimeout / 2
		if d := r.now.Add(half + r.randDuration(r.cfg.ElectionTimeout-half)); d.Before(r.electionDeadline) {
			r.electionDeadline = d
		}
	case RoleObserver:
		if d := r.now.Add(r.randDuration(r.cfg.ElectionTimeout / 2)); d.Before(r.electionDeadline) {
			r.electionDeadline = d
		}
	}
}

// standsFirst reports whether this replica, a follower of leader whose
// connection just closed, is leader's successor (R106) and has not stood
// at once since it last heard from a leader (so once per loss of one: a
// reset link to a live leader, whose answers come back, does not use up
// the next loss's turn).
func (r *Replica) standsFirst(leader string) bool {
	if r.stoodFirst {
		return false
	}
	return bugs.SuccessorAllStand || Successor(r.cfg.Name, r.voters, leader) == r.id
}

// Successor returns the voter that stands first for log name's election
// when leader's connection closes (docs/protocol.md R106): of voters
// without leader, sorted by ID, the one at the FNV-1a hash of name modulo
// their count; "" if no other voter is left. Every node computes the same
// one from the same voter set, and logs of different names spread theirs
// over the nodes, so that a node's death leaves each survivor about as
// many elections to win as the others.
func Successor(name string, voters []string, leader string) string {
	others := make([]string, 0, len(voters))
	for _, v := range voters {
		if v != leader {
			others = append(others, v)
		}
	}
	if len(others) == 0 {
		return ""
	}
	slices.Sort(others)
	h := fnv.New32a()
	h.Write([]byte(name))
	return others[h.Sum32()%uint32(len(others))]
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
