package replica

import (
	"fmt"
	"math/rand"
	"slices"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/replog-io/replog/fetcher"
	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/replica/internal/bugs"
)

// MaxEpoch bounds epochs: no replica ever reaches it (one that would, by
// starting an election, halts with ErrEpochExhausted), and every message
// carrying an epoch at or above it is dropped. With room for 2^62 elections
// it is never reached honestly; it keeps a forged epoch from wrapping the
// counter.
const MaxEpoch uint64 = 1 << 62

// MaxEpochJump bounds how far ahead of this replica's epoch a message's
// epoch may be: farther is absurd (each election adds one) and the message
// is dropped, so a single forged message cannot push the cluster's epoch
// toward MaxEpoch.
const MaxEpochJump uint64 = 1 << 32

// hwCheckpointInterval throttles HW checkpoint writes (core time).
const hwCheckpointInterval = time.Second

// Replica is one node's protocol state machine.
type Replica struct {
	cfg   Config
	id    string
	dirID string
	// The voter set in force (voters.go, R55): its node IDs, each one's
	// directory (nil in the bootstrap set), the offset of its entry, and
	// whether it is the bootstrap set of Config.Voters (none in the log).
	voters       []string
	voterDirs    map[string]string
	votersOffset uint64
	bootstrap    bool
	// owed: the incarnations the set in force owes a place (R58: each
	// removed by an automatic replacement, its node to be added back at
	// its new directory). Shared with the log view's row: never modified.
	owed []protocol.Voter
	// voter: (id, dirID) is a voter of the set in force.
	voter bool
	// vouched: nodes outside our set that a voter of it named as the
	// leader of an epoch (mayLead).
	vouched  map[string]uint64
	majority int
	// level is the cluster feature level known finalized (feature.go,
	// R68): it only rises while the replica runs.
	level  int
	logger hclog.Logger
	rand   *rand.Rand

	now time.Time

	// shared is what Status handed out last (status.go): its voter slice
	// and leader maps, handed out again while their contents stay the
	// same, never modified.
	shared statusShared

	role     Role
	epoch    uint64
	votedFor string
	leaderID string
	// epochLeader is the leader this replica has known for its epoch, even
	// after it stopped following it ("" if none yet): a later BeginEpoch
	// naming it is a late duplicate.
	epochLeader string
	// begun is the leader whose BeginEpoch this replica took in its epoch
	// (after a restart, the stored leader): another copy is a duplicate.
	begun string

	log logView
	hw  uint64

	// Writes. Seqs start at 1.
	lastSeq      uint64 // last Seq issued
	persistedSeq uint64
	// quorumSeq is the Seq of the last quorum-state write: every message
	// sent after it waits until it is persisted (a vote, an adopted epoch,
	// a self-vote are durable before anyone hears of them).
	quorumSeq uint64
	// stateSeq is the Seq of the last write other than an HW checkpoint: a
	// follower below FeatureLevelPipelinedFetch fetches only when it is
	// persisted (its fetch offset and epoch must be durable).
	stateSeq uint64
	// barrierSeq is the Seq of the last write other than an HW checkpoint
	// or an entry append: a follower that pipelines (R71) fetches only
	// when it is persisted (its epoch, vote, truncations and resets must
	// be durable; only entries may be in flight).
	barrierSeq uint64
	writes     []protocol.Write // not yet handed out by Ready
	held       []heldMessage
	acks       []Ack
	// transfers are the outcomes of leadership transfers (transfer.go,
	// R59) not yet handed out by Ready; handedOver is the last epoch this
	// replica handed over in this life (0: none).
	transfers  []TransferResult
	handedOver uint64
	// answering and answeringEpoch name the last leader that told this
	// replica it stopped leading its epoch (EndEpoch, or a not-leader
	// answer to our fetch): it answers what we forwarded to it (transfer.go).
	answering      string
	answeringEpoch uint64

	// Follower side.
	fetch        *fetcher.Fetcher
	fetchBackoff time.Time
	// sentDurable is the durable offset of the last fetch sent: a
	// pipelining follower whose durable end reaches its log end while that
	// fetch is outstanding sends a fresh one saying so (R71).
	sentDurable uint64
	fetchHint   string
	// restand: the next fetch to fetchHint asks it to stand again (R20's
	// fencing fetch to a live leader of an older epoch).
	restand bool
	// quiesceNext: the next fetch to the leader is quiescent (R99).
	quiesceNext       bool
	lastLeaderContact time.Time
	leaderHW          uint64
	// closedAt is when each peer's connection last closed (PeerDown, R69).
	closedAt map[string]time.Time
	// stoodFirst: this replica stood at once as its leader's successor
	// (R106) and has not heard from a leader since. It stands at once
	// once per loss of a leader, never again in a loop.
	stoodFirst bool
	// snap is the snapshot transfer in progress (R92-R95,
	// snapshotfetch.go); snapReads and snapChunks go out with the next
	// Ready.
	snap       snapshotFetch
	snapReads  []SnapshotRead
	snapChunks []SnapshotChunk
	// resetHW is the log start of a reset (resetLog) whose write, resetSeq,
	// is not yet durable (0: none); the HW rises to it once it is.
	resetHW, resetSeq uint64
	electionDeadline  time.Time
	forwarded         []forwardedProposal
	nextRequestID     uint64
	// catalogBarrier is the last barrier this follower sent for R82's
	// bound (catalog.go).
	catalogBarrier catalogBarrier
	// memo remembers what this replica answered to forwarded requests.
	memo forwardMemos
	// keys is the keyed-state table: producers, caller IDs, cursors (R62,
	// keys.go); keyCkpt its checkpoint for the next Ready (R76).
	keys    keyTable
	keyCkpt *protocol.KeyCheckpoint
	// restoredFrom is the offset of the key checkpoint New restored, if
	// restored (KeyCheckpointRestored).
	restoredFrom uint64
	restored     bool
	// catalog is the catalog of named logs as of catalogAt, a readable HW
	// (R80, R82; catalog.go); catalogVersion counts its changes, 0 while
	// it is not known.
	catalog        []LogRecord
	catalogAt      uint64
	catalogVersion uint64

	// Prospective / candidate: the round's ID (VoteRequest.Round) and the
	// voters that granted in it.
	round uint64
	votes map[string]bool
	// grantDirs is the directory each vote of the round came with: a
	// bootstrap leader records them (R57).
	grantDirs map[string]string
	// members are the other nodes membership reported (Config.Members,
	// HintMember); answered, those of them outside the bootstrap voters
	// that told this round that they know of no cluster (R60).
	members  map[string]bool
	answered map[string]bool
	// resendAt: when a bootstrap round asks again those that have not
	// answered it (resendBootstrapRequests); until eagerUntil (a new
	// log's first candidate, R108) it asks every ElectionTimeout/16, not
	// every quarter.
	resendAt, eagerUntil time.Time
	// clusterSeen: while the log holds no voter set, someone answered
	// that a cluster exists. This replica then bootstraps nothing: it
	// observes until it has fetched the cluster's voter set (R60).
	clusterSeen bool

	// Leader side; nil unless leader.
	leader *leaderState

	lastCheckpointAt time.Time
	lastCheckpointHW uint64
	checkpointed     bool

	violations uint64
	// quotaStats and backlogStats count the replication quota's waits
	// (R73) and the backlog's refusals (R74) over every leadership.
	quotaStats QuotaStats
	// quiesceStats counts quiescent fetches sent and parked (R99).
	quiesceStats QuiescenceStats
	backlogStats BacklogStats
	// err, once set, halts the replica (Err).
	err error
}

type heldMessage struct {
	dep uint64
	msg protocol.Message
}

// New restores a replica from its log (quorum state, epoch map, LEO, HW
// checkpoint, and the key checkpoint of a KeyCheckpointReader that
// describes the log, R76) at time now. The log is only read, never written: the core
// asks the shell to write through Ready (see LogReader). cfg is validated
// (Config.Validate) and defaulted (Config.EnsureDefaults) on New's copy.
//
// Errors: a *ConfigError or an error wrapping ErrInvalidConfig (nil log);
// an error wrapping ErrEpochExhausted if the stored epoch is at or above
// MaxEpoch; the log's own errors from QuorumState and HWCheckpoint.
//
// A single-voter replica becomes leader of a new epoch at once: its first
// Ready holds the durable self-vote, and nothing it does is acknowledged
// before that write is persisted (writes apply in order). If its log holds
// no voter set and Config.Members names other nodes, it first asks them
// whether a cluster exists (R60): it leads once all have answered no.
func New(cfg Config, log LogReader, now time.Time) (*Replica, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		return nil, fmt.Errorf("%w: nil log", ErrInvalidConfig)
	}
	cfg.EnsureDefaults() // cfg is New's copy
	cfg.Voters = slices.Clone(cfg.Voters)
	r := &Replica{
		cfg:    cfg,
		id:     cfg.ID,
		dirID:  cfg.DirID,
		logger: cfg.Logger.Named("replica").With("id", cfg.ID),
		rand:   cfg.Rand,
		now:    now,
		level:  protocol.BaseFeatureLevel,
	}
	qs, err := log.QuorumState()
	if err != nil {
		return nil, fmt.Errorf("replica: read quorum state: %w", err)
	}
	hw, ok, err := log.HWCheckpoint()
	if err != nil {
		return nil, fmt.Errorf("replica: read HW checkpoint: %w", err)
	}
	r.log = newLogView(log)
	r.keys = newKeyTable(r.log.logStart) // rebuilt from the log in Ready (R62), or from its checkpoint (R76) below
	for _, m := range cfg.Members {
		r.addMember(m)
	}
	r.refreshVoters()
	r.epoch, r.votedFor, r.leaderID = qs.Epoch, qs.VotedFor, qs.LeaderID
	r.epochLeader, r.begun = qs.LeaderID, qs.LeaderID
	if r.epoch >= MaxEpoch {
		return nil, fmt.Errorf("%w: the stored epoch %d is at or above MaxEpoch %d (written before epochs were bounded?)",
			ErrEpochExhausted, r.epoch, MaxEpoch)
	}
	if r.leaderID == r.id {
		// We led this epoch before the restart; our leader state is gone, so
		// we cannot lead it again. Wait for (or start) a new election.
		r.leaderID = ""
	}
	if r.leaderID != "" && !r.isVoter(r.leaderID) {
		// Only a voter leads (a store written before that was enforced, or
		// under other voters, may name another node).
		r.logger.Warn("not following the stored leader: not a voter", "leader", r.leaderID)
		r.leaderID, r.epochLeader, r.begun = "", "", ""
	}
	if !ok || hw > r.log.LEO() {
		hw = r.log.logStart
	}
	r.hw = max(hw, r.log.logStart)
	r.lastCheckpointHW, r.checkpointed = r.hw, ok
	r.lastCheckpointAt = now
	if r.leaderID != "" {
		r.lastLeaderContact = now
	}
	r.fetch = fetcher.New(r.id, uint32(min(cfg.FetchMaxBytes, 1<<31-1)), cfg.FetchMaxWait, r.rand.Uint64())
	r.nextRequestID = r.rand.Uint64()>>1 | 1
	// Rounds need not be secret, only distinct within this incarnation;
	// a restart forgets every vote it counted.
	r.round = r.nextRequestID
	r.restoreRole()
	r.dropTornBatch() // R61
	r.settleRole()    // the torn batch may have held a voter set
	if bugs.TruncateToHW && r.log.LEO() > r.hw {
		r.truncate(r.hw)
		r.settleRole()
	}
	// After the truncations above: the checkpoint is checked against the
	// log as the core holds it.
	r.restoreKeyCheckpoint(log)
	if r.voter && len(r.voters) == 1 {
		// A fresh store with members to ask asks them first (R60).
		r.becomeProspective()
	} else if r.bootstrap && r.leaderID == "" && r.role == RoleFollower {
		// No cluster this node knows of has elected a leader yet: there
		// is none to protect, so the first election need not wait out
		// FetchTimeout (R60's round still asks everyone first).
		r.electionDeadline = r.firstElection()
	}
	return r, nil
}

// Tick advances the replica's clock to now (never backwards) and fires
// what is due: fetch timeouts, election timeouts, parked fetches whose
// MaxWait passed, forwarded-proposal expiry, HW checkpoints. (A leader's
// check-quorum is decided in Ready, after the round's messages.)
func (r *Replica) Tick(now time.Time) {
	if r.err != nil {
		return
	}
	if now.After(r.now) {
		r.now = now
	}
	switch r.role {
	case RoleLeader:
		r.tickLeader()
		r.serveThrottled()
	case RoleFollower:
		r.tickFollower()
	case RoleObserver:
		r.tickObserver()
	case RoleProspective, RoleCandidate:
		if !r.now.Before(r.electionDeadline) {
			r.becomeProspective()
		} else {
			r.resendBootstrapRequests()
		}
	}
	r.expireForwarded()
	r.maybeCheckpoint()
}

// Propose asks to append records as one batch. The outcome comes later as
// an Ack with this id (immediately, in the next Ready, for errors known at
// once). On a follower the records are forwarded to the leader. The core
// owns records after the call: the caller must not modify them.
func (r *Replica) Propose(id uint64, records [][]byte) {
	r.propose(id, protocol.EntryData, records)
}

// ProposeBarrier asks to append a barrier: one control entry with no data
// (docs/protocol.md R50). It is decided as a one-record Propose is (the Ack
// carries the entry's offset once it is committed; a follower forwards it;
// the same errors), but readers never see the entry. Every append
// acknowledged anywhere before the call is at a lower offset than a
// barrier that commits, so a node whose readable HW has passed the
// barrier's offset holds all of them (a read barrier, as hashicorp/raft's
// Barrier and Raft's no-op entry).
func (r *Replica) ProposeBarrier(id uint64) {
	r.propose(id, protocol.EntryControl, [][]byte{nil})
}

// ProposeVoterChange asks to add a voter or remove one (docs/protocol.md
// R58): ch.Add adds ch.NodeID at the directory it fetches from, else it
// removes ch.NodeID. It is decided as Propose is (a follower forwards it to
// the leader; NotLeaderError, ErrUnknownOutcome); the Ack carries the
// offset of the new voter set once it is committed (the change is in force
// from there on), or, nothing changed, ErrVoterChangePending (another
// change is not committed yet: retry), ErrUnknownNode (a node to add that
// does not fetch from the leader now, or one to remove that is not a
// voter), ErrLastVoter, or ErrNotCaughtUp (retry). Adding a voter that
// already votes at the directory it fetches from succeeds at once.
func (r *Replica) ProposeVoterChange(id uint64, ch protocol.VoterChange) {
	if r.err != nil {
		r.acks = append(r.acks, Ack{ID: id, Err: r.err})
		return
	}
	switch {
	case r.role == RoleLeader:
		if r.holdProposal(heldProposal{id: id, change: &ch}) {
			return // a transfer is under way (R59)
		}
		r.leaderVoterChange(proposal{id: id, local: true}, ch)
	case r.leaderID != "":
		r.forward(id, protocol.EntryVoters, [][]byte{protocol.EncodeVoterChange(ch)})
	default:
		r.acks = append(r.acks, Ack{ID: id, Err: &NotLeaderError{}})
	}
}

// refuseAtOnce answers proposal id at once, and reports so, if the
// replica has halted or a record exceeds MaxRecordSize: the checks every
// proposal goes through, keyed or not.
func (r *Replica) refuseAtOnce(id uint64, records [][]byte) bool {
	if r.err != nil {
		r.acks = append(r.acks, Ack{ID: id, Err: r.err})
		return true
	}
	for _, rec := range records {
		if len(rec) > r.cfg.MaxRecordSize {
			r.acks = append(r.acks, Ack{ID: id, Err: fmt.Errorf("%w: %d bytes > %d", ErrTooLarge, len(rec), r.cfg.MaxRecordSize)})
			return true
		}
	}
	return false
}

// propose is Propose for records that become entries of type typ.
func (r *Replica) propose(id uint64, typ protocol.EntryType, records [][]byte) {
	if r.refuseAtOnce(id, records) {
		return
	}
	switch {
	case r.role == RoleLeader:
		if r.holdProposal(heldProposal{id: id, typ: typ, records: records}) {
			return // a transfer is under way (R59)
		}
		r.leaderPropose(proposal{id: id, local: true}, typ, records)
	case r.leaderID != "":
		r.forward(id, typ, records)
	default:
		r.acks = append(r.acks, Ack{ID: id, Err: &NotLeaderError{}})
	}
}

// Persisted reports that the write with this Seq (and every earlier one) is
// durable.
func (r *Replica) Persisted(seq uint64) {
	if r.err != nil {
		return
	}
	seq = min(seq, r.lastSeq)
	if seq <= r.persistedSeq {
		return
	}
	r.persistedSeq = seq
	r.resetPersisted(seq)
	r.settleRole() // the HW may have passed an outgoing replica's removal
	if !r.log.persisted(seq) {
		return
	}
	if r.role == RoleLeader {
		r.updateLeaderHW()
		r.resignIfRemoved()
		if bugs.AckLeaderWrite {
			r.ackUpTo(r.log.durableEnd)
		}
	} else {
		r.updateFollowerHW()
		r.settleRole() // as above
	}
}

// Ready returns and clears what the shell must do now.
func (r *Replica) Ready() Ready {
	if r.err != nil {
		// Halted: nothing more is written or sent; only the refusals of
		// proposals made since go out.
		rd := Ready{Acks: r.acks, Transfers: r.transfers}
		r.acks, r.writes, r.held, r.transfers, r.snapReads, r.snapChunks = nil, nil, nil, nil, nil, nil
		return rd
	}
	r.keysRound()
	if r.checkFeatureLevel(); r.err != nil {
		return r.Ready() // halted (R68)
	}
	if r.role == RoleLeader {
		r.checkQuorum()
	}
	if r.role == RoleLeader {
		r.progressTransfer() // R59: hand over, or give up and append again
	}
	if r.role == RoleLeader {
		r.raiseFeatureLevel() // R68
	}
	switch r.role {
	case RoleLeader:
		r.serveParked()
		r.serveThrottled()
	case RoleFollower, RoleObserver:
		r.snapshotRound()
		if !r.snapshotFetching() {
			r.maybeFetch()
		} else {
			r.snapshotContact()
		}
		r.maybeCatalogBarrier()
	default:
		r.snapshotRound()
	}
	if !bugs.KeyCheckpointLate {
		// keysRound checkpointed the table as it stood; what this round
		// appended since (the keyed proposals keysRound decided, R68's
		// level entry, a transfer's new entry) was applied as it was
		// appended, and the checkpoint it earns goes out now: else the
		// next round, with no input, would hand it out (R96).
		r.maybeKeyCheckpoint()
	}
	rd := Ready{Writes: r.writes, Acks: r.acks, Transfers: r.transfers, KeyCheckpoint: r.keyCkpt,
		SnapshotReads: r.snapReads, SnapshotChunks: r.snapChunks}
	r.writes, r.acks, r.transfers, r.keyCkpt, r.snapReads, r.snapChunks = nil, nil, nil, nil, nil, nil
	n := 0
	for n < len(r.held) && r.held[n].dep <= r.persistedSeq {
		n++
	}
	if n > 0 {
		rd.Messages = make([]protocol.Message, n)
		for i := range n {
			rd.Messages[i] = r.held[i].msg
		}
		r.held = append(r.held[:0], r.held[n:]...)
	}
	return rd
}

// halt stops the replica for good with err, logged once at Error.
func (r *Replica) halt(err error) {
	if r.err != nil {
		return
	}
	r.err = err
	r.logger.Error("replica halted", "error", err, "epoch", r.epoch, "leo", r.log.LEO(), "hw", r.hw)
}

// firstElection returns when a replica whose log holds no voter set and
// that knows no leader starts its first pre-vote round (R60, R108): at
// once for Config.FirstCandidate, a full ElectionTimeout later than the
// others' random part of it for the other voters (so that
// FirstCandidate's round is the first, with no split vote), after that
// random part without one. FirstCandidate also asks its silent
// recipients again sooner for an ElectionTimeout (eagerUntil): its
// replicas open at about the moment it does, and one not open yet drops
// the first requests.
func (r *Replica) firstElection() time.Time {
	first := r.cfg.FirstCandidate
	switch {
	case first == "" || !r.isVoter(first) || bugs.FirstCandidateWaits:
		return r.now.Add(r.randDuration(r.cfg.ElectionTimeout))
	case first == r.id:
		r.eagerUntil = r.now.Add(r.cfg.ElectionTimeout)
		return r.now
	}
	return r.now.Add(r.cfg.ElectionTimeout + r.randDuration(r.cfg.ElectionTimeout))
}

// randDuration returns a random duration in [0, d).
func (r *Replica) randDuration(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return time.Duration(r.rand.Int63n(int64(d)))
}

func (r *Replica) isVoter(id string) bool { return slices.Contains(r.voters, id) }

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
