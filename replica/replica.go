package replica

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand"
	"slices"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/replog-io/replog/fetcher"
	"github.com/replog-io/replog/storage"
	"github.com/replog-io/replog/transport"
)

// Defaults for zero Config fields.
const (
	DefaultFetchTimeout    = 2 * time.Second
	DefaultElectionTimeout = 500 * time.Millisecond
	DefaultFetchMaxWait    = 500 * time.Millisecond
	DefaultFetchMaxBytes   = 1 << 20
	DefaultMaxRecordSize   = 1 << 20
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

// MinFetchTimeout is the smallest FetchTimeout that goes with fetchMaxWait
// and electionTimeout: 2*(fetchMaxWait+electionTimeout), the longest a
// follower can go without leader contact when one fetch or its answer is
// lost (see Config.FetchTimeout).
func MinFetchTimeout(fetchMaxWait, electionTimeout time.Duration) time.Duration {
	return 2 * (fetchMaxWait + electionTimeout)
}

// hwCheckpointInterval throttles HW checkpoint writes (core time).
const hwCheckpointInterval = time.Second

// ErrInvalidConfig is returned by New for a bad Config.
var ErrInvalidConfig = errors.New("replog: invalid replica config")

// Errors that halt a replica (see Err).
var (
	// ErrCommittedTruncation: this replica was told to truncate its log
	// below its HW, which would destroy committed entries. It refuses and
	// halts instead: nothing committed is ever destroyed on anyone's word.
	// In a correct cluster this never happens; it means a peer is wrong,
	// lying or misconfigured (or this node's disk lost data).
	ErrCommittedTruncation = errors.New("replog: refused to truncate committed entries")
	// ErrEpochExhausted: starting an election would take the epoch to
	// MaxEpoch.
	ErrEpochExhausted = errors.New("replog: epochs exhausted")
)

// Replica is one node's protocol state machine.
type Replica struct {
	cfg      Config
	id       string
	voters   []string
	voter    bool
	majority int
	store    storage.Store
	logger   hclog.Logger
	rand     *rand.Rand

	now time.Time

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
	// follower fetches only when it is persisted (its fetch offset and epoch
	// must be durable).
	stateSeq uint64
	writes   []Write // not yet handed out by Ready
	held     []heldMessage
	acks     []Ack

	// Follower side.
	fetch             *fetcher.Fetcher
	fetchBackoff      time.Time
	fetchHint         string
	lastLeaderContact time.Time
	leaderHW          uint64
	electionDeadline  time.Time
	forwarded         []forwardedProposal
	nextRequestID     uint64
	// memo remembers what this replica answered to forwarded requests.
	memo forwardMemos

	// Prospective / candidate: the round's ID (VoteRequest.Round) and the
	// voters that granted in it.
	round uint64
	votes map[string]bool

	// Leader side; nil unless leader.
	leader *leaderState

	lastCheckpointAt time.Time
	lastCheckpointHW uint64
	checkpointed     bool

	violations uint64
	// err, once set, halts the replica (Err).
	err error
}

type heldMessage struct {
	dep uint64
	msg transport.Message
}

// forwardedProposal is a proposal a follower forwarded to the leader.
type forwardedProposal struct {
	requestID uint64
	id        uint64
	to        string // the leader it was sent to
	epoch     uint64 // the epoch it was sent in
	deadline  time.Time
}

// New restores a replica from store (quorum state, epoch map, LEO, HW
// checkpoint) at time now. The store is only read, never written.
//
// A single-voter replica becomes leader of a new epoch at once: its first
// Ready holds the durable self-vote, and nothing it does is acknowledged
// before that write is persisted (writes apply in order).
func New(cfg Config, store storage.Store, now time.Time) (*Replica, error) {
	if cfg.ID == "" || len(cfg.Voters) == 0 {
		return nil, fmt.Errorf("%w: ID and Voters are required", ErrInvalidConfig)
	}
	if store == nil {
		return nil, fmt.Errorf("%w: nil store", ErrInvalidConfig)
	}
	if cfg.FetchTimeout == 0 {
		cfg.FetchTimeout = DefaultFetchTimeout
	}
	if cfg.ElectionTimeout == 0 {
		cfg.ElectionTimeout = DefaultElectionTimeout
	}
	if cfg.FetchMaxWait == 0 {
		cfg.FetchMaxWait = DefaultFetchMaxWait
	}
	if cfg.FetchMaxBytes == 0 {
		cfg.FetchMaxBytes = DefaultFetchMaxBytes
	}
	if cfg.MaxRecordSize == 0 {
		cfg.MaxRecordSize = DefaultMaxRecordSize
	}
	if cfg.FetchMaxBytes < 0 || cfg.MaxRecordSize < 0 || cfg.ElectionTimeout < 0 || cfg.FetchMaxWait < 0 {
		return nil, fmt.Errorf("%w: negative size or timeout", ErrInvalidConfig)
	}
	if min := MinFetchTimeout(cfg.FetchMaxWait, cfg.ElectionTimeout); cfg.FetchTimeout < min {
		return nil, fmt.Errorf("%w: FetchTimeout %v must be at least 2*(FetchMaxWait %v + ElectionTimeout %v) = %v (one lost fetch must not cost leader contact)",
			ErrInvalidConfig, cfg.FetchTimeout, cfg.FetchMaxWait, cfg.ElectionTimeout, min)
	}
	if cfg.Rand == nil {
		h := fnv.New64a()
		h.Write([]byte(cfg.ID))
		cfg.Rand = rand.New(rand.NewSource(int64(h.Sum64())))
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	voters := slices.Clone(cfg.Voters)
	cfg.Voters = voters
	sorted := slices.Clone(voters)
	slices.Sort(sorted)
	if len(slices.Compact(sorted)) != len(voters) || slices.Contains(voters, "") {
		return nil, fmt.Errorf("%w: voters %v must be distinct, non-empty IDs", ErrInvalidConfig, voters)
	}
	r := &Replica{
		cfg:      cfg,
		id:       cfg.ID,
		voters:   voters,
		voter:    slices.Contains(voters, cfg.ID),
		majority: len(voters)/2 + 1,
		store:    store,
		logger:   cfg.Logger.Named("replica").With("id", cfg.ID),
		rand:     cfg.Rand,
		now:      now,
	}
	qs, err := store.QuorumState()
	if err != nil {
		return nil, fmt.Errorf("replica: read quorum state: %w", err)
	}
	hw, ok, err := store.HWCheckpoint()
	if err != nil {
		return nil, fmt.Errorf("replica: read HW checkpoint: %w", err)
	}
	r.log = newLogView(store)
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
	if r.voter {
		r.role = RoleFollower
	} else {
		r.role = RoleObserver
	}
	r.resetElectionTimer()
	if bugTruncateToHW && r.log.LEO() > r.hw {
		r.truncate(r.hw)
	}
	if r.voter && len(voters) == 1 {
		r.becomeCandidate()
	}
	return r, nil
}

// Tick advances the replica's clock to now (never backwards) and fires
// what is due: fetch timeouts, election timeouts, parked fetches whose
// MaxWait passed, check-quorum, forwarded-proposal expiry, HW checkpoints.
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
	case RoleFollower, RoleObserver:
		r.tickFollower()
	case RoleProspective, RoleCandidate:
		if !r.now.Before(r.electionDeadline) {
			r.becomeProspective()
		}
	}
	r.expireForwarded()
	r.maybeCheckpoint()
}

// Step handles one inbound message. Malformed or stale messages are
// dropped (and logged).
func (r *Replica) Step(m transport.Message) {
	if r.err != nil {
		return
	}
	if m.To != "" && m.To != r.id {
		r.logger.Debug("dropping message for another node", "msg", m)
		return
	}
	if m.From == "" || m.From == r.id {
		r.logger.Debug("dropping message without a valid sender", "msg", m)
		return
	}
	if !r.admissible(m) {
		return
	}
	switch b := m.Body.(type) {
	case *transport.FetchRequest:
		r.handleFetchRequest(m.From, b)
	case *transport.FetchResponse:
		r.handleFetchResponse(m.From, b)
	case *transport.VoteRequest:
		r.handleVoteRequest(m.From, b)
	case *transport.VoteResponse:
		r.handleVoteResponse(m.From, b)
	case *transport.BeginEpoch:
		r.handleBeginEpoch(m.From, b)
	case *transport.AppendRequest:
		r.handleAppendRequest(m.From, b)
	case *transport.AppendResponse:
		r.handleAppendResponse(m.From, b)
	default:
		r.logger.Warn("dropping message of unknown type", "msg", m)
	}
}

// admissible checks what every message must satisfy whoever sent it
// (defence in depth: authenticated peers may still be wrong or hostile).
// Only a voter of this replica's voter set can lead, so a message naming
// another node as leader, or a leader's message from a non-voter, is
// dropped whole.
func (r *Replica) admissible(m transport.Message) bool {
	var leader string
	var epoch uint64
	switch b := m.Body.(type) {
	case *transport.FetchRequest:
		epoch = b.CurrentEpoch
	case *transport.VoteRequest:
		epoch = b.Epoch
	case *transport.AppendRequest:
		epoch = b.Epoch
	case *transport.FetchResponse:
		epoch = b.Epoch
		// Fetches go to voters only: an answer from anyone else answers
		// nothing this replica asked.
		if !r.isVoter(m.From) {
			r.logger.Debug("dropping a fetch response from a non-voter", "from", m.From)
			return false
		}
		leader = b.LeaderID
	case *transport.VoteResponse:
		leader = b.LeaderID
		epoch = max(b.Epoch, b.RequestEpoch)
	case *transport.BeginEpoch:
		leader = b.LeaderID
		epoch = b.Epoch
		if !r.isVoter(m.From) {
			r.logger.Debug("dropping BeginEpoch from a non-voter", "from", m.From)
			return false
		}
	case *transport.AppendResponse:
		leader = b.LeaderID
	}
	if leader != "" && !r.isVoter(leader) {
		r.logger.Debug("dropping a message naming a non-voter as leader", "from", m.From, "leader", leader)
		return false
	}
	if epoch >= MaxEpoch || epoch > r.epoch && epoch-r.epoch > MaxEpochJump {
		r.logger.Debug("dropping a message with an absurd epoch", "from", m.From, "epoch", epoch, "own_epoch", r.epoch)
		return false
	}
	return true
}

// Propose asks to append records as one batch. The outcome comes later as
// an Ack with this id (immediately, in the next Ready, for errors known at
// once). On a follower the records are forwarded to the leader. The core
// owns records after the call: the caller must not modify them.
func (r *Replica) Propose(id uint64, records [][]byte) {
	if r.err != nil {
		r.acks = append(r.acks, Ack{ID: id, Err: r.err})
		return
	}
	for _, rec := range records {
		if len(rec) > r.cfg.MaxRecordSize {
			r.acks = append(r.acks, Ack{ID: id, Err: fmt.Errorf("%w: %d bytes > %d", ErrTooLarge, len(rec), r.cfg.MaxRecordSize)})
			return
		}
	}
	switch {
	case r.role == RoleLeader:
		r.leaderPropose(proposal{id: id, local: true}, records)
	case r.leaderID != "":
		r.forward(id, records)
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
	if !r.log.persisted(seq) {
		return
	}
	if r.role == RoleLeader {
		r.updateLeaderHW()
		if bugAckLeaderWrite {
			r.ackUpTo(r.log.durableEnd)
		}
	} else {
		r.updateFollowerHW()
	}
}

// Hint passes advisory membership information.
func (r *Replica) Hint(h Hint) {
	if r.err != nil {
		return
	}
	switch h.Kind {
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
		if !r.isVoter(h.Node) {
			r.logger.Debug("ignoring a leader hint naming a non-voter", "node", h.Node, "epoch", h.Epoch)
			return
		}
		if (r.role == RoleFollower || r.role == RoleObserver) && h.Node != r.id &&
			(r.leaderID == "" && h.Epoch >= r.epoch || h.Epoch > r.epoch && h.Node != r.leaderID) {
			r.fetchHint = h.Node
			r.fetchBackoff = time.Time{}
			// A fetch to the leader we follow is left to be answered (a
			// false claim must not cost leader contact): the hinted node
			// gets the next fetch.
			if r.leaderID == "" && r.fetch.Outstanding() && r.fetch.Target() != h.Node {
				r.fetch.Cancel()
			}
		}
	}
}

// Ready returns and clears what the shell must do now.
func (r *Replica) Ready() Ready {
	if r.err != nil {
		// Halted: nothing more is written or sent; only the refusals of
		// proposals made since go out.
		rd := Ready{Acks: r.acks}
		r.acks, r.writes, r.held = nil, nil, nil
		return rd
	}
	switch r.role {
	case RoleLeader:
		r.serveParked()
	case RoleFollower, RoleObserver:
		r.maybeFetch()
	}
	rd := Ready{Writes: r.writes, Acks: r.acks}
	r.writes, r.acks = nil, nil
	n := 0
	for n < len(r.held) && r.held[n].dep <= r.persistedSeq {
		n++
	}
	if n > 0 {
		rd.Messages = make([]transport.Message, n)
		for i := range n {
			rd.Messages[i] = r.held[i].msg
		}
		r.held = append(r.held[:0], r.held[n:]...)
	}
	return rd
}

// Err returns the error that halted this replica, or nil. A halted replica
// does nothing more: Tick, Step, Persisted and Hint are ignored, Ready hands
// out no writes or messages, and proposals fail with this error. The shell
// must stop the node loudly (as after a failed write). Errors wrap
// ErrCommittedTruncation or ErrEpochExhausted.
func (r *Replica) Err() error { return r.err }

// halt stops the replica for good with err, logged once at Error.
func (r *Replica) halt(err error) {
	if r.err != nil {
		return
	}
	r.err = err
	r.logger.Error("replica halted", "error", err, "epoch", r.epoch, "leo", r.log.LEO(), "hw", r.hw)
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

// send queues m to be handed out once every quorum-state write issued so
// far is persisted.
func (r *Replica) send(to string, body transport.Body) {
	r.held = append(r.held, heldMessage{dep: r.quorumSeq, msg: transport.Message{From: r.id, To: to, Body: body}})
}

// emit issues a write.
func (r *Replica) emit(w Write) uint64 {
	r.lastSeq++
	w.Seq = r.lastSeq
	r.writes = append(r.writes, w)
	if w.Kind != WriteHWCheckpoint {
		r.stateSeq = w.Seq
	}
	if w.Kind == WriteQuorumState {
		r.quorumSeq = w.Seq
	}
	return w.Seq
}

// appendEntries issues an append of entries (starting at the LEO), merged
// into the previous write if that is an append not yet handed out (group
// commit of one step's proposals).
func (r *Replica) appendEntries(entries []storage.Entry) {
	if n := len(r.writes); n > 0 && r.writes[n-1].Kind == WriteAppend {
		w := &r.writes[n-1]
		w.Entries = append(w.Entries, entries...)
		r.log.append(entries, w.Seq)
		return
	}
	seq := r.emit(Write{Kind: WriteAppend, Entries: slices.Clone(entries)})
	r.log.append(entries, seq)
}

// truncate issues a truncation of the log to to (< LEO). Truncating below
// the HW would remove committed entries: that is an invariant violation.
// It is refused, counted (Status.Violations) and halts the replica (Err
// wraps ErrCommittedTruncation): nothing committed is ever destroyed on
// anyone's word.
func (r *Replica) truncate(to uint64) {
	if to >= r.log.LEO() {
		return
	}
	if to < r.hw {
		r.violations++
		r.halt(fmt.Errorf("%w: asked to truncate to offset %d, below the high watermark %d (LEO %d, epoch %d, leader %q)",
			ErrCommittedTruncation, to, r.hw, r.log.LEO(), r.epoch, r.leaderID))
		return
	}
	r.emit(Write{Kind: WriteTruncate, Offset: to})
	r.log.truncate(to)
}

// writeQuorumState issues a write of the current quorum state.
func (r *Replica) writeQuorumState() {
	r.emit(Write{Kind: WriteQuorumState, Quorum: storage.QuorumState{
		Epoch: r.epoch, VotedFor: r.votedFor, LeaderID: r.leaderID,
	}})
}

// maybeCheckpoint writes the HW checkpoint at most once per interval, never
// above the durable LEO.
func (r *Replica) maybeCheckpoint() {
	if r.now.Sub(r.lastCheckpointAt) < hwCheckpointInterval {
		return
	}
	hw := min(r.hw, r.log.durableEnd)
	if r.checkpointed && hw == r.lastCheckpointHW {
		return
	}
	r.emit(Write{Kind: WriteHWCheckpoint, Offset: hw})
	r.lastCheckpointAt, r.lastCheckpointHW, r.checkpointed = r.now, hw, true
}

// randDuration returns a random duration in [0, d).
func (r *Replica) randDuration(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return time.Duration(r.rand.Int63n(int64(d)))
}

func (r *Replica) isVoter(id string) bool { return slices.Contains(r.voters, id) }
