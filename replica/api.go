// Package replica holds replog's protocol core: one replica's state machine
// for Kafka's pull-based replication (the seed's LEO/HW rules with KIP-101 /
// KIP-279 leader epochs) and KRaft-style elections (KIP-595, KIP-996
// pre-vote).
//
// The core is deterministic: no goroutines, no sockets, no wall clock, no
// global randomness. It takes events through Tick, Step, Propose, Persisted
// and Hint, and says what to do through Ready. The shell around it (the root
// replog package, or the simulation) owns time, the network and the disk.
//
// The shell's loop is:
//
//	r.Tick(now)               // and/or Step, Propose, Persisted, Hint
//	rd := r.Ready()
//	queue rd.Writes to the storage writer, in order;
//	    after each is durable call r.Persisted(w.Seq)
//	send rd.Messages (they may be sent at once: the core holds back any
//	    message that depends on a write until that write is persisted)
//	deliver rd.Acks to the waiting callers
//
// The core reads its log through the storage.Store it was given (reads only)
// plus the tail it has asked to write but not yet seen persisted, which it
// keeps in memory. It never writes to the store itself.
//
// Contract details for the shell:
//
//   - Call Ready after every batch of events: parked fetches are woken, and a
//     follower's next fetch is built, inside Ready.
//   - Apply Writes strictly in Seq order, never skip one, and call Persisted
//     with the highest Seq that is durable (one call may cover many writes).
//     Consecutive WriteAppends may be merged into one store call. A write
//     that fails is fatal for this replica: stop it and open a new one from
//     the store (New), as after a crash. A Replica must never be reused
//     after its writes were lost.
//   - Messages in Ready may be sent at once, in order: the core holds back
//     what depends on an unpersisted write (a granted vote, vote requests
//     after the self-vote, anything after adopting an epoch, a follower's
//     fetch after its appended entries) and releases it in a later Ready.
//     The leader does send entries it has not persisted itself (it counts
//     itself for the HW with its durable LEO only).
//   - Tick regularly (every 10-50ms is plenty): the core's timers fire only
//     on Tick, and its clock is the last Tick's time.
//   - Entry Data in Writes and in outgoing messages is shared, read-only:
//     nobody may modify it.
//   - An Ack without error for a proposal made on a follower means the
//     leader's HW passed it; this replica's own HW may still lag one fetch
//     round.
//   - Status().Violations counts invariant violations detected (a
//     truncation below the HW, refused); it must stay 0.
//   - Check Err after each Ready: a replica that was asked to destroy
//     committed entries (ErrCommittedTruncation) or ran out of epochs
//     (ErrEpochExhausted) halts, and the shell must stop the node loudly.
//
// Messages are judged on their own, even from authenticated peers (defence
// in depth): only a voter of Config.Voters is ever followed as leader (a
// HintLeader only says where to fetch; the epoch comes from that voter's
// own answer); an answer counts only for the request it answers (a fetch
// answer by FetchID, a vote answer by its round), else it is dropped whole,
// epoch included; a vote request for a later epoch is disregarded while
// this replica leads or hears from its leader; epochs at or above MaxEpoch,
// or more than MaxEpochJump ahead, are dropped; votes and fetches of
// non-voters never count, and forwarded appends are taken only from voters
// and from observers that fetch from this leader, and only in the epoch
// they name; a truncation below the HW is refused and halts the replica.
//
// A Replica is not safe for concurrent use: one goroutine drives it.
package replica

import (
	"errors"
	"fmt"
	"math/rand"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/replog-io/replog/storage"
	"github.com/replog-io/replog/transport"
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

// Config configures a Replica. Zero durations and sizes take the defaults
// named on each field.
type Config struct {
	// ID is this node's ID. Required.
	ID string
	// Voters is the fixed list of voter IDs. If ID is not in it, the replica
	// is an observer. Required (non-empty).
	Voters []string
	// FetchTimeout: a voter that has had no successful fetch for this long
	// becomes prospective; a leader that has not had fetches from a majority
	// within it resigns (check-quorum). Default 2s.
	//
	// It must be at least 2*(FetchMaxWait+ElectionTimeout), so that one lost
	// fetch or answer never costs leader contact: a follower's next fetch
	// leaves when the previous answer arrives (contact at c) and may be
	// parked for FetchMaxWait; if it or its answer is lost, the follower
	// retries at c+FetchMaxWait+ElectionTimeout (its retry timeout: parking
	// plus a round trip, which ElectionTimeout covers), and the retry is
	// answered within another FetchMaxWait plus a round trip, so contact
	// resumes by c+2*(FetchMaxWait+ElectionTimeout). A shorter FetchTimeout
	// makes voters flap after a single lost message.
	FetchTimeout time.Duration
	// ElectionTimeout is the base of the randomised election timeouts: a
	// prospective or candidate replica retries after a random time in
	// [ElectionTimeout, 2*ElectionTimeout), and followers add a random part
	// of it to FetchTimeout. Default 500ms.
	ElectionTimeout time.Duration
	// FetchMaxWait is how long a leader parks a fetch that finds nothing
	// (Kafka's replica.fetch.wait.max.ms). Default 500ms.
	FetchMaxWait time.Duration
	// FetchMaxBytes bounds the entry bytes of one fetch response (the first
	// entry is always sent whole). Default 1 MiB.
	FetchMaxBytes int
	// MaxRecordSize bounds one record's size; larger proposals fail with
	// ErrTooLarge. Default 1 MiB.
	MaxRecordSize int
	// Rand drives every random choice (timeouts). Required for determinism;
	// if nil, a source seeded from ID is used.
	Rand *rand.Rand
	// Logger receives the core's logs. Default: a null logger.
	Logger hclog.Logger
}

// WriteKind says what a Write asks the shell to do.
type WriteKind uint8

// Write kinds.
const (
	// WriteAppend: store.Append(w.Entries).
	WriteAppend WriteKind = iota + 1
	// WriteTruncate: store.TruncateSuffix(w.Offset).
	WriteTruncate
	// WriteQuorumState: store.SetQuorumState(w.Quorum).
	WriteQuorumState
	// WriteHWCheckpoint: store.SetHWCheckpoint(w.Offset).
	WriteHWCheckpoint
)

// Write is one storage operation the shell must perform, in Seq order, then
// report with Persisted(Seq). Consecutive WriteAppends may be merged into
// one store call (group commit). Entries' Data is owned by the core until
// Persisted is called for this write: the shell must not modify it.
type Write struct {
	Seq     uint64
	Kind    WriteKind
	Entries []storage.Entry
	Offset  uint64
	Quorum  storage.QuorumState
}

// Ack reports the outcome of a Propose.
type Ack struct {
	// ID is the proposal's ID.
	ID uint64
	// FirstOffset is the offset of the proposal's first record when Err is
	// nil: the records are committed (below the HW) at FirstOffset,
	// FirstOffset+1, ...
	FirstOffset uint64
	// Err is nil, a *NotLeaderError, ErrUnknownOutcome, or ErrTooLarge.
	Err error
}

// Ready is what the core asks the shell to do. The slices are owned by the
// shell after Ready returns.
type Ready struct {
	Writes   []Write
	Messages []transport.Message
	Acks     []Ack
}

// IsEmpty reports whether rd asks for nothing.
func (rd Ready) IsEmpty() bool {
	return len(rd.Writes) == 0 && len(rd.Messages) == 0 && len(rd.Acks) == 0
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
)

// Hint is advisory information from membership.
type Hint struct {
	Kind  HintKind
	Node  string
	Epoch uint64
}

// Errors reported in Acks.
var (
	// ErrNotLeader is wrapped by *NotLeaderError.
	ErrNotLeader = errors.New("replog: not the leader")
	// ErrUnknownOutcome: the proposal may or may not have been committed
	// (leadership changed while it was in flight).
	ErrUnknownOutcome = errors.New("replog: append outcome unknown")
	// ErrTooLarge: a record exceeds MaxRecordSize.
	ErrTooLarge = errors.New("replog: record too large")
)

// NotLeaderError says the proposal reached no leader. LeaderID is the
// leader this replica knows ("" if none). Nothing was appended, and nothing
// will be: a forwarded proposal names the epoch of the leader it was sent
// to (transport.AppendRequest.Epoch) and is appended only by the leader of
// exactly that epoch; a node answers not-leader only for its own current
// epoch when it does not lead it and never did, and no node can come to
// lead an epoch later (an election always moves to a new one). So no copy
// of the request, however late, even one delivered after the receiver
// restarted, is ever appended. Copies within one life of the receiver are
// answered from its memory of the requests it handled.
type NotLeaderError struct {
	LeaderID string
}

func (e *NotLeaderError) Error() string {
	if e.LeaderID == "" {
		return "replog: not the leader (no leader known)"
	}
	return "replog: not the leader (leader is " + e.LeaderID + ")"
}

// Unwrap returns ErrNotLeader.
func (e *NotLeaderError) Unwrap() error { return ErrNotLeader }
