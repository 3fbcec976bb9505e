package replogprom

import (
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/replog-io/replog"
)

// roles are the values of replog_role's role label: every role a node can
// be in, so that a role's series exists (at 0) before the node takes it.
var roles = []replog.Role{replog.RoleLeader, replog.RoleFollower, replog.RoleProspective,
	replog.RoleCandidate, replog.RoleObserver, replog.RoleClosed}

// Collector is a prometheus.Collector for one replog.Log. It reads
// Log.Stats once per scrape; it keeps no state of its own. Safe for
// concurrent use.
type Collector struct {
	stats func() replog.Stats
	m     *metrics
}

// metrics are the descriptors of one Log's series, with its node and
// log labels (constant) and each series' own (role, kind, follower).
type metrics struct {
	leo, durableLEO, hw, readableHW, logStart, epoch, role, hasLeader, storageBytes *prometheus.Desc

	leaderChanges, elections, appends, appendBytes, fwdSent, fwdReceived, fetchesServed, errors *prometheus.Desc

	commit, fetchWait, storageCommit *prometheus.Desc

	storageFsyncs, storageCommits, storageGroupCommits, storageJournalBatches, storageJournalBytes, storageJournalWaits, storageCheckpoints, storageCheckpointSeconds *prometheus.Desc

	catchUpThrottled, catchUpThrottledSeconds, catchUpBytes, uncommittedBytes, backlogRefusals, otherLogMessages *prometheus.Desc
	quiescentSent, quiescentParked                                                                               *prometheus.Desc

	compactionPasses, compactionSegments, compactionRemoved, compactionBytesRead, compactionBytesFreed, compactionSeconds, compactionLastSeconds *prometheus.Desc

	lagEntries, lagSeconds *prometheus.Desc
}

var _ prometheus.Collector = (*Collector)(nil)

// ErrInvalidOptions is wrapped by the errors of CollectorOptions.Validate.
var ErrInvalidOptions = errors.New("replogprom: invalid options")

// CollectorOptions configures NewCollectorWith. The zero value is what
// NewCollector uses.
type CollectorOptions struct {
	// Log is the value of every series' log label: a name that tells
	// apart the Logs of one process that share a node ID (a service that
	// opens one Log per data set, each a cluster of its own), so that
	// their collectors can share a registry. Any UTF-8 string. Default ""
	// (Prometheus stores a series with an empty label as one without it,
	// so a process with one Log per node ID loses nothing by leaving it
	// out).
	Log string
}

// Validate reports an invalid field, naming it, as an error wrapping
// ErrInvalidOptions. It does not modify o.
func (o CollectorOptions) Validate() error {
	if !utf8.ValidString(o.Log) {
		return fmt.Errorf("%w: Log %q is not valid UTF-8 (Prometheus label values must be)", ErrInvalidOptions, o.Log)
	}
	return nil
}

// NewCollector returns a Collector of l's metrics (see the package doc),
// labelled with l's node ID and an empty log label: NewCollectorWith with
// zero CollectorOptions. Register it once per Log; two Logs with
// different node IDs share a registry as they are, two with one node ID
// need a Log label each (NewCollectorWith).
func NewCollector(l *replog.Log) *Collector {
	return newCollector(l.Status().NodeID, "", l.Stats)
}

// NewCollectorWith returns a Collector of l's metrics labelled with l's
// node ID and o.Log. Errors: o.Validate's (ErrInvalidOptions). Registering
// two collectors with the same node ID and Log in one registry fails with
// a prometheus.AlreadyRegisteredError.
func NewCollectorWith(l *replog.Log, o CollectorOptions) (*Collector, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	return newCollector(l.Status().NodeID, o.Log, l.Stats), nil
}

// newCollector is NewCollectorWith for any source of Stats.
func newCollector(nodeID, log string, stats func() replog.Stats) *Collector {
	// Both labels are on every series, log even when empty: a registry
	// refuses two descriptors of one name with different label names, so
	// a collector with a log name and one without could not share it.
	return &Collector{stats: stats, m: newMetrics(prometheus.Labels{"node": nodeID, "log": log})}
}

// newMetrics makes a Log's descriptors with the constant labels given.
func newMetrics(labels prometheus.Labels) *metrics {
	d := func(name, help string, variable ...string) *prometheus.Desc {
		return prometheus.NewDesc("replog_"+name, help, variable, labels)
	}
	return &metrics{

		leo:          d("log_end_offset", "Log end offset (LEO): the offset the next entry appended here will take."),
		durableLEO:   d("durable_log_end_offset", "End of the log this node holds durably (fsynced)."),
		hw:           d("high_watermark", "High watermark: offsets below it are committed."),
		readableHW:   d("readable_high_watermark", "Offsets below it are committed and stored here: readers on this node see up to it."),
		logStart:     d("log_start_offset", "First offset still in the log."),
		epoch:        d("epoch", "Leader epoch this node is in."),
		role:         d("role", "1 for the node's current role, 0 for the others.", "role"),
		hasLeader:    d("has_leader", "1 while this node knows a leader (itself included), else 0."),
		storageBytes: d("storage_size_bytes", "Size of the files in the node's data directory."),

		leaderChanges: d("leader_changes_total", "Times this node learned of a new leader (a leader and epoch it had not followed before)."),
		elections:     d("elections_started_total", "Vote rounds this node started as a candidate."),
		appends:       d("appends_total", "Records committed through this node's Append and AppendBatch calls."),
		appendBytes:   d("append_bytes_total", "Bytes of the records counted by replog_appends_total."),
		fwdSent:       d("forwarded_appends_sent_total", "Append requests this node forwarded to the leader."),
		fwdReceived:   d("forwarded_appends_received_total", "Append requests this node received from followers."),
		fetchesServed: d("fetches_served_total", "Fetch responses this node sent."),
		errors:        d("errors_total", "Errors by kind (see replog.Stats.Errors).", "kind"),

		commit:        d("commit_duration_seconds", "Time from the node's event loop taking an append to its commit."),
		fetchWait:     d("fetch_wait_seconds", "Time a fetch waited at this node before its answer (parked fetches wait up to FetchMaxWait)."),
		storageCommit: d("storage_commit_duration_seconds", "Time to make one batch of writes durable: a bbolt transaction and its fsyncs."),

		storageFsyncs:            d("storage_fsyncs_total", "Fsyncs of the data directory's commits and checkpoints (two per bbolt commit, one per journal record and cut)."),
		storageCommits:           d("storage_bolt_commits_total", "Transactions committed to the bbolt segment files."),
		storageGroupCommits:      d("storage_group_commits_total", "Commit journal records written: one per durable batch of writes (0 without the journal)."),
		storageJournalBatches:    d("storage_journal_batches_total", "This node's batches of writes in the commit journal's records (a record holds every batch waiting for its round)."),
		storageJournalBytes:      d("storage_journal_bytes_total", "Bytes written to the commit journal's records."),
		storageJournalWaits:      d("storage_journal_waits_total", "Times a batch of writes waited for a checkpoint to make room in a full commit journal."),
		storageCheckpoints:       d("storage_checkpoints_total", "Checkpoints: commit journal writes moved into the bbolt segments."),
		compactionPasses:         d("compaction_passes_total", "Compaction passes that found a sealed segment to look at (Options.Compaction)."),
		compactionSegments:       d("compaction_segments_total", "Sealed segments a compaction pass rewrote."),
		compactionRemoved:        d("compaction_entries_removed_total", "Entries compaction removed (superseded keyed entries, expired tombstones, stored placeholders)."),
		compactionBytesRead:      d("compaction_read_bytes_total", "Entry bytes compaction passes read."),
		compactionBytesFreed:     d("compaction_freed_bytes_total", "Bytes the segment files rewritten by compaction shrank by."),
		compactionSeconds:        d("compaction_seconds_total", "Time spent in compaction passes, throttling included."),
		compactionLastSeconds:    d("compaction_last_pass_seconds", "Duration of the last compaction pass."),
		storageCheckpointSeconds: d("storage_checkpoint_seconds_total", "Total time spent in checkpoints."),

		catchUpThrottled:        d("catch_up_throttled_fetches_total", "Fetches of nodes catching up that the leader made wait for its replication quota (Options.CatchUpBytesPerSecond)."),
		catchUpThrottledSeconds: d("catch_up_throttled_seconds_total", "Total time fetches waited for the replication quota."),
		catchUpBytes:            d("catch_up_bytes_total", "Entry bytes the leader served under the replication quota."),
		uncommittedBytes:        d("uncommitted_bytes", "On the leader: bytes of the records it appended and has not committed yet (bounded by Options.MaxUncommittedBytes)."),
		backlogRefusals:         d("backlog_refusals_total", "Appends the leader refused for a full uncommitted backlog (each waits and tries again)."),
		quiescentSent:           d("quiescent_fetches_sent_total", "Quiescent fetches this node sent as a caught-up follower (parked without a deadline; the node's heartbeats prove it alive)."),
		quiescentParked:         d("quiescent_fetches_parked_total", "Quiescent fetches this node parked without a deadline as leader."),
		otherLogMessages:        d("other_log_messages_total", "Messages dropped because they name another log (a named log's traffic reaching a node that runs this log with Open)."),

		lagEntries: d("follower_lag_entries", "On the leader: its LEO minus the follower's, in offsets.", "follower"),
		lagSeconds: d("follower_lag_seconds", "On the leader: how long the follower has not been caught up (0 while it is).", "follower"),
	}
}

// Describe sends the descriptors of every metric the Collector may emit.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) { c.m.describe(ch) }

// Collect reads the node's Stats and sends its metrics.
func (c *Collector) Collect(ch chan<- prometheus.Metric) { c.m.collect(ch, c.stats()) }

// describe sends every descriptor of m.
func (c *metrics) describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		c.leo, c.durableLEO, c.hw, c.readableHW, c.logStart, c.epoch, c.role, c.hasLeader, c.storageBytes,
		c.leaderChanges, c.elections, c.appends, c.appendBytes, c.fwdSent, c.fwdReceived, c.fetchesServed, c.errors,
		c.commit, c.fetchWait, c.storageCommit, c.lagEntries, c.lagSeconds,
		c.storageFsyncs, c.storageCommits, c.storageGroupCommits, c.storageJournalBatches, c.storageJournalBytes, c.storageJournalWaits, c.storageCheckpoints, c.storageCheckpointSeconds,
		c.compactionPasses, c.compactionSegments, c.compactionRemoved, c.compactionBytesRead, c.compactionBytesFreed, c.compactionSeconds, c.compactionLastSeconds,
		c.catchUpThrottled, c.catchUpThrottledSeconds, c.catchUpBytes, c.uncommittedBytes, c.backlogRefusals, c.otherLogMessages,
		c.quiescentSent, c.quiescentParked,
	} {
		ch <- d
	}
}

// collect sends the metrics of s.
func (c *metrics) collect(ch chan<- prometheus.Metric, s replog.Stats) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	seconds := func(d *prometheus.Desc, v time.Duration) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v.Seconds())
	}
	gauge(c.leo, float64(s.LEO))
	gauge(c.durableLEO, float64(s.DurableLEO))
	gauge(c.hw, float64(s.HighWatermark))
	gauge(c.readableHW, float64(s.ReadableHW))
	gauge(c.logStart, float64(s.LogStart))
	gauge(c.epoch, float64(s.Epoch))
	known := false
	for _, r := range roles {
		v := 0.0
		if s.Role == r {
			v, known = 1, true
		}
		gauge(c.role, v, string(r))
	}
	if !known && s.Role != "" {
		gauge(c.role, 1, string(s.Role))
	}
	gauge(c.hasLeader, boolValue(s.LeaderID != ""))
	gauge(c.storageBytes, float64(s.StorageBytes))

	counter(c.leaderChanges, s.LeaderChanges)
	counter(c.elections, s.ElectionsStarted)
	counter(c.appends, s.Appends)
	counter(c.appendBytes, s.AppendBytes)
	counter(c.fwdSent, s.ForwardedAppendsSent)
	counter(c.fwdReceived, s.ForwardedAppendsReceived)
	counter(c.fetchesServed, s.FetchesServed)
	counter(c.storageFsyncs, s.StorageFsyncs)
	counter(c.storageCommits, s.StorageCommits)
	counter(c.storageGroupCommits, s.StorageGroupCommits)
	counter(c.storageJournalBatches, s.StorageJournalBatches)
	counter(c.storageJournalBytes, s.StorageJournalBytes)
	counter(c.storageJournalWaits, s.StorageJournalWaits)
	counter(c.storageCheckpoints, s.StorageCheckpoints)
	seconds(c.storageCheckpointSeconds, s.StorageCheckpointTime)
	counter(c.compactionPasses, s.CompactionPasses)
	counter(c.compactionSegments, s.CompactionSegments)
	counter(c.compactionRemoved, s.CompactionEntriesRemoved)
	counter(c.compactionBytesRead, s.CompactionBytesRead)
	counter(c.compactionBytesFreed, s.CompactionBytesFreed)
	seconds(c.compactionSeconds, s.CompactionTime)
	gauge(c.compactionLastSeconds, s.CompactionLastPass.Seconds())
	counter(c.catchUpThrottled, s.CatchUpThrottledFetches)
	seconds(c.catchUpThrottledSeconds, s.CatchUpThrottledTime)
	counter(c.catchUpBytes, s.CatchUpBytes)
	gauge(c.uncommittedBytes, float64(s.UncommittedBytes))
	counter(c.backlogRefusals, s.BacklogRefusals)
	counter(c.otherLogMessages, s.OtherLogMessages)
	counter(c.quiescentSent, s.QuiescentFetchesSent)
	counter(c.quiescentParked, s.QuiescentFetchesParked)
	for kind, n := range s.Errors {
		counter(c.errors, n, kind)
	}

	ch <- histogram(c.commit, s.CommitLatency)
	ch <- histogram(c.fetchWait, s.FetchWait)
	ch <- histogram(c.storageCommit, s.StorageCommitLatency)

	for _, f := range s.Followers {
		gauge(c.lagEntries, float64(f.LagEntries), f.ID)
		gauge(c.lagSeconds, f.LagTime.Seconds(), f.ID)
	}
}

// histogram turns a replog.Histogram (per-bucket counts) into a constant
// Prometheus histogram (cumulative counts; the last, above every bound,
// is the +Inf bucket, which Count stands for).
func histogram(d *prometheus.Desc, h replog.Histogram) prometheus.Metric {
	buckets := make(map[float64]uint64, len(h.Bounds))
	var cum uint64
	for i, b := range h.Bounds {
		if i < len(h.Counts) {
			cum += h.Counts[i]
		}
		buckets[b.Seconds()] = cum
	}
	return prometheus.MustNewConstHistogram(d, h.Count, h.Sum.Seconds(), buckets)
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
