package replog

import (
	"errors"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/replog-io/replog/internal/shell"
	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/replica"
	"github.com/replog-io/replog/storage"
)

// Stats is a snapshot of a node's counters and gauges, for metrics
// exporters (package replogprom turns it into Prometheus metrics) and
// dashboards. Counters count from Open and never go down; gauges are the
// node's state as of the call. Stats reads no log entries: it copies
// counters the node keeps as it works and adds up the sizes of the files
// in the data directory.
type Stats struct {
	// NodeID, Role, Epoch and LeaderID are as in Status.
	NodeID   string
	Role     Role
	Epoch    uint64
	LeaderID string
	// LEO, DurableLEO, HighWatermark, ReadableHW and LogStart are the
	// offsets of Status.
	LEO           uint64
	DurableLEO    uint64
	HighWatermark uint64
	ReadableHW    uint64
	LogStart      uint64

	// LeaderChanges counts the times this node learned of a new leader (a
	// leader ID and epoch it had not followed before), itself included.
	LeaderChanges uint64
	// ElectionsStarted counts the vote rounds this node started as a
	// candidate (each in a new epoch). Pre-vote rounds that failed do not
	// count: they change nothing.
	ElectionsStarted uint64

	// Appends and AppendBytes count the records committed through this
	// node's Append and AppendBatch calls (forwarded to the leader or
	// not), and their bytes (the records' lengths).
	Appends     uint64
	AppendBytes uint64
	// CommitLatency is the time from the moment the node's event loop took
	// an append (one Append or AppendBatch call) to its commit: the
	// replication and fsync part of Append's latency.
	CommitLatency Histogram

	// ForwardedAppendsSent counts the append requests this node forwarded
	// to the leader (one per batch the core sent); ForwardedAppendsReceived
	// those it received from followers (as the leader, or answered "not
	// leader").
	ForwardedAppendsSent     uint64
	ForwardedAppendsReceived uint64

	// FetchesServed counts the fetch responses this node sent (as leader,
	// or a "not leader" answer). FetchWait is, for the fetches answered,
	// how long each waited at this node, parked for new entries (up to
	// Options.FetchMaxWait) or not.
	FetchesServed uint64
	FetchWait     Histogram

	// CatchUpThrottledFetches counts the fetches this node, as leader,
	// made wait for the replication quota (Options.CatchUpBytesPerSecond,
	// R73), and CatchUpThrottledTime their total wait; CatchUpBytes the
	// entry bytes it served under the quota (to nodes catching up that no
	// commit waited for).
	CatchUpThrottledFetches uint64
	CatchUpThrottledTime    time.Duration
	CatchUpBytes            uint64
	// UncommittedBytes is, on the leader, its uncommitted backlog now: the
	// bytes of the records it appended in its epoch and has not committed
	// (bounded by Options.MaxUncommittedBytes, R74); 0 on other nodes.
	// BacklogRefusals counts the appends this node, as leader, refused
	// for a full backlog (its own and forwarded ones; each waits and
	// tries again, and each try counts).
	UncommittedBytes uint64
	BacklogRefusals  uint64
	// OtherLogMessages counts the messages this Log dropped because they
	// name another log (protocol.Message.Log): a Node's named log's
	// traffic reaching a node that runs this Log with Open. Nonzero means
	// the cluster mixes Open and OpenNode nodes among a named log's
	// replicas.
	OtherLogMessages uint64
	// QuiescentFetchesSent counts the quiescent fetches this node sent as
	// a caught-up follower (docs/protocol.md R99), QuiescentFetchesParked
	// those it parked without a deadline as leader: an idle log's
	// follower sends one and then nothing until the log moves.
	QuiescentFetchesSent   uint64
	QuiescentFetchesParked uint64

	// StorageCommitLatency is the duration of each write the node made
	// durable: one Store.Apply, a bbolt transaction with its fsyncs, or
	// with the commit journal one journal write and its fdatasync (no
	// fsync with Options.NoSync).
	StorageCommitLatency Histogram
	// StorageBytes is the size of the files in the data directory.
	StorageBytes uint64
	// The data directory's counters (storage.DirStats), since the node
	// opened it: StorageFsyncs is its fsyncs (two per bbolt commit; with
	// the commit journal one per group commit, plus the checkpoints'),
	// StorageCommits its bbolt commits, StorageGroupCommits the journal
	// records written (one per durable batch of writes; 0 without the
	// journal), StorageJournalBytes their bytes, StorageCheckpoints the
	// checkpoints (journal writes moved into the bbolt segments) and
	// StorageCheckpointTime their total duration, StorageJournalBatches
	// the node's batches in the journal's records (a record holds every
	// batch waiting for its round: with one log per journal, one) and
	// StorageJournalWaits the times a batch waited for a checkpoint to
	// make room in a full journal (writes outrunning the checkpoints).
	// "One fsync per commit" shows as StorageFsyncs close to
	// StorageGroupCommits. Zero for a store other than a data
	// directory's.
	StorageFsyncs         uint64
	StorageCommits        uint64
	StorageGroupCommits   uint64
	StorageJournalBatches uint64
	StorageJournalBytes   uint64
	StorageJournalWaits   uint64
	StorageCheckpoints    uint64
	StorageCheckpointTime time.Duration

	// The compactor's counters (Options.Compaction, docs/protocol.md
	// R103), since the Log opened: CompactionPasses its passes (those
	// that found a sealed segment to look at), CompactionPassesSkipped
	// the background passes that did nothing because the dirty part was
	// below Compaction.MinDirtyRatio, CompactionSegments the
	// segments rewritten, CompactionEntriesRemoved the entries they
	// dropped, CompactionBytesRead the entry bytes the passes read (the
	// dirty part, for each key's newest offset, and the segments they
	// rewrote or found nothing to remove in),
	// CompactionBytesFreed what the rewritten files shrank by, and
	// CompactionLastPass and CompactionTime the duration of the last pass
	// and of all of them (throttling included), CompactionPoint the last
	// pass's point (it compacted below it). Zero without compaction.
	CompactionPasses         uint64
	CompactionPassesSkipped  uint64
	CompactionSegments       uint64
	CompactionEntriesRemoved uint64
	CompactionBytesRead      uint64
	CompactionBytesFreed     uint64
	CompactionLastPass       time.Duration
	CompactionTime           time.Duration
	CompactionPoint          uint64

	// Followers is, on the leader, each other voter's replication lag,
	// sorted by ID; nil on other nodes.
	Followers []FollowerStats

	// Errors counts errors by kind. Every kind is present, zero or not:
	//   - "append_not_leader": an append found no leader to take it (Append
	//     retries these until its context ends, so one call may count
	//     many);
	//   - "append_unknown_outcome": an append ended with ErrUnknownOutcome
	//     (the leader changed, or the node halted) while the loop ran;
	//   - "append_too_large": a forwarded append the leader refused as too
	//     large;
	//   - "append_backlog_full": an append this node, as leader, found no
	//     room for in its uncommitted backlog (R74; Append retries these
	//     until its context ends, so one call may count many);
	//   - "append_failed": any other failed append (a halted node);
	//   - "storage_write": a write to the disk failed (ErrStorageFailed);
	//   - "replica_halt": the core halted (ErrCommittedTruncation or
	//     exhausted epochs);
	//   - "transport_send": a message could not be handed to the transport
	//     (no address for the peer, or the transport closed);
	//   - "gossip_advertise": the leader claim could not be broadcast by
	//     gossip in time;
	//   - "node_id_conflict": another live process was found using this
	//     node's ID (see ErrDuplicateNodeID).
	Errors map[string]uint64
}

// FollowerStats is the leader's view of one follower.
type FollowerStats struct {
	// ID is the follower's node ID.
	ID string
	// Known says whether the leader has heard from the follower in its
	// epoch; RemoteLEO is the follower's LEO as its last fetch told the
	// leader (the log start when not Known).
	Known     bool
	RemoteLEO uint64
	// LagEntries is the leader's LEO minus RemoteLEO: offsets the follower
	// still has to fetch (control entries included).
	LagEntries uint64
	// LagTime is how long the follower has not been caught up, Kafka's
	// way (replica.lag.time.max.ms): 0 while its last fetch asked for
	// the leader's LEO, otherwise the time since it last fetched up to
	// the LEO the leader had when it fetched the time before. A healthy
	// follower under load lags by about one fetch round trip; a dead one's
	// LagTime grows without bound. Since the start of the leadership for a
	// follower never caught up in it.
	LagTime time.Duration
}

// Histogram is a fixed-bucket histogram of durations, as Prometheus
// histograms count them.
type Histogram struct {
	// Bounds are the buckets' upper bounds, ascending.
	Bounds []time.Duration
	// Counts has len(Bounds)+1 entries: Counts[i] counts observations in
	// (Bounds[i-1], Bounds[i]]; the last counts those above every bound.
	// Counts are per bucket, not cumulative.
	Counts []uint64
	// Count is the number of observations; Sum their total.
	Count uint64
	Sum   time.Duration
}

// Error kinds of Stats.Errors.
const (
	errKindAppendNotLeader = iota
	errKindAppendUnknown
	errKindAppendTooLarge
	errKindAppendBacklogFull
	errKindAppendFailed
	errKindStorageWrite
	errKindHalt
	errKindSend
	errKindGossipAdvertise
	numErrKinds
)

var errKindNames = [numErrKinds]string{
	errKindAppendNotLeader:   "append_not_leader",
	errKindAppendUnknown:     "append_unknown_outcome",
	errKindAppendTooLarge:    "append_too_large",
	errKindAppendBacklogFull: "append_backlog_full",
	errKindAppendFailed:      "append_failed",
	errKindStorageWrite:      "storage_write",
	errKindHalt:              "replica_halt",
	errKindSend:              "transport_send",
	errKindGossipAdvertise:   "gossip_advertise",
}

// errKindConflict is counted by membership, not here.
const errKindConflict = "node_id_conflict"

// Bucket bounds. Commits take a fetch round trip and a follower's fsync
// (about a millisecond on a LAN with a fast disk, tens on a slow one); a
// storage commit is one or two fsyncs; a fetch waits up to FetchMaxWait
// (500ms by default) when there is nothing to send.
var (
	commitBounds = []time.Duration{
		250 * time.Microsecond, 500 * time.Microsecond, time.Millisecond, 2500 * time.Microsecond,
		5 * time.Millisecond, 10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond,
		100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond,
		time.Second, 2500 * time.Millisecond, 5 * time.Second, 10 * time.Second,
	}
	storageBounds = []time.Duration{
		50 * time.Microsecond, 100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
		time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond, 10 * time.Millisecond,
		25 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 250 * time.Millisecond,
		500 * time.Millisecond, time.Second,
	}
	fetchWaitBounds = []time.Duration{
		time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond, 25 * time.Millisecond,
		50 * time.Millisecond, 100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond,
		time.Second, 2500 * time.Millisecond, 5 * time.Second,
	}
)

// histogram is the mutable side of Histogram; its owner locks it.
type histogram struct {
	bounds []time.Duration
	counts []uint64
	count  uint64
	sum    time.Duration
}

func (h *histogram) observe(d time.Duration) {
	if h.counts == nil {
		h.counts = make([]uint64, len(h.bounds)+1)
	}
	// The first bound >= d (buckets include their upper bound); a scan:
	// there are at most 15.
	i := 0
	for i < len(h.bounds) && h.bounds[i] < d {
		i++
	}
	h.counts[i]++
	h.count++
	h.sum += d
}

func (h *histogram) snapshot() Histogram {
	counts := slices.Clone(h.counts)
	if counts == nil {
		counts = make([]uint64, len(h.bounds)+1)
	}
	return Histogram{Bounds: slices.Clone(h.bounds), Counts: counts, Count: h.count, Sum: h.sum}
}

// maxTrackedPeers bounds the loop's per-peer bookkeeping (fetches waiting
// for an answer): the transport authenticates the cluster, not each node
// ID, so a member could send under many names.
const maxTrackedPeers = 256

// loopStats is what the event loop counts. The loop goroutine alone
// writes it; mu guards what Stats reads.
type loopStats struct {
	mu            sync.Mutex
	leaderChanges uint64
	elections     uint64
	appends       uint64
	appendBytes   uint64
	fwdSent       uint64
	fwdReceived   uint64
	fetchesServed uint64
	// otherLog counts messages naming another log (foreignMessage: the
	// loop's, outside the round's lock).
	otherLog atomic.Uint64
	// rounds counts the loop's rounds (tests: an idle log runs a round
	// only at its core's deadlines, R97).
	rounds atomic.Uint64
	// quota and backlog: the core's counters as of the last round.
	quota     replica.QuotaStats
	backlog   replica.BacklogStats
	quiesce   replica.QuiescenceStats
	commit    histogram
	fetchWait histogram
	// followers: the leader's view of each other voter (nil unless leader).
	followers map[string]*followerTrack
	// leaderLEO is the leader's LEO as of the previous round.
	leaderLEO uint64

	// The loop's own: never read by Stats.
	inited    bool
	proposals map[uint64]proposalMark // by shell proposal ID
	fetches   map[string]fetchMark    // the latest fetch from each peer
	role      replica.Role
	epoch     uint64
	leader    shell.Claim // the last known leader and its epoch
	halted    bool

	errs [numErrKinds]atomic.Uint64
}

// proposalMark remembers a proposal until it resolves.
type proposalMark struct {
	at      time.Time
	records int
	bytes   int
}

// fetchMark remembers the latest fetch from a peer until it is answered.
type fetchMark struct {
	id uint64
	at time.Time
}

// followerTrack is the leader's record of one follower's progress.
type followerTrack struct {
	known          bool
	remoteLEO      uint64
	lastCaughtUp   time.Time
	lastFetch      time.Time
	leoAtLastFetch uint64
}

func (s *loopStats) count(kind int) { s.errs[kind].Add(1) }

// initBounds sets the histograms' buckets; s.mu must be held.
func (s *loopStats) initBounds() {
	if s.commit.bounds == nil {
		s.commit.bounds, s.fetchWait.bounds = commitBounds, fetchWaitBounds
	}
}

// round records one round of the loop: the events it fed the node at now
// and the node's Output.
func (s *loopStats) round(now time.Time, events []shell.Event, out *shell.Output) {
	s.rounds.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.inited {
		s.inited = true
		s.proposals = make(map[uint64]proposalMark)
		s.fetches = make(map[string]fetchMark)
		s.initBounds()
	}
	for i := range events {
		ev := &events[i]
		switch ev.Kind {
		case shell.EventPropose:
			n := 0
			for _, r := range ev.Records {
				n += len(r)
			}
			s.proposals[ev.ID] = proposalMark{at: now, records: len(ev.Records), bytes: n}
		case shell.EventMessage:
			switch b := ev.Message.Body.(type) {
			case *protocol.FetchRequest:
				s.fetchArrived(now, ev.Message.From, b)
			case *protocol.AppendRequest:
				s.fwdReceived++
			}
		}
	}
	for _, r := range out.Resolved {
		m, ok := s.proposals[r.ID]
		if !ok {
			continue
		}
		delete(s.proposals, r.ID)
		s.resolved(now, m, r.Err)
	}
	for _, m := range out.Messages {
		switch b := m.Body.(type) {
		case *protocol.FetchResponse:
			s.fetchesServed++
			if f, ok := s.fetches[m.To]; ok && f.id == b.FetchID {
				s.fetchWait.observe(now.Sub(f.at))
				delete(s.fetches, m.To)
			}
		case *protocol.AppendRequest:
			s.fwdSent++
		}
	}
	if out.Halted != nil && !s.halted {
		s.halted = true
		s.count(errKindHalt)
	}

	st := &out.Status
	s.quota, s.backlog, s.quiesce = st.Quota, st.Backlog, st.Quiescence
	if st.Role == replica.RoleCandidate && (s.role != replica.RoleCandidate || st.Epoch != s.epoch) {
		s.elections++
	}
	if st.LeaderID != "" && (shell.Claim{Leader: st.LeaderID, Epoch: st.Epoch}) != s.leader {
		s.leader = shell.Claim{Leader: st.LeaderID, Epoch: st.Epoch}
		s.leaderChanges++
	}
	switch {
	case st.Role != replica.RoleLeader:
		s.followers = nil
	case s.role != replica.RoleLeader || s.followers == nil:
		// A new leadership: every follower starts as caught up now (as
		// Kafka starts the ISR's), and has this long to show it.
		s.followers = make(map[string]*followerTrack, len(st.Voters))
		fallthrough
	default:
		// The voters in force: a voter added later starts as caught up
		// when it is added (it was, to be added); a removed one goes.
		if !s.tracksVoters(st) {
			s.trackVoters(now, st)
		}
		for v, f := range s.followers {
			f.remoteLEO, f.known = st.RemoteLEO[v]
		}
		s.leaderLEO = st.LEO
	}
	s.role, s.epoch = st.Role, st.Epoch
}

// tracksVoters reports whether the followers tracked are exactly the other
// voters of st.
func (s *loopStats) tracksVoters(st *replica.Status) bool {
	n := 0
	for _, v := range st.Voters {
		if v.ID == st.ID {
			continue
		}
		if _, ok := s.followers[v.ID]; !ok {
			return false
		}
		n++
	}
	return n == len(s.followers)
}

// trackVoters makes the followers tracked the other voters of st: a new
// one starts as caught up now.
func (s *loopStats) trackVoters(now time.Time, st *replica.Status) {
	keep := make(map[string]*followerTrack, len(st.Voters))
	for _, v := range st.Voters {
		if v.ID == st.ID {
			continue
		}
		f := s.followers[v.ID]
		if f == nil {
			f = &followerTrack{lastCaughtUp: now, lastFetch: now}
		}
		keep[v.ID] = f
	}
	s.followers = keep
}

// fetchArrived records a fetch from peer: when it came (for FetchWait)
// and, on the leader, what it says of the follower's progress.
func (s *loopStats) fetchArrived(now time.Time, peer string, b *protocol.FetchRequest) {
	if _, ok := s.fetches[peer]; ok || len(s.fetches) < maxTrackedPeers {
		s.fetches[peer] = fetchMark{id: b.FetchID, at: now}
	}
	f := s.followers[peer]
	if f == nil {
		return
	}
	// Kafka's Replica.updateFetchState: caught up now if the fetch asks
	// for the leader's LEO, or caught up as of the previous fetch if it
	// asks for at least the LEO the leader had then.
	switch {
	case b.FetchOffset >= s.leaderLEO:
		f.lastCaughtUp = now
	case b.FetchOffset >= f.leoAtLastFetch && f.lastFetch.After(f.lastCaughtUp):
		f.lastCaughtUp = f.lastFetch
	}
	f.lastFetch, f.leoAtLastFetch = now, s.leaderLEO
}

// resolved records the outcome of one proposal.
func (s *loopStats) resolved(now time.Time, m proposalMark, err error) {
	if err == nil {
		s.appends += uint64(m.records)
		s.appendBytes += uint64(m.bytes)
		s.commit.observe(now.Sub(m.at))
		return
	}
	var nl *NotLeaderError // escapes (errors.As): only on failures
	switch {
	case errors.Is(err, ErrUnknownOutcome):
		s.count(errKindAppendUnknown)
	case errors.As(err, &nl):
		s.count(errKindAppendNotLeader)
	case errors.Is(err, ErrTooLarge):
		s.count(errKindAppendTooLarge)
	case errors.Is(err, ErrBacklogFull):
		s.count(errKindAppendBacklogFull)
	default:
		s.count(errKindAppendFailed)
	}
}

// fill copies what the loop counted into out, with the followers' lag
// as of now; logStart stands for the remote LEO of a follower not heard
// from.
// foreignMessage counts a message dropped for naming another log.
func (s *loopStats) foreignMessage() { s.otherLog.Add(1) }

func (s *loopStats) fill(out *Stats, now time.Time, logStart uint64) {
	s.mu.Lock()
	s.initBounds()
	out.LeaderChanges = s.leaderChanges
	out.ElectionsStarted = s.elections
	out.Appends, out.AppendBytes = s.appends, s.appendBytes
	out.ForwardedAppendsSent, out.ForwardedAppendsReceived = s.fwdSent, s.fwdReceived
	out.FetchesServed = s.fetchesServed
	out.CatchUpThrottledFetches, out.CatchUpThrottledTime, out.CatchUpBytes = s.quota.Throttled, s.quota.Time, s.quota.Bytes
	out.UncommittedBytes, out.BacklogRefusals = s.backlog.Bytes, s.backlog.Refused
	out.OtherLogMessages = s.otherLog.Load()
	out.QuiescentFetchesSent, out.QuiescentFetchesParked = s.quiesce.Sent, s.quiesce.Parked
	out.CommitLatency = s.commit.snapshot()
	out.FetchWait = s.fetchWait.snapshot()
	for id, f := range s.followers {
		fs := FollowerStats{ID: id, Known: f.known, RemoteLEO: f.remoteLEO}
		if !f.known {
			fs.RemoteLEO = logStart
		}
		if s.leaderLEO > fs.RemoteLEO {
			fs.LagEntries = s.leaderLEO - fs.RemoteLEO
		}
		if fs.LagEntries > 0 || !f.known {
			fs.LagTime = max(0, now.Sub(f.lastCaughtUp))
		}
		out.Followers = append(out.Followers, fs)
	}
	s.mu.Unlock()
	slices.SortFunc(out.Followers, func(a, b FollowerStats) int { return strings.Compare(a.ID, b.ID) })
	if out.Errors == nil {
		out.Errors = make(map[string]uint64, numErrKinds+1)
	}
	for k := range numErrKinds {
		out.Errors[errKindNames[k]] = s.errs[k].Load()
	}
}

// commitStats times the writer's Store.Apply calls; the writer goroutine
// writes it, Stats reads it.
type commitStats struct {
	mu     sync.Mutex
	hist   histogram
	failed uint64
}

func (c *commitStats) observe(d time.Duration, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.hist.bounds == nil {
		c.hist.bounds = storageBounds
	}
	if err != nil {
		c.failed++
		return
	}
	c.hist.observe(d)
}

func (c *commitStats) snapshot() (Histogram, uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.hist.bounds == nil {
		c.hist.bounds = storageBounds
	}
	return c.hist.snapshot(), c.failed
}

// Stats returns a snapshot of the node's counters and gauges (see Stats).
// It never blocks on the node's work: it takes a lock the event loop holds
// for a few microseconds per round, and sizes the data directory's files.
// It works after Close too (the counters then stay as they were).
func (l *Log) Stats() Stats {
	st := l.Status()
	out := Stats{
		NodeID:        st.NodeID,
		Role:          st.Role,
		Epoch:         st.Epoch,
		LeaderID:      st.LeaderID,
		LEO:           st.LEO,
		DurableLEO:    st.DurableLEO,
		HighWatermark: st.HighWatermark,
		ReadableHW:    st.ReadableHW,
		LogStart:      st.LogStart,
		StorageBytes:  dirSize(l.opts.Dir),
		Errors:        make(map[string]uint64, numErrKinds+1),
	}
	l.stats.fill(&out, time.Now(), st.LogStart)
	var writeFailures uint64
	if l.writer != nil {
		out.StorageCommitLatency, writeFailures = l.writer.commits.snapshot()
	} else {
		out.StorageCommitLatency = (&histogram{bounds: storageBounds}).snapshot()
	}
	out.Errors[errKindNames[errKindStorageWrite]] += writeFailures
	if ds, ok := l.store.(interface{ Stats() storage.DirStats }); ok {
		d := ds.Stats()
		out.StorageFsyncs, out.StorageCommits, out.StorageGroupCommits = d.Fsyncs, d.Commits, d.GroupCommits
		out.StorageJournalBytes, out.StorageCheckpoints, out.StorageCheckpointTime = d.JournalBytes, d.Checkpoints, d.CheckpointTime
		out.StorageJournalBatches, out.StorageJournalWaits = d.JournalBatches, d.JournalWaits
	}
	c := &l.compaction
	out.CompactionPasses, out.CompactionSegments, out.CompactionEntriesRemoved = c.passes.Load(), c.segments.Load(), c.removed.Load()
	out.CompactionPassesSkipped = c.skipped.Load()
	out.CompactionBytesRead, out.CompactionBytesFreed = c.bytesRead.Load(), c.bytesFreed.Load()
	out.CompactionLastPass, out.CompactionTime = time.Duration(c.lastNanos.Load()), time.Duration(c.totalNanos.Load())
	out.CompactionPoint = c.point.Load()
	out.Errors[errKindConflict] = 0
	if l.ml != nil {
		out.Errors[errKindConflict] = l.ml.Conflicts()
	}
	return out
}

// dirSize adds up the sizes of the regular files under dir (0 if it
// cannot be read).
func dirSize(dir string) uint64 {
	var n uint64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		if fi, err := d.Info(); err == nil {
			n += uint64(fi.Size())
		}
		return nil
	})
	return n
}
