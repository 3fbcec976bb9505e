package replica

import (
	"fmt"

	"github.com/replog-io/replog/protocol"
)

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
	// Voters is the voter set in force (docs/protocol.md R55), in its
	// recorded order, each voter with its directory ID ("" while Bootstrap).
	Voters []protocol.Voter
	// VotersOffset is the offset of the EntryVoters entry that recorded
	// Voters (0 while Bootstrap).
	VotersOffset uint64
	// Bootstrap says the log holds no voter set yet: Voters is
	// Config.Voters, directories unknown (R57).
	Bootstrap bool
	// ClusterSeen says, with Bootstrap, that someone answered this
	// replica's bootstrap round that a cluster exists: it observes, and
	// bootstraps nothing, until it has fetched that cluster's voter set
	// (R60).
	ClusterSeen bool
	// DirID is this replica's own directory ID (Config.DirID).
	DirID string
	// CaughtUp is, on the leader, for each voter of Voters, whether it is
	// caught up: the leader itself always; another voter when its latest
	// fetch in this epoch came from the directory the set records, within
	// FetchTimeout, and asked for an offset at or above the leader's HW
	// (what adding a voter requires, R58). nil on other replicas.
	CaughtUp map[string]bool
	// Observers is, on the leader, each node that fetched from it within
	// FetchTimeout in this epoch but is not a voter at the directory it
	// fetched from, with that directory (a wiped voter's new incarnation
	// is one). nil on other replicas, and when there is none.
	Observers map[string]string
	// Replacing is, on the leader, each node the set in force owes its
	// place (R58: an automatic replacement removed its old incarnation),
	// with the directory its new incarnation fetches from ("" while none
	// does): the leader adds it back once it has caught up. nil on other
	// replicas, and when there is none.
	Replacing map[string]string
	// Violations counts invariant violations this replica detected (a
	// truncation below its HW, refused: the replica halts, see
	// Replica.Err). Always 0 in a correct protocol; the simulation asserts
	// on it.
	Violations uint64
	// FeatureLevel is the cluster feature level this replica knows to be
	// finalized (R68): the newest committed EntryFeature entry's level in
	// its log, protocol.BaseFeatureLevel with none. It never goes down
	// while the replica runs (after a restart, once the log is read again:
	// the keyed state's rebuild reads it).
	FeatureLevel int
	// SupportedLevels is the range of feature levels this replica can run
	// at: protocol.MinVersion to Config.SupportedFeatureLevel.
	SupportedLevels [2]int
	// Quota is the replication quota's counters (R73), Backlog the
	// uncommitted backlog's gauge and refusals (R74).
	Quota   QuotaStats
	Backlog BacklogStats
	// Quiescence counts quiescent fetches sent and parked (R99).
	Quiescence QuiescenceStats
	// Quiesced: this follower's quiescent fetch is out to its leader
	// (R99): its liveness of the leader comes from the node's contact.
	Quiesced bool
	// KeysApplied is the offset up to which the keyed-state table (R61-R66,
	// rebuilt at a restart from its checkpoint, R76) has read the log:
	// below the LEO while a rebuild catches up, a bounded share per round,
	// each round due at once (R96). It is how a caller that watches for
	// rounds that do nothing sees that such a round did its share.
	KeysApplied uint64
}

// Status returns a snapshot of the replica's state. Its Voters slice and
// RemoteLEO and CaughtUp maps may be shared with the Status of other
// calls whose contents were the same (the shell asks at every round, and
// they seldom change): a later change never shows through an earlier
// Status, since a changed one is new, and the caller must not modify
// them.
func (r *Replica) Status() Status {
	s := Status{
		ID:              r.id,
		Role:            r.role,
		Epoch:           r.epoch,
		LeaderID:        r.leaderID,
		VotedFor:        r.votedFor,
		LEO:             r.log.LEO(),
		DurableLEO:      r.log.durableEnd,
		HighWatermark:   r.hw,
		LogStart:        r.log.logStart,
		Violations:      r.violations,
		VotersOffset:    r.votersOffset,
		Bootstrap:       r.bootstrap,
		ClusterSeen:     r.bootstrap && r.clusterSeen,
		DirID:           r.dirID,
		FeatureLevel:    r.level,
		SupportedLevels: [2]int{protocol.MinVersion, r.cfg.SupportedFeatureLevel},
		Quota:           r.quotaStats,
		Quiescence:      r.quiesceStats,
		Quiesced:        r.quiesced(),
		Backlog:         r.BacklogStats(),
		KeysApplied:     r.keys.applied,
	}
	s.Voters = r.statusVoters()
	if ls := r.leader; ls != nil {
		s.RemoteLEO, s.CaughtUp = r.statusRemoteLEO(ls), r.statusCaughtUp(ls)
		for id, dir := range ls.fetchDir {
			if id != r.id && r.fetchingNow(id) && !r.isVoterDir(id, dir) {
				if s.Observers == nil {
					s.Observers = make(map[string]string)
				}
				s.Observers[id] = dir
			}
		}
		for _, o := range r.owed {
			if s.Replacing == nil {
				s.Replacing = make(map[string]string)
			}
			dir := ""
			if d := ls.fetchDir[o.ID]; d != o.DirID && r.fetchingNow(o.ID) {
				dir = d
			}
			s.Replacing[o.ID] = dir
		}
	}
	return s
}

// statusShared is the voter slice and leader maps of the last Status.
type statusShared struct {
	voters    []protocol.Voter
	remoteLEO map[string]uint64
	caughtUp  map[string]bool
}

// statusVoters is Status.Voters: the last one's if it lists the same.
func (r *Replica) statusVoters() []protocol.Voter {
	last := r.shared.voters
	same := last != nil && len(last) == len(r.voters)
	for i := 0; same && i < len(last); i++ {
		same = last[i] == protocol.Voter{ID: r.voters[i], DirID: r.voterDirs[r.voters[i]]}
	}
	if same {
		return last
	}
	vs := make([]protocol.Voter, len(r.voters))
	for i, id := range r.voters {
		vs[i] = protocol.Voter{ID: id, DirID: r.voterDirs[id]}
	}
	r.shared.voters = vs
	return vs
}

// statusRemoteLEO is Status.RemoteLEO on leader ls: the last one's if it
// holds the same.
func (r *Replica) statusRemoteLEO(ls *leaderState) map[string]uint64 {
	last := r.shared.remoteLEO
	same, n := last != nil, 0
	for _, v := range r.voters {
		if rs, ok := ls.remote[v]; ok && v != r.id {
			n++
			if got, had := last[v]; !had || got != rs {
				same = false
				break
			}
		}
	}
	if same && n == len(last) {
		return last
	}
	m := make(map[string]uint64, len(r.voters))
	for _, v := range r.voters {
		if rs, ok := ls.remote[v]; ok && v != r.id {
			m[v] = rs
		}
	}
	r.shared.remoteLEO = m
	return m
}

// statusCaughtUp is Status.CaughtUp on leader ls: the last one's if it
// holds the same.
func (r *Replica) statusCaughtUp(ls *leaderState) map[string]bool {
	last := r.shared.caughtUp
	same := last != nil && len(last) == len(r.voters)
	for _, v := range r.voters {
		if !same {
			break
		}
		got, had := last[v]
		same = had && got == r.caughtUp(ls, v)
	}
	if same {
		return last
	}
	m := make(map[string]bool, len(r.voters))
	for _, v := range r.voters {
		m[v] = r.caughtUp(ls, v)
	}
	r.shared.caughtUp = m
	return m
}

// caughtUp reports whether voter v is caught up, as Status.CaughtUp says.
func (r *Replica) caughtUp(ls *leaderState, v string) bool {
	return v == r.id || r.fetchingNow(v) && r.isVoterDir(v, ls.fetchDir[v]) && ls.fetchOffset[v] >= r.hw
}

// fetchingNow reports whether id fetched from this leader within
// FetchTimeout in its epoch (a fetch that passed the log check).
func (r *Replica) fetchingNow(id string) bool {
	t, ok := r.leader.anyFetch[id]
	return ok && r.now.Sub(r.contactedAt(id, t)) < r.cfg.FetchTimeout // a parked quiescent fetch stands (R99)
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
// ErrCommittedTruncation, ErrEpochExhausted or ErrFeatureLevel.
func (r *Replica) Err() error { return r.err }
