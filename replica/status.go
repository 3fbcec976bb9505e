package replica

import "fmt"

// Role is a replica's current role.
type Role uint8

// Roles.
const (
	// RoleFollower: a voter following a leader (or waiting to learn one).
	RoleFollower Role = iota + 1
	// RoleProspective: a voter asking for pre-votes (KIP-996); nothing
	// persisted yet.
	RoleProspective
	// RoleCandidate: a voter that has voted for itself in a new epoch.
	RoleCandidate
	// RoleLeader: the leader of the current epoch.
	RoleLeader
	// RoleObserver: a non-voter; it fetches and serves reads, never votes and
	// never counts for the HW.
	RoleObserver
)

// String names the role.
func (r Role) String() string {
	switch r {
	case RoleFollower:
		return "follower"
	case RoleProspective:
		return "prospective"
	case RoleCandidate:
		return "candidate"
	case RoleLeader:
		return "leader"
	case RoleObserver:
		return "observer"
	}
	return fmt.Sprintf("role(%d)", uint8(r))
}

// Status is a snapshot of a replica's protocol state.
type Status struct {
	ID       string
	Role     Role
	Epoch    uint64
	LeaderID string
	VotedFor string
	// LEO is the end of the log as the core sees it (written or being
	// written); DurableLEO is the end of what is persisted.
	LEO        uint64
	DurableLEO uint64
	// HighWatermark: entries below it are committed and may be read.
	HighWatermark uint64
	LogStart      uint64
	// RemoteLEO is the leader's record of each other voter's LEO (leader
	// only; nil otherwise). A voter not yet heard from in this epoch is
	// absent.
	RemoteLEO map[string]uint64
	// Violations counts invariant violations this replica detected (a
	// truncation below its HW, refused: the replica halts, see
	// Replica.Err). Always 0 in a correct protocol; the simulation asserts
	// on it.
	Violations uint64
}

// Status returns a snapshot of the replica's state.
func (r *Replica) Status() Status {
	s := Status{
		ID:            r.id,
		Role:          r.role,
		Epoch:         r.epoch,
		LeaderID:      r.leaderID,
		VotedFor:      r.votedFor,
		LEO:           r.log.LEO(),
		DurableLEO:    r.log.durableEnd,
		HighWatermark: r.hw,
		LogStart:      r.log.logStart,
		Violations:    r.violations,
	}
	if r.leader != nil {
		s.RemoteLEO = make(map[string]uint64)
		for _, v := range r.voters {
			if rs, ok := r.leader.remote[v]; ok && v != r.id {
				s.RemoteLEO[v] = rs
			}
		}
	}
	return s
}

// HighWatermark returns the current HW: offsets below it are committed.
//
// On a leader with three or more voters the HW may pass the leader's own
// durable LEO for a moment (followers that fetched from its in-memory tail
// make a majority before its own write is durable); local readers must use
// ReadableHW.
func (r *Replica) HighWatermark() uint64 { return r.hw }

// ReadableHW returns min(HW, durable LEO): offsets below it are committed
// and in this replica's store, so local readers may read them. It never
// moves back except after a restart.
func (r *Replica) ReadableHW() uint64 { return min(r.hw, r.log.durableEnd) }

// Err returns the error that halted this replica, or nil. A halted replica
// does nothing more: Tick, Step, Persisted and Hint are ignored, Ready hands
// out no writes or messages, and proposals fail with this error. The shell
// must stop the node loudly (as after a failed write). Errors wrap
// ErrCommittedTruncation or ErrEpochExhausted.
func (r *Replica) Err() error { return r.err }
