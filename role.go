package replog

import (
	"slices"

	"github.com/replog-io/replog/replica"
)

// Role is what a node does in its cluster, as Status and Watch report it.
// It is a string so that it prints, and encodes in JSON, as the words
// below.
type Role string

// The roles.
const (
	// RoleLeader: the leader of the current epoch; appends are decided
	// here.
	RoleLeader Role = "leader"
	// RoleFollower: a voter following a leader, or waiting to learn one
	// after a restart or a new epoch (LeaderID says which).
	RoleFollower Role = "follower"
	// RoleProspective: a voter that lost contact with its leader and asks
	// the others whether an election could succeed (a pre-vote); it knows
	// no leader.
	RoleProspective Role = "prospective"
	// RoleCandidate: a voter asking for votes in a new epoch; it knows no
	// leader.
	RoleCandidate Role = "candidate"
	// RoleObserver: a node that is not a voter: it keeps a copy and serves
	// reads, but never votes.
	RoleObserver Role = "observer"
	// RoleClosed: the Log was closed. Status keeps the last values of the
	// other fields (LeaderID is empty).
	RoleClosed Role = "closed"
)

// roleOf maps the core's role to the API's.
func roleOf(r replica.Role) Role {
	switch r {
	case replica.RoleLeader:
		return RoleLeader
	case replica.RoleFollower:
		return RoleFollower
	case replica.RoleProspective:
		return RoleProspective
	case replica.RoleCandidate:
		return RoleCandidate
	case replica.RoleObserver:
		return RoleObserver
	}
	return Role(r.String())
}

// believedLeader is the leader a node in state cs believes in. The core
// keeps the name of the leader a prospective voter lost (a refused
// pre-vote sends it back to following it), but a prospective or candidate
// no longer believes in any leader: the API reports none, so that a node
// whose leader was killed stops naming it at once.
func believedLeader(cs replica.Status) string {
	switch cs.Role {
	case replica.RoleProspective, replica.RoleCandidate:
		return ""
	}
	return cs.LeaderID
}

// publishClosed makes Status say the Log is closed, and ends watchers.
// The loop has ended: nothing publishes after it.
func (l *Log) publishClosed() {
	st := l.status // the loop has ended: this is the only writer
	st.Role, st.LeaderID, st.RemoteLEO = RoleClosed, "", nil
	// What only a leader knows goes too.
	st.Observers, st.Replacing = nil, nil
	st.Voters = slices.Clone(st.Voters)
	for i := range st.Voters {
		st.Voters[i].CaughtUp = false
	}
	l.statusMu.Lock()
	l.status = st
	l.statusMu.Unlock()
	l.watch.close()
}
