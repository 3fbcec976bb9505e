package simulation

import (
	"fmt"
	"math"
	"math/rand"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"time"

	nodecontact "github.com/replog-io/replog/internal/contact"
	"github.com/replog-io/replog/internal/shell"
	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/replica"
	"github.com/replog-io/replog/storage"
)

// Options configures one simulated run.
type Options struct {
	// Seed names the run.
	Seed int64
	// Steps is the number of events run with the workload on (default
	// 2000). Faults are on for the first 70% of them; after the last step
	// the workload stops and the run continues, fault-free, until the
	// cluster has converged (or the convergence bound passes).
	Steps int
	// Trace, if set, receives one line per event and per action.
	Trace func(line string)
	// SafetyOnly turns off the checks of protocol rules (an ack only below
	// the acking leader's HW; a leader's HW moves only onto an entry of
	// its own epoch) and keeps only the checks of their consequences (no
	// committed or acknowledged entry is ever lost or changed, ...). It
	// shows whether a broken rule is caught by what it breaks.
	SafetyOnly bool
	// ForgeVotes is sabotage, to test the checker itself: the network
	// turns some refused votes into granted ones, so elections break
	// and the checker must notice.
	ForgeVotes bool
	// LyingDisk is sabotage too: writes are reported durable at once but
	// survive a crash only once synced a little later (a disk that lies
	// about fsync). Lost committed entries and double votes must follow.
	LyingDisk bool
	// Stable adds a last phase after convergence: gossip falsely reports
	// the healthy leader dead to every node, and the leader must stay
	// (docs/protocol.md §3.4: gossip never decides an election).
	Stable bool
	// ForgePreVotes is sabotage for the liveness rules: the network turns
	// some refused pre-votes (only those) into grants, so a prospective
	// becomes a candidate and deposes a leader a majority still reaches
	// (safety holds: real votes are honest); rule 2 must notice.
	ForgePreVotes bool
	// DropAnswers is sabotage for the liveness rules: the shell loses
	// some fetch answers after the network delivered them cleanly (what a
	// shell that drops a late fetch answer does). Followers then
	// lose contact with a healthy leader, and rule 3 must notice.
	DropAnswers bool
	// CoreContact counts leader contact, for liveness rules 2 and 3, the
	// narrower way: the fetch answer that tells a follower who leads is
	// not contact (a core that records none for it then drops that
	// leader's BeginEpoch as late). By default any
	// successful answer of a leader to the follower's latest fetch is
	// contact: it proves the leader alive now.
	CoreContact bool
	// Classic runs only the basic faults (crashes, restarts, pauses,
	// partitions, message drops, duplicates, delays and reordering, clock
	// drift, true and stale hints): no lulls, clock jumps or stalls, disk
	// errors, torn writes, NoSync nodes, cross-incarnation deliveries,
	// false leader hints, clusters of 6 or 7 voters, retention, or voter
	// changes and voter wipes. Those others draw from random streams of
	// their own, so a classic run draws from the main stream what the same
	// seed's full run draws. The liveness rules still run. Sabotage runs
	// (ForgeVotes, LyingDisk) are always classic.
	Classic bool
	// NoLiveness turns off the liveness rules checked while faults run
	// (liveness.go).
	NoLiveness bool
	// NoVoterChanges turns off voter changes and voter wipes (voters.go);
	// disks still have directory IDs.
	NoVoterChanges bool
	// ExactlyOnce runs the exactly-once workload (exactlyonce.go): keyed
	// appends, retried with their key after unknown outcomes, caller IDs
	// within and past the deduplication window.
	ExactlyOnce bool
	// NoVersionMix turns off the version mix (versions.go): nodes of two
	// releases, upgrades and rollbacks, in a third of the runs that are
	// not classic.
	NoVersionMix bool
	// NoConnClose turns off closed connections (peerdown.go): a crash
	// closes no links and the nemesis resets none, so no node hears
	// PeerDown (R69), as before the rule existed.
	NoConnClose bool
	// NoCatalog turns off the catalog workload (catalog.go): log changes
	// in half the runs that are not classic, whose rounds draw from the
	// main stream.
	NoCatalog bool
	// NoCompaction turns off entry keys, compaction and the KV
	// (compaction.go, kvsim.go): in half the runs that are not classic.
	NoCompaction bool
	// NoQuiescence gives the processes no contact clock (quiescence.go):
	// no heartbeats, and no core quiesces (replica.Config.Contact nil),
	// so a run's messages are those of the release before R98-R100.
	NoQuiescence bool
	// TightLoad makes the load bounds bite (R73, R74): every node's
	// replication quota is TightCatchUpBytesPerSecond and its backlog
	// bound TightMaxUncommittedBytes, so that catch-ups wait for tokens
	// and proposals are refused for a full backlog (nothing appended,
	// checked as ErrNotLeader is). Off by default: the traces stay.
	TightLoad bool
	// Bugs turns on the faults that find known core bugs not fixed yet
	// (KnownBugs' fields). Each is off by default, so that the default run
	// passes; the sim then steers around the bug the way the field's doc
	// says.
	Bugs KnownBugs
}

// KnownBugs names the core bugs the simulation found and steers around by
// default until they are fixed. A field set to true stops steering around
// its bug: runs then fail where it bites. None is open now; the type stays
// so that the next one has a place (doc.go: "Known core bugs").
type KnownBugs struct{}

// Result describes a finished run.
type Result struct {
	Seed int64
	// Err is the first invariant violation (nil if none).
	Err error
	// Steps is the number of events processed, SimTime the simulated time
	// the run covered.
	Steps   int
	SimTime time.Duration
	// Hash is a hash of the whole trace: every event, message, write, ack
	// and its time.
	Hash uint64
	// Cluster shape and counters, for logs.
	Voters, Observers                 int
	Proposals, Acked, Reads           int
	Crashes, Partitions, LeaderEpochs int
	CommittedLen                      int
	// Faults counts the faults injected, by kind (stats.go).
	Faults FaultCounts
	// Recoveries counts the quiet periods in which every voter came to
	// follow one leader (liveness rule 1); MaxRecovery is the longest
	// time that took after the last fault, MaxRecoveryRatio the largest
	// fraction of the run's bound it used. Depositions counts leaders that
	// stepped down (each checked by rule 2).
	Recoveries       int
	MaxRecovery      time.Duration
	MaxRecoveryRatio float64
	Depositions      int
	// Tainted: the run stopped early because a NoSync node's power loss
	// lost a granted vote or a committed entry's last majority (disk.go).
	Tainted bool
	// ReadsAboveDisk counts reads that found the node's HW above its
	// durable LEO (a leader whose followers are faster than its disk).
	ReadsAboveDisk int
	// ConvergeTime is the simulated time from the end of the workload to
	// convergence.
	ConvergeTime time.Duration
	// Barriers counts the read barriers that completed (barrier.go).
	Barriers int
	// Retries counts the exactly-once workload's retries (exactlyonce.go).
	Retries int
	// LogChanges counts the committed log changes that changed the
	// catalog (catalog.go).
	LogChanges int
	// The version mix (versions.go): upgrades and rollbacks asked for,
	// rollbacks refused (the level was raised), raises of the level, and
	// nodes that halted at a level they could not run at (rolled forward).
	Upgrades, Rollbacks, RollbacksRefused, LevelRaises, LevelHalts int
	// EarlyTicks counts the rounds without inputs run before a node's
	// deadline, each checked to do nothing (R96, deadline.go).
	EarlyTicks int
	// Quiescence (quiescence.go): heartbeats sent, resyncs the
	// heartbeats' counts asked for, quiescent fetches the cores sent,
	// and heartbeats that asked a resync again (the one before asked
	// too, R109).
	Heartbeats, Resyncs, QuiescentFetches, ResyncAsksRepeated int
}

// String summarises a result on one line.
func (r Result) String() string {
	return fmt.Sprintf("seed=%d voters=%d observers=%d steps=%d simtime=%v proposals=%d acked=%d reads=%d crashes=%d partitions=%d epochs=%d committed=%d hash=%016x",
		r.Seed, r.Voters, r.Observers, r.Steps, r.SimTime, r.Proposals, r.Acked, r.Reads,
		r.Crashes, r.Partitions, r.LeaderEpochs, r.CommittedLen, r.Hash)
}

// params are the per-seed knobs of a run.
type params struct {
	voters, observers int

	fetchTimeout, electionTimeout, fetchMaxWait time.Duration
	fetchMaxBytes                               int

	tickMax time.Duration

	netMin, netMax    time.Duration
	slowProb          float64
	slowMax           time.Duration
	dropProb, dupProb float64

	diskMax         time.Duration
	reportDelayProb float64

	proposeEvery, readEvery time.Duration
	maxRecords              int
	maxInflight             int

	crashEvery, partitionEvery time.Duration
	downMax, healMax           time.Duration
	crashLeaderProb            float64       // a crash timer picks the leader
	crashNewLeaderProb         float64       // a new leader is crashed soon after its election
	crashFollowerOnElectProb   float64       // a follower is crashed soon after an election
	crashAfterAppendProb       float64       // the leader is crashed right after an append
	crashAfterCommitProb       float64       // the leader is crashed right after its HW moves
	isolateNewLeaderProb       float64       // a new leader is cut off soon after its election
	pauseProb                  float64       // a crash timer pauses its victim instead
	batchWindow                time.Duration // 0: a round after the inputs due at one instant; else within this window
	massCrashProb              float64       // a crash timer takes down several nodes at once
	gossipEvery                time.Duration

	// The extended faults (zero in classic runs; drawn from their own
	// random stream, so that the main stream's draws do not depend on
	// them).
	extended bool
	// lulls: faults come in storms separated by lulls of about liveBound,
	// in which liveness rule 1 is checked.
	lulls bool
	// xincProb: a message is queued in a reconnecting lane and may reach
	// a later incarnation of its receiver (doubled for duplicates).
	xincProb float64
	// clockEvery: a clock timer jumps one node's clock forward or stalls
	// it (0: never).
	clockEvery time.Duration
	// diskErrProb: a disk completion fails (the write returns an error;
	// the node stops and restarts from its store). tornProb: a crash
	// leaves part of the pending writes on disk, the last append torn.
	diskErrProb, tornProb float64
	// noSync: the nodes that run without fsync; noSyncFlush: how often
	// their OS writes the page cache back.
	noSync      []bool
	noSyncFlush time.Duration
	// falseHintProb: a gossip round also brings a false leader hint.
	falseHintProb float64

	// Retention (retention.go), drawn from its own random stream: ret
	// turns it on.
	ret retParams
	ver versionParams
	// Voter changes and voter wipes (voters.go), drawn from their own
	// stream too.
	vc vcParams
}

func ms(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }

func chooseParams(r *rand.Rand) params {
	var p params
	// 1–5 voters, weighted toward the odd sizes of real clusters and the
	// sizes where figure-8 style histories exist (3+).
	p.voters = [...]int{1, 2, 3, 3, 3, 4, 5, 5, 5, 5}[r.Intn(10)]
	p.observers = r.Intn(3)
	p.fetchTimeout = ms(80 + 80*r.Float64())
	p.electionTimeout = ms(20 + 30*r.Float64())
	p.fetchMaxWait = ms(10 + 30*r.Float64())
	// The core requires FetchTimeout ≥ 2×(FetchMaxWait+ElectionTimeout)
	// (one lost fetch must not cost leader contact).
	p.fetchTimeout = max(p.fetchTimeout, replica.MinFetchTimeout(p.fetchMaxWait, p.electionTimeout))
	p.fetchMaxBytes = 1 << 20
	switch k := r.Intn(20); {
	case k < 5:
		// Small responses: a follower needs several rounds to catch up.
		p.fetchMaxBytes = 16 + r.Intn(64)
	case k < 14:
		// One or two entries per response: a follower may hold part of
		// an old epoch's tail without the new leader's epoch-start entry
		// (Raft's figure 8 needs that).
		p.fetchMaxBytes = 1 + r.Intn(16)
	}
	// A deadline's round runs up to tickMax after it (R97: the
	// scheduler's slack and the loop's wake-up).
	p.tickMax = ms(1 + 2*r.Float64())
	_ = r.Float64() // keeps the parameters drawn after it
	p.netMin = ms(0.1)
	p.netMax = ms(0.5 + 8*r.Float64())
	p.slowProb = 0.05 * r.Float64()
	p.slowMax = ms(20 + 60*r.Float64())
	p.dropProb = 0.1 * r.Float64()
	p.dupProb = 0.05 * r.Float64()
	p.diskMax = ms(0.2 + 6*r.Float64())
	p.reportDelayProb = 0.2 * r.Float64()
	p.proposeEvery = ms(1 + 15*r.Float64())
	p.readEvery = ms(2 + 15*r.Float64())
	p.maxRecords = 1 + r.Intn(3)
	p.maxInflight = 1 + r.Intn(32)
	p.crashEvery = ms(60 + 300*r.Float64())
	p.partitionEvery = ms(60 + 300*r.Float64())
	p.downMax = ms(20 + 300*r.Float64())
	p.healMax = ms(20 + 400*r.Float64())
	p.crashLeaderProb = 0.5 * r.Float64()
	p.crashNewLeaderProb = 0.3 * r.Float64()
	p.crashFollowerOnElectProb = 0.3 * r.Float64()
	p.crashAfterAppendProb = 0.1 * r.Float64()
	p.gossipEvery = ms(10 + 40*r.Float64())
	p.crashAfterCommitProb = 0.2 * r.Float64()
	p.isolateNewLeaderProb = 0.3 * r.Float64()
	p.crashNewLeaderProb = 0.5 * r.Float64()
	p.pauseProb = 0.4 * r.Float64()
	if r.Intn(2) == 0 {
		p.batchWindow = ms(0.05 + 2*r.Float64())
	}
	p.massCrashProb = 0.15 * r.Float64()
	if r.Intn(5) == 0 {
		// A harsh network and a slow disk: many drops, messages late by
		// more than a fetch timeout (stale epochs arriving), fsyncs
		// slower than round trips.
		p.dropProb = 0.3 * r.Float64()
		p.slowProb = 0.3 * r.Float64()
		p.slowMax = time.Duration(float64(3*p.fetchTimeout) * r.Float64())
		p.diskMax = ms(1 + 20*r.Float64())
	}
	return p
}

// maxRecordSize is the cores' record size limit; the workload's records
// are about 6 bytes, and a few are made larger on purpose.
const maxRecordSize = 64

// Options.TightLoad's bounds: a few kilobytes a second of catch-up (the
// bucket then holds one FetchMaxBytes response), and a backlog of a few
// records.
const (
	TightCatchUpBytesPerSecond = 4 << 10
	TightMaxUncommittedBytes   = 4 * (maxRecordSize + protocol.EntryOverhead)
)

// Phases of a run.
const (
	phaseFaults  = iota // workload and faults
	phaseCalm           // workload, no faults
	phaseQuiesce        // no workload, no faults: wait for convergence
	phaseStable         // converged; false failure hints must not depose the leader
)

// convergeBound is the simulated time a cluster gets, after the workload
// stops, to elect a leader and bring every replica to the same log and HW:
// 10s, plus twice the time a replica that restarted empty needs to fetch
// the whole log in rounds of the run's fetch size: entries counted at the
// largest record plus protocol.EntryOverhead (what a fetch response counts),
// a round being a fetch and its answer, the write and its report, and the
// shell's loop rounds.
func (s *sim) convergeBound() time.Duration {
	perRound := max(1, s.p.fetchMaxBytes/(maxRecordSize+protocol.EntryOverhead))
	longest := len(s.committed)
	for _, nd := range s.nodes {
		longest = max(longest, len(nd.shadow))
	}
	rounds := longest/perRound + 1
	round := 2*s.p.netMax + 2*s.p.diskMax + 2*s.p.batchWindow
	return 10*time.Second + 2*time.Duration(rounds)*round
}

// simBase is the wall-clock origin of simulated time (any fixed instant).
var simBase = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// entryKey is what the checker compares: an entry without its offset.
type entryKey struct {
	epoch uint64
	typ   protocol.EntryType
	data  string
	// key is a data entry's entry key (R102), "" if none.
	key string
}

func keyOf(e protocol.Entry) entryKey {
	if e.Type == protocol.EntryKeyed {
		// A keyed data entry is the record a reader sees (R61), with its
		// entry key (R102).
		key, data := protocol.EntryKeyOf(e)
		return entryKey{epoch: e.Epoch, typ: protocol.EntryData, data: string(data), key: key}
	}
	return entryKey{epoch: e.Epoch, typ: e.Type, data: string(e.Data)}
}

// readKey is what a reader's batch entry i stands for: the entry with the
// entry key the batch gives it.
func readKey(b *shell.Batch, i int) entryKey {
	k := keyOf(b.Entries[i])
	k.key = b.Key(i)
	return k
}

func (k entryKey) String() string {
	if k.key != "" {
		return fmt.Sprintf("{epoch=%d %s key=%q %q}", k.epoch, k.typ, k.key, k.data)
	}
	return fmt.Sprintf("{epoch=%d %s %q}", k.epoch, k.typ, k.data)
}

// node is one simulated process: the shell's round (shell.Node, the type
// the real loop drives) around the core, its durable store, and the
// events waiting for the next round.
type node struct {
	idx int
	id  string
	up  bool
	inc int // incarnation: bumped at every restart
	// namedIn: the vote requests (candidate, round) this process received
	// that named its directory (KIP-853: a node its own set does not list
	// yet may grant them).
	namedIn map[namedRound]bool
	// sh runs the process's rounds; r is its core, read (never driven)
	// by the checker between rounds.
	sh    *shell.Node
	r     *replica.Replica
	store durable
	// contact is the process's node-level contact clock (quiescence.go,
	// R98).
	contact *nodecontact.Clock
	// asked: the last heartbeat to the peer asked it to resync (the
	// next that does is a repeat, R109).
	asked map[string]bool
	// inbox holds the inputs (proposals, messages, hints) that arrived
	// since the last round; the next round feeds them to the core in
	// arrival order, as the real loop drains its channels.
	inbox []shell.Event
	// published is the ReadableHW of the last round's Output: what the
	// node's readers were last woken with and read below.
	published uint64
	// logsVersion and logsAt are the catalog's version and the readable
	// HW it was as of, at the last round (catalog.go).
	logsVersion, logsAt uint64

	// pending holds writes the core asked for that are not yet durable, in
	// Seq order. durableSeq is the last Seq applied to the store and
	// reportedSeq the last one reported with Persisted, both in this
	// incarnation; reportPending says an evReport is scheduled.
	pending       []protocol.Write
	durableSeq    uint64
	reportedSeq   uint64
	reportPending bool

	// shadow is the log as the core sees it: the store plus pending
	// writes, applied when the core emits them.
	shadow []entryKey

	// pausedUntil: the process is stalled until then (see crashTimer).
	pausedUntil time.Duration
	// roundPending: an evRound is scheduled.
	roundPending bool
	// dl is the deadline of its last round and its tick (deadline.go).
	dl deadlineState
	// inflight counts this process's proposals not yet acked; readable is
	// its last ReadableHW (it never moves back within a process).
	inflight int
	readable uint64
	// The node's clock: a rate within ±5% of simulated time, so
	// timeouts on different nodes drift apart. It reads clockBase at
	// simulated time clockFrom and runs from there; before clockFrom it
	// stands still (a stall). Forward jumps move clockBase.
	clockBase time.Time
	clockFrom time.Duration
	clockRate float64
	// noSync: this node's store does not fsync (disk.go).
	noSync bool
	// Retention (retention.go): the node's log start as its core's writes
	// give it (its shadow is compared only from there), the core's as last
	// seen in this process, the store's (never back across restarts unless
	// wiped or lost by a NoSync power loss), retired (below it the store
	// deleted entries it held as committed copies: they count as durable
	// there), and resetTo (the log start of a reset while the HW is still
	// below it). Below unknown the shadow holds nothing (a restart or a
	// reset emptied it); between unknown and start it holds what the
	// node deleted by retention.
	start, coreStart, storeStart, retired, resetTo, unknown uint64

	// Voters (voters.go): disk counts the node's disks (a wipe gives it a
	// new one), dirID is the directory ID of the one it has; vrows mirrors
	// the voter-set rows of its core's log view, and roundSets holds the
	// sets it had in force during its current round; maxLEO is the highest
	// log end its disk reached; replaceDue says it lost its disk as a
	// voter and its new incarnation is not yet a voter of the committed
	// set (wlRemoved: the workload asked to remove it, so nothing is owed
	// to it); countedHW is the HW up to which its leader counting was
	// checked.
	disk      int
	dirID     string
	vrows     []protocol.VotersAt
	roundSets [][]protocol.Voter
	// msgSets holds the sets nd had in force since the oldest round whose
	// messages may still be held by its core (a message waits for the
	// writes issued before it: it leaves in the round the core hears they
	// are durable, and the set may have changed meanwhile: a wiped node's
	// bootstrap pre-votes may be built before it appends the recorded set
	// and sent after); msgOutgoing says its newest set
	// removed it at some point of that window (it may campaign: replica's
	// outgoing); msgsHeld says the last round ended with writes the core
	// had not heard were durable.
	msgSets     [][]protocol.Voter
	msgOutgoing bool
	msgsHeld    bool
	maxLEO      uint64
	replaceDue  bool
	wlRemoved   bool
	countedHW   uint64

	// Checker state. hw is the last HW seen in this process lifetime;
	// checked is the prefix of shadow known to equal the committed log;
	// role and epoch are the last observed.
	hw      uint64
	checked uint64
	// votes is the durable vote of every epoch the node voted in, from
	// the quorum-state writes that reached its disk.
	votes  map[uint64]string
	role   replica.Role
	epoch  uint64
	leader string
	// failHintAt: when gossip last told this node that a node failed, or
	// its transport that a peer's connection closed (peerdown.go);
	// prospectiveAt: when it last turned prospective.
	failHintAt    time.Duration
	prospectiveAt time.Duration
	leaderSince   time.Duration // when it last became leader
	// contacts: the last clean fetch answers it received (a ring);
	// heardAt, heardEpoch: the last clean fetch request from each node
	// and its epoch (liveness.go).
	contacts    [contactRing]contact
	nContacts   int
	lastFetchID uint64 // the FetchID of its latest fetch
	// aheadOf is the fetch offset of its latest fetch that was ahead of
	// its durable offset, in this incarnation (0: none).
	aheadOf    uint64
	answeredID uint64 // the FetchID of the last answer it received
	heardAt    []time.Duration
	heardEpoch []uint64

	// snap: its snapshot store and service (snapshot.go).
	snap snapNode
	// kc: its compaction pass read and not yet rewritten (compaction.go).
	kc *compactPass
}

// namedRound is a candidate's vote request round.
type namedRound struct {
	candidate string
	round     uint64
}

// proposal is one Propose call of the workload.
type proposal struct {
	id      uint64
	node    int
	inc     int
	records []string
	acked   bool
	// tooLarge: a record exceeds maxRecordSize; the only right answer is
	// ErrTooLarge.
	tooLarge bool
	// appended: some node's log got one of its records; notLeader: it was
	// answered with ErrNotLeader, which promises nothing was appended.
	appended, notLeader bool
	// committedAt is the offset of the first record once some leader (or
	// the proposing node) has declared it committed; -1 before.
	committedAt int64
	commitEpoch uint64 // epoch of the node that declared it committed
	// barrier: a read barrier (barrier.go), not an append: no records.
	barrier bool
	// eo: the exactly-once workload's key and retries (exactlyonce.go).
	eo eoFields
	// change: a voter change (voters.go), not an append: no records;
	// wlRemove: a remove the workload chose (not a heal).
	change   *protocol.VoterChange
	wlRemove bool
	// logChange: a log change (catalog.go), not an append.
	logChange *logChange
	// entryKey: the entry key its records carry (compaction.go).
	entryKey string
}

type sim struct {
	// setRecorded: some node's log has held a voter set (a cluster exists,
	// R60).
	setRecorded bool
	opts        Options
	p           params
	rng         *rand.Rand
	// wr drives the version mix's choices (versions.go), ver is its
	// state.
	wr  *rand.Rand
	ver versionState
	// xr drives the choices of the extended faults, so that a classic
	// run draws from rng what the full run of its seed draws.
	xr *rand.Rand
	// er draws the early ticks (deadline.go).
	er *rand.Rand
	// rr drives retention's choices (retention.go), for the same reason;
	// vr voter changes' and wipes' (voters.go).
	rr    *rand.Rand
	vr    *rand.Rand
	now   time.Duration
	q     eventQueue
	seq   uint64
	steps int
	phase int
	hash  hasher
	trace func(string)
	err   error

	nodes   []*node
	byID    map[string]int
	voters  []string
	blocked [][]int // blocked[from][to] > 0: messages from→to are dropped

	partitions map[int][][2]int
	nextPart   int

	quiesceAt time.Duration

	// lullUntil: no new fault starts before then (params.lulls).
	lullUntil time.Duration
	// fc: when faults last touched each node and link (liveness.go);
	// epochSeen: when each epoch was first observed.
	fc    faultClock
	bound time.Duration // liveBound(), fixed for the run
	// down counts the nodes down; followOK caches oneLeaderFollowed until
	// followUntil or until a voter changes (followDirty).
	down        int
	followOK    bool
	followDirty bool
	followUntil time.Duration
	epochSeen   map[uint64]time.Duration
	epochBy     map[uint64]int // the node first seen in each epoch
	// epochRound: when the candidate that began each epoch had turned
	// prospective (its pre-vote round began then or later).
	epochRound map[uint64]time.Duration
	// tainted: a NoSync node's loss explains whatever follows; the run
	// stops (disk.go).
	tainted bool
	nsLost  []noSyncLoss // NoSync losses of the power loss being handled
	// msgs holds the messages in flight (event.msg indexes it); freeMsgs
	// lists its free slots.
	msgs     []protocol.Message
	freeMsgs []int32
	// twins: the quiescent messages the network duplicated (event.twin
	// numbers each pair from 1), true once one copy was counted on its
	// receiver's contact clock (quiescence.go: heardMessage); lastTwin
	// is the last number given.
	twins    map[int32]bool
	lastTwin int32
	// nsHistory: every NoSync loss of the run.
	nsHistory []noSyncLoss

	// leaderStart: the highest log start each epoch's leader had (a reset
	// may go no higher: retention.go).
	leaderStart map[uint64]uint64

	// bar is the read-barrier workload (barrier.go).
	bar barrierState
	// cat is the catalog workload and its reference (catalog.go).
	cat catalogState
	// snap is the snapshot workload and its reference (snapshot.go).
	snap snapSim
	// kc is the compaction workload and its state (compaction.go).
	kc compactSim

	// The stable phase: when it began, and the leader it must keep.
	stableAt     time.Duration
	stableLeader int
	stableEpoch  uint64

	// Voters (voters.go): the disks lost by wipes, by directory ID; the
	// newest committed voter set and its offset (nil before the first).
	lost   map[string]lostDisk
	cset   []protocol.Voter
	csetAt uint64
	// vcPending: the workload's voter changes not answered yet.
	vcPending []*proposal

	// Checker state.
	leaders map[uint64]int // epoch → leader node
	// grants: epoch → voter's disk (directory ID) → candidate it granted
	// a vote to.
	grants    map[uint64]map[string]int
	committed []entryKey // the committed log as observed so far
	// committedData: the offset of every committed record.
	committedData map[string]uint64
	// commitEpoch[o] is the epoch of the node whose HW first covered
	// offset o.
	commitEpoch []uint64
	proposals   []*proposal           // by id-1
	payloadOf   map[string]payloadRef // payload → its proposal and record index
	eo          eoState               // the exactly-once workload (exactlyonce.go)
	ackedProps  []*proposal           // proposals declared committed, in order
	res         Result
}

type payloadRef struct {
	prop *proposal
	i    int
}

// Run runs one simulation. It never panics: a panic in the core is
// reported in Result.Err with its stack.
func Run(opts Options) (res Result) {
	if opts.Steps <= 0 {
		opts.Steps = 2000
	}
	var s *sim
	defer func() {
		if v := recover(); v != nil {
			s.err = fmt.Errorf("panic at step %d (t=%v): %v\n%s", s.steps, s.now, v, debug.Stack())
		}
		res = s.result()
	}()
	s = newSim(opts)
	s.loop()
	return s.result()
}

// newSim makes a sim with its cluster started, for tests that drive it
// event by event (step).
func newSim(opts Options) *sim {
	if opts.ForgeVotes || opts.LyingDisk {
		opts.Classic = true
	}
	s := &sim{
		opts:          opts,
		rng:           rand.New(rand.NewSource(opts.Seed)),
		xr:            rand.New(rand.NewSource(opts.Seed ^ 0x5eed_0009)),
		er:            rand.New(rand.NewSource(opts.Seed ^ 0x5eed_0016)),
		rr:            rand.New(rand.NewSource(opts.Seed ^ 0x5eed_0011)),
		vr:            rand.New(rand.NewSource(opts.Seed ^ 0x5eed_0012)),
		wr:            rand.New(rand.NewSource(opts.Seed ^ 0x5eed_0015)),
		lost:          map[string]lostDisk{},
		leaderStart:   map[uint64]uint64{},
		hash:          newHasher(),
		trace:         opts.Trace,
		byID:          map[string]int{},
		partitions:    map[int][][2]int{},
		leaders:       map[uint64]int{},
		grants:        map[uint64]map[string]int{},
		payloadOf:     map[string]payloadRef{},
		epochSeen:     map[uint64]time.Duration{},
		committedData: map[string]uint64{},
		epochBy:       map[uint64]int{},
		epochRound:    map[uint64]time.Duration{},
	}
	s.p = chooseParams(s.rng)
	s.bar.rng = rand.New(rand.NewSource(opts.Seed ^ 0x5eed_0014))
	if !opts.Classic {
		chooseBarriers(&s.bar, s.bar.rng)
	}
	s.cat.rng = rand.New(rand.NewSource(opts.Seed ^ 0x5eed_0026))
	if !opts.Classic && !opts.NoCatalog {
		chooseCatalog(&s.cat, s.cat.rng)
	}
	if !opts.Classic {
		chooseExtended(&s.p, s.xr)
		chooseRetention(&s.p, s.rr)
		if !opts.NoVoterChanges {
			chooseVoterChanges(&s.p, s.vr)
		}
		if !opts.NoVersionMix {
			chooseVersions(&s.p, s.wr)
		}
	}
	s.snap.rng = rand.New(rand.NewSource(opts.Seed ^ 0x5eed_0027))
	chooseSnapshots(s)
	s.kc.rng = rand.New(rand.NewSource(opts.Seed ^ 0x5eed_0028))
	chooseCompaction(s)
	if opts.ExactlyOnce {
		s.eoInit()
	}
	s.setup()
	return s
}

func (s *sim) result() Result {
	r := s.res
	r.Seed = s.opts.Seed
	r.Err = s.err
	r.Steps = s.steps
	r.SimTime = s.now
	r.Hash = uint64(s.hash)
	r.Voters = s.p.voters
	r.Observers = s.p.observers
	r.Proposals = len(s.proposals)
	r.Acked = len(s.ackedProps)
	r.LeaderEpochs = len(s.leaders)
	r.CommittedLen = len(s.committed)
	return r
}

func (s *sim) fail(format string, args ...any) {
	if s.err != nil {
		return
	}
	s.err = fmt.Errorf("step %d, t=%v: %s", s.steps, s.now, fmt.Sprintf(format, args...))
	s.tracef("VIOLATION: %v", s.err)
}

func (s *sim) tracing() bool { return s.trace != nil }

func (s *sim) tracef(format string, args ...any) {
	if s.trace != nil {
		s.trace(fmtDur(s.now) + " " + fmt.Sprintf(format, args...))
	}
}

// between returns a uniform duration in [lo, hi].
func (s *sim) between(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(s.rng.Int63n(int64(hi-lo)+1))
}

func (s *sim) schedule(after time.Duration, e event) {
	e.at = s.now + after
	s.seq++
	e.seq = s.seq
	s.q.push(e)
}

func (s *sim) setup() {
	n := s.p.voters + s.p.observers
	for i := 0; i < n; i++ {
		nd := &node{idx: i, store: s.newStore(), votes: map[uint64]string{}}
		if i < s.p.voters {
			nd.id = fmt.Sprintf("v%d", i+1)
			s.voters = append(s.voters, nd.id)
		} else {
			nd.id = fmt.Sprintf("o%d", i-s.p.voters+1)
		}
		nd.dirID = dirName(nd.id, 0)
		nd.clockBase = simBase.Add(time.Duration(s.rng.Int63n(int64(time.Hour))))
		nd.clockRate = 0.95 + 0.1*s.rng.Float64()
		if s.opts.ExactlyOnce {
			s.eoClock(nd)
		}
		s.byID[nd.id] = i
		s.nodes = append(s.nodes, nd)
	}
	s.blocked = make([][]int, n)
	for i := range s.blocked {
		s.blocked[i] = make([]int, n)
	}
	s.initFaultClock()
	s.bound = s.liveBound()
	s.followDirty = true
	for i, ns := range s.p.noSync {
		if ns && i < n {
			s.nodes[i].noSync = true
			s.nodes[i].store = memoryStore{storage.NewMemoryDeferred()}
		}
	}
	s.tracef("cluster voters=%v observers=%d params=%+v snapshots=%+v", s.voters, s.p.observers, s.p, s.snap.p)
	s.setupSnapshots()
	s.setupVersions()
	for _, nd := range s.nodes {
		s.start(nd)
	}
	s.setupExtended()
	s.setupBarriers()
	s.setupCatalog()
	s.setupRetention()
	s.setupVoters()
	s.setupCompaction()
	s.schedule(s.between(0, s.p.proposeEvery), event{kind: evPropose})
	s.schedule(s.between(0, s.p.readEvery), event{kind: evRead})
	s.schedule(s.between(0, 2*s.p.crashEvery), event{kind: evCrashTimer})
	s.schedule(s.between(0, 2*s.p.partitionEvery), event{kind: evPartitionTimer})
}

// clock is the node's local time at simulated time t.
func (nd *node) clock(t time.Duration) time.Time {
	if t <= nd.clockFrom {
		return nd.clockBase
	}
	return nd.clockBase.Add(time.Duration(float64(t-nd.clockFrom) * nd.clockRate))
}

// simKeyCheckpointBytes is the cores' Config.KeyCheckpointBytes: a run's
// log is a few KiB to a few MiB, so the default (16 MiB) would never
// checkpoint the key table and restarts would not restore one (R76).
const simKeyCheckpointBytes = 2 << 10

// start (re)starts a node's process on its durable store.
func (s *sim) start(nd *node) {
	nd.inc++
	nd.up = true
	nd.pausedUntil = 0
	nd.roundPending = false
	nd.inbox = nil
	nd.inflight = 0
	nd.readable = 0
	nd.published = 0
	nd.pending = nil
	nd.namedIn = nil
	nd.msgSets, nd.msgOutgoing, nd.msgsHeld = nil, false, false
	nd.durableSeq, nd.reportedSeq, nd.reportPending = 0, 0, false
	if nd.inc > 1 {
		nd.store = nd.store.reopen()
		s.touchNode(nd.idx, s.now, "a restart")
		s.down--
	}
	s.followDirty = true
	// The core's view restarts from the durable log, and only the part of
	// it that still equals the committed log counts as checked. Nothing
	// is known below the log start (retention).
	leo, ls := nd.store.LEO(), nd.store.LogStart()
	s.restartLogStart(nd, ls)
	nd.shadow = append(nd.shadow[:0], make([]entryKey, ls)...)
	nd.vrows = storeRows(nd.store)
	nd.maxLEO = max(nd.maxLEO, leo)
	if leo > ls {
		es, err := nd.store.Entries(ls, math.MaxInt, math.MaxInt)
		if err != nil {
			s.fail("%s: reading the durable log at restart: %v", nd.id, err)
			return
		}
		for _, e := range es {
			k, ok := s.resolve(nd, e)
			if !ok {
				return
			}
			nd.shadow = append(nd.shadow, k)
		}
	}
	checked := min(nd.checked, leo)
	for o := ls; o < checked; o++ {
		if nd.shadow[o] != s.committed[o] {
			checked = o
		}
	}
	nd.checked = checked
	cfg := replica.Config{
		ID:                 nd.id,
		DirID:              nd.dirID,
		ManualVoterChanges: s.p.vc.manual,
		Voters:             append([]string(nil), s.voters...),
		Members:            s.memberIDs(nd),
		FetchTimeout:       s.p.fetchTimeout,
		ElectionTimeout:    s.p.electionTimeout,
		FetchMaxWait:       s.p.fetchMaxWait,
		FetchMaxBytes:      s.p.fetchMaxBytes,
		MaxRecordSize:      maxRecordSize,
		KeyCheckpointBytes: simKeyCheckpointBytes,
		Rand:               rand.New(rand.NewSource(s.rng.Int63())),
	}
	s.versionConfig(nd, &cfg)
	if nd.contact = nil; !s.opts.NoQuiescence {
		s.startContact(nd)
		cfg.Contact = nd.contact
	}
	if s.opts.ExactlyOnce {
		cfg.DedupWindow = eoDedupWindow
	}
	if s.opts.TightLoad {
		cfg.CatchUpBytesPerSecond, cfg.MaxUncommittedBytes = TightCatchUpBytesPerSecond, TightMaxUncommittedBytes
	}
	// A release before snapshot transfer pulls none.
	cfg.ShipSnapshots = cfg.SupportedFeatureLevel == 0 || cfg.SupportedFeatureLevel >= protocol.FeatureLevelSnapshotTransfer
	s.hash.byte(0xA0)
	s.hash.u64(uint64(nd.idx))
	s.hash.u64(uint64(nd.inc))
	s.hash.str(nd.dirID)
	r, err := replica.New(cfg, nd.store, nd.clock(s.now))
	if err != nil {
		s.fail("%s: replica.New after restart %d: %v", nd.id, nd.inc-1, err)
		nd.up = false
		return
	}
	if _, ok := r.KeyCheckpointRestored(); ok {
		s.res.Faults.KeyCheckpointRestores++
	}
	nd.r = r
	nd.sh = shell.New(r)
	nd.published = r.ReadableHW()
	nd.logsVersion, nd.logsAt = r.LogsVersion(), 0
	st := r.Status()
	nd.hw = st.HighWatermark
	nd.role, nd.epoch, nd.leader = st.Role, st.Epoch, st.LeaderID
	if st.LogStart != ls {
		s.fail("%s: restarted with log start %d, but its store starts at %d", nd.id, st.LogStart, ls)
		return
	}
	nd.coreStart = st.LogStart
	nd.countedHW = st.HighWatermark
	s.tracef("%s start inc=%d dir=%s role=%s epoch=%d logstart=%d leo=%d hw=%d", nd.id, nd.inc, nd.dirID, st.Role, st.Epoch, st.LogStart, st.LEO, st.HighWatermark)
	nd.dl = deadlineState{}
	s.schedule(s.between(0, s.p.gossipEvery), event{kind: evGossip, node: nd.idx, inc: nd.inc})
	if nd.contact != nil {
		s.scheduleContact(nd)
	}
	s.snapStart(nd)
	// The process's first round: writes New issued (a truncation, a
	// single voter's self-vote) are checked like any other.
	s.round(nd)
	if st.DurableLEO > leo || st.HighWatermark > leo {
		s.fail("%s: restarted with durable LEO %d and HW %d, but the store ends at %d", nd.id, st.DurableLEO, st.HighWatermark, leo)
	}
	s.check(nd)
}

// crash stops nd's process: what its disk did not complete is lost. power
// says the machine lost power too: a NoSync node then also loses what its
// OS had not yet written back (disk.go).
func (s *sim) crash(nd *node, why string) { s.crashNode(nd, why, false) }

func (s *sim) crashNode(nd *node, why string, power bool) {
	if !nd.up {
		return
	}
	s.res.Crashes++
	s.tracef("%s CRASH (%s): losing %d pending writes", nd.id, why, len(nd.pending))
	if nd.aheadOf > nd.store.LEO() && slices.ContainsFunc(nd.pending, func(w protocol.Write) bool { return w.Kind == protocol.WriteAppend }) {
		s.res.Faults.PipelinedLosses++
	}
	nd.aheadOf = 0
	s.hash.byte(0xA1)
	s.hash.u64(uint64(nd.idx))
	s.touchNode(nd.idx, s.now, why)
	s.crashDisk(nd, power)
	s.snapCrash(nd)
	s.closeLinks(nd, power)
	s.down++
	s.followDirty = true
	nd.up = false
	nd.r = nil
	nd.sh = nil
	nd.inbox = nil
	nd.pending = nil
	// Let the others' gossip notice, as memberlist would.
	if s.phase == phaseFaults {
		s.schedule(s.between(ms(5), ms(60)), event{kind: evFailHint, node: nd.idx})
	}
	s.schedule(s.between(ms(1), s.p.downMax), event{kind: evRestart, node: nd.idx, inc: nd.inc})
}

func (s *sim) loop() {
	faultSteps := s.opts.Steps * 7 / 10
	for s.err == nil && !s.tainted {
		if s.phase == phaseQuiesce {
			if s.converged() && s.now-s.fc.last >= s.settle() {
				s.res.ConvergeTime = s.now - s.quiesceAt
				s.finalCheck()
				if !s.opts.Stable || s.err != nil {
					return
				}
				s.startStable()
				continue
			}
			if b := s.convergeBound(); s.now-s.quiesceAt > b {
				s.fail("no convergence within %v of simulated time after the workload stopped:\n%s", b, s.dump())
				return
			}
		}
		if s.phase == phaseStable && s.now-s.stableAt > s.stableWindow() {
			s.endStable()
			return
		}
		if s.q.len() == 0 {
			s.fail("event queue ran dry")
			return
		}
		s.step(faultSteps)
	}
}

// step runs the next event; the fault phase ends at step faultSteps and the
// workload at opts.Steps.
func (s *sim) step(faultSteps int) {
	ev := s.q.pop()
	s.now = ev.at
	if ev.kind != evRound && ev.kind != evEarlyTick && !s.staleTick(ev) {
		// Steps count what happens to the cluster; a node's round is
		// its shell's answer to it, an early tick the checker's probe,
		// and a tick armed for a deadline a later round replaced wakes
		// nothing (the scheduler's heap entry moved, R97).
		s.steps++
	}
	if s.phase == phaseFaults && s.steps >= faultSteps {
		s.calm()
	}
	if s.phase == phaseCalm && s.steps >= s.opts.Steps {
		s.phase = phaseQuiesce
		s.quiesceAt = s.now
		s.tracef("QUIESCE: workload stops")
	}
	s.hash.u64(uint64(ev.at))
	s.hash.byte(byte(ev.kind))
	s.hash.u64(uint64(ev.node))
	s.dispatch(ev)
	s.checkRecovery()
}

// settle is how long after the last fault ends (a pause, a clock stall,
// a restart: see faultClock) the cluster counts as converged at the
// earliest: every follower's next fetch (sent within a retry timeout,
// FetchMaxWait+ElectionTimeout, perhaps parked FetchMaxWait) has then been
// answered, so no voter still lacks leader contact because of the fault
// (it would rightly grant pre-votes; the stable phase would then see a
// deposition the fault explains).
func (s *sim) settle() time.Duration {
	return 2*s.p.fetchMaxWait + s.p.electionTimeout + 2*s.p.netMax + s.p.diskMax + 2*s.p.tickMax + s.p.batchWindow
}

// stableWindow is how long a converged cluster is watched for needless
// elections: several fetch and election timeouts.
func (s *sim) stableWindow() time.Duration {
	return 3*s.p.fetchTimeout + 4*s.p.electionTimeout
}

// startStable begins the last phase: the cluster has converged, and
// gossip now falsely reports the healthy leader dead to every node, a few
// times. Gossip may make an election start sooner, never decide one
// (docs/protocol.md §3.4): the leader must stay.
func (s *sim) startStable() {
	s.phase = phaseStable
	s.stableAt = s.now
	for _, nd := range s.nodes {
		if nd.role == replica.RoleLeader {
			s.stableLeader, s.stableEpoch = nd.idx, nd.epoch
		}
	}
	s.tracef("STABLE: leader %s epoch %d; false failure hints follow", s.nodes[s.stableLeader].id, s.stableEpoch)
	for _, nd := range s.nodes {
		if nd.idx == s.stableLeader {
			continue
		}
		for i := 0; i < 3; i++ {
			s.scheduleHint(nd, s.between(0, s.stableWindow()/2), replica.HintNodeFailed, s.stableLeader, 0)
		}
	}
}

// endStable checks that the leader survived the false hints and the
// cluster is still converged.
func (s *sim) endStable() {
	l := s.nodes[s.stableLeader]
	for _, nd := range s.nodes {
		st := nd.r.Status()
		if st.Epoch != s.stableEpoch || st.LeaderID != l.id || (nd == l) != (st.Role == replica.RoleLeader) {
			s.fail("a healthy leader was deposed without any fault (false failure hints only): %s led epoch %d; now %s is %s in epoch %d following %q\n%s",
				l.id, s.stableEpoch, nd.id, st.Role, st.Epoch, st.LeaderID, s.dump())
			return
		}
	}
	s.tracef("STABLE: leader kept")
}

// calm ends the fault phase: partitions heal, crashed nodes restart, the
// network stops dropping and duplicating.
func (s *sim) calm() {
	s.phase = phaseCalm
	s.tracef("CALM: faults stop")
	for from := range s.blocked {
		for to := range s.blocked[from] {
			if s.blocked[from][to] > 0 {
				s.touchLink(from, to, s.now, "a partition healed at calm")
			}
			s.blocked[from][to] = 0
		}
	}
	clear(s.partitions)
	for _, nd := range s.nodes {
		if !nd.up {
			s.start(nd)
		}
	}
}

// oneShot in an evTick's id: the round of a paused process at its resume,
// whatever its deadline.
const oneShot = 1

// deferredWhilePaused: the kinds of events a paused process does not
// handle until it resumes.
var deferredWhilePaused = [...]bool{evTick: true, evDeliver: true, evDisk: true, evReport: true, evHint: true, evRound: true, evContact: true, evSnapshot: true, evCompact: true}

func (s *sim) dispatch(ev event) {
	if int(ev.kind) < len(deferredWhilePaused) && deferredWhilePaused[ev.kind] {
		if nd := s.nodes[ev.node]; nd.up && (nd.inc == ev.inc || ev.inc == anyInc) && s.now < nd.pausedUntil {
			// Keep the events' order: they are re-queued in the order
			// they come due, all at the end of the pause.
			ev.at = nd.pausedUntil
			s.seq++
			ev.seq = s.seq
			s.q.push(ev)
			return
		}
	}
	switch ev.kind {
	case evTick:
		nd := s.nodes[ev.node]
		if !nd.up || nd.inc != ev.inc {
			return
		}
		if ev.id != oneShot && ev.wseq != nd.dl.gen {
			return // armed for a deadline a later round replaced
		}
		// Every round ticks: a deadline passing is a round without events.
		s.wantRound(nd)

	case evEarlyTick:
		s.earlyTick(ev)

	case evContact:
		nd := s.nodes[ev.node]
		if !nd.up || nd.inc != ev.inc || nd.contact == nil {
			return
		}
		s.contactTick(nd)
		s.scheduleContact(nd)

	case evDeliver:
		s.deliver(ev)

	case evRound:
		nd := s.nodes[ev.node]
		if !nd.up || nd.inc != ev.inc {
			return
		}
		nd.roundPending = false
		s.round(nd)

	case evDisk:
		nd := s.nodes[ev.node]
		if !nd.up || nd.inc != ev.inc {
			return
		}
		s.diskDone(nd, ev.wseq)

	case evSync:
		nd := s.nodes[ev.node]
		if !nd.up || nd.inc != ev.inc {
			return
		}
		if m, ok := nd.store.(memoryStore); ok {
			if err := m.Sync(); err != nil {
				s.fail("%s: sync: %v", nd.id, err)
			}
		}

	case evReport:
		nd := s.nodes[ev.node]
		if !nd.up || nd.inc != ev.inc {
			return
		}
		nd.reportPending = false
		s.report(nd)

	case evRetry:
		s.eoRetry(ev)

	case evPropose:
		if s.phase == phaseQuiesce {
			return
		}
		s.propose()
		s.schedule(s.between(0, 2*s.p.proposeEvery), event{kind: evPropose})

	case evRead:
		s.read()
		if s.phase != phaseQuiesce {
			s.schedule(s.between(0, 2*s.p.readEvery), event{kind: evRead})
		}

	case evCrash:
		nd := s.nodes[ev.node]
		if !s.faulting() || !nd.up || nd.inc != ev.inc {
			return
		}
		s.crash(nd, "scheduled")

	case evRestart:
		nd := s.nodes[ev.node]
		if nd.up || nd.inc != ev.inc {
			return
		}
		s.start(nd)

	case evCrashTimer:
		if s.phase != phaseFaults {
			return
		}
		if s.faulting() {
			s.crashTimer()
		}
		s.schedule(s.between(0, 2*s.p.crashEvery), event{kind: evCrashTimer})

	case evLull:
		s.lull()

	case evClockTimer:
		if s.phase != phaseFaults {
			return
		}
		if s.faulting() {
			s.clockFault()
		}
		s.schedule(s.between(0, 2*s.p.clockEvery), event{kind: evClockTimer})

	case evPartitionTimer:
		if s.phase != phaseFaults {
			return
		}
		if s.faulting() {
			s.partition()
		}
		s.schedule(s.between(0, 2*s.p.partitionEvery), event{kind: evPartitionTimer})

	case evHeal:
		s.heal(ev.id)

	case evGossip:
		nd := s.nodes[ev.node]
		if !nd.up || nd.inc != ev.inc {
			return
		}
		s.gossip(nd)
		s.schedule(s.between(s.p.gossipEvery/2, s.p.gossipEvery*3/2), event{kind: evGossip, node: nd.idx, inc: nd.inc})

	case evFailHint:
		s.gossipFailed(s.nodes[ev.node])

	case evBarrier:
		s.barrierTimer()

	case evDelete, evLag, evWipe:
		s.retentionEvent(ev)

	case evVoterChange:
		s.voterChangeTimer()

	case evVoterWipe:
		s.voterWipeEvent(ev)

	case evVersion:
		s.versionEvent(ev)

	case evLogChange:
		s.catalogEvent(ev)

	case evSnapshot:
		s.snapEvent(ev)

	case evCompact:
		s.compactEvent(ev)

	case evHint:
		nd := s.nodes[ev.node]
		if !nd.up || nd.inc != ev.inc {
			return
		}
		if ev.hkind == hintPeerDown {
			s.peerDown(nd, ev.id)
			return
		}
		h := replica.Hint{Kind: ev.hkind, Node: s.nodes[ev.id].id, Epoch: ev.wseq}
		s.hash.u64(uint64(h.Kind))
		s.hash.str(h.Node)
		s.hash.u64(h.Epoch)
		s.tracef("%s hint kind=%d node=%s epoch=%d", nd.id, h.Kind, h.Node, h.Epoch)
		if h.Kind == replica.HintNodeFailed {
			nd.failHintAt = s.now
		}
		s.input(nd, shell.Hint(h))
	}
}

// input queues an input for nd's next round.
func (s *sim) input(nd *node, ev shell.Event) {
	nd.inbox = append(nd.inbox, ev)
	s.wantRound(nd)
}

// wantRound schedules nd's next round unless one is scheduled. Like the
// real loop, which wakes on one event, drains what else is queued and runs
// one round, the round runs after the inputs that arrive meanwhile: those
// due at the same instant (scheduled before it) without a batch window,
// those within the window with one.
func (s *sim) wantRound(nd *node) {
	if nd.roundPending {
		return
	}
	nd.roundPending = true
	s.schedule(s.between(0, s.p.batchWindow), event{kind: evRound, node: nd.idx, inc: nd.inc})
}

// round runs one round of nd's shell (shell.Node, as the real loop does:
// Tick at the node's clock, the inbox in arrival order, Persisted, Ready)
// and carries out its Output as the real loop does: writes to the
// simulated disk, messages to the simulated network, outcomes to the
// workload; then it checks the round's Output and the invariants.
func (s *sim) round(nd *node) {
	evs := nd.inbox
	nd.inbox = nil
	vs, _, _ := nd.inForce()
	nd.roundSets = append(nd.roundSets[:0], vs)
	if !nd.msgsHeld {
		nd.msgSets, nd.msgOutgoing = nd.msgSets[:0], false
	}
	nd.noteMsgSet(vs)
	fed := nd.reportedSeq // the Persisted this round feeds the core
	if s.tracing() {
		s.tracef("%s round: tick, %d inputs, persisted w%d, ready", nd.id, len(evs), nd.reportedSeq)
	}
	s.noteFetchLevels(nd, evs)
	out := nd.sh.Round(nd.clock(s.now), evs...)
	inputs := len(evs)
	if fed != nd.dl.fed {
		inputs++
	}
	s.armDeadline(nd, &out, fed, inputs)
	s.checkLevelWrites(nd, out.Writes)
	s.checkCatalogWrites(nd, out.Writes)
	// Snapshot work first: a reset among the writes is checked against
	// the chunks handed out with it (snapReset).
	s.snapOutput(nd, out)
	for _, w := range out.Writes {
		s.hash.byte(0xB0)
		s.hash.write(w)
		if s.tracing() {
			s.tracef("%s issue %s", nd.id, fmtWrite(w))
		}
		s.issueWrite(nd, w)
	}
	if out.KeyCheckpoint != nil {
		// Kept at once, ahead of the writes before it: the core checks a
		// checkpoint against the log at restart, so no order is owed.
		if err := nd.store.SaveKeyCheckpoint(*out.KeyCheckpoint); err != nil {
			s.fail("%s: saving the key checkpoint: %v", nd.id, err)
		}
	}
	for _, m := range out.Messages {
		s.hash.byte(0xB1)
		s.hash.msg(m)
		s.send(nd, m)
	}
	for _, r := range out.Resolved {
		a := replica.Ack{ID: r.ID, FirstOffset: r.Offset, Err: r.Err}
		s.hash.byte(0xB2)
		s.hash.ack(a)
		s.onAck(nd, a)
	}
	for _, a := range out.Stray {
		s.fail("%s acks proposal %d, which its shell was not waiting for (unknown, or answered already)", nd.id, a.ID)
	}
	top := nd.durableSeq
	if n := len(nd.pending); n > 0 {
		top = nd.pending[n-1].Seq
	}
	nd.msgsHeld = top > fed
	s.checkOutput(nd, out)
	s.check(nd)
	s.checkBarriers(nd)
	s.checkCatalog(nd, out)
	s.snapAdvance(nd)
}

func (s *sim) dump() string {
	var b strings.Builder
	for _, nd := range s.nodes {
		if !nd.up {
			fmt.Fprintf(&b, "  %s down\n", nd.id)
			continue
		}
		st := nd.r.Status()
		keys := make([]string, 0, len(st.RemoteLEO))
		for k := range st.RemoteLEO {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var rl []string
		for _, k := range keys {
			rl = append(rl, fmt.Sprintf("%s:%d", k, st.RemoteLEO[k]))
		}
		fmt.Fprintf(&b, "  %s %s epoch=%d leader=%q voted=%q leo=%d durable=%d hw=%d pending=%d remote=[%s]\n",
			nd.id, st.Role, st.Epoch, st.LeaderID, st.VotedFor, st.LEO, st.DurableLEO, st.HighWatermark,
			len(nd.pending), strings.Join(rl, " "))
	}
	fmt.Fprintf(&b, "  committed=%d acked=%d", len(s.committed), len(s.ackedProps))
	return b.String()
}
