package replogprom

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/replog-io/replog"
)

// fakeStats is a leader's Stats with one of each kind of value.
func fakeStats() replog.Stats {
	return replog.Stats{
		NodeID: "n1", Role: "leader", Epoch: 3, LeaderID: "n1",
		LEO: 12, DurableLEO: 11, HighWatermark: 10, ReadableHW: 10, LogStart: 0,
		LeaderChanges: 2, ElectionsStarted: 1, Appends: 5, AppendBytes: 40,
		CommitLatency: replog.Histogram{
			Bounds: []time.Duration{time.Millisecond, 10 * time.Millisecond},
			Counts: []uint64{1, 2, 1}, Count: 4, Sum: 1500 * time.Millisecond,
		},
		ForwardedAppendsSent: 0, ForwardedAppendsReceived: 3, FetchesServed: 7,
		FetchWait:            replog.Histogram{Bounds: []time.Duration{time.Second}, Counts: []uint64{2, 0}, Count: 2, Sum: time.Second},
		StorageCommitLatency: replog.Histogram{Bounds: []time.Duration{time.Millisecond}, Counts: []uint64{0, 0}},
		StorageBytes:         32768,
		StorageFsyncs:        12, StorageCommits: 2, StorageGroupCommits: 8, StorageJournalBatches: 8, StorageJournalBytes: 4096, StorageJournalWaits: 3,
		StorageCheckpoints: 2, StorageCheckpointTime: 250 * time.Millisecond,
		CatchUpThrottledFetches: 6, CatchUpThrottledTime: 1500 * time.Millisecond, CatchUpBytes: 1 << 20,
		UncommittedBytes: 4096, BacklogRefusals: 3, OtherLogMessages: 2,
		QuiescentFetchesSent: 7, QuiescentFetchesParked: 9,
		CompactionPasses: 4, CompactionSegments: 3, CompactionEntriesRemoved: 900, CompactionBytesRead: 1 << 20, CompactionBytesFreed: 4096,
		CompactionTime: 2 * time.Second, CompactionLastPass: 500 * time.Millisecond,
		Followers: []replog.FollowerStats{
			{ID: "n2", Known: true, RemoteLEO: 12},
			{ID: "n3", Known: true, RemoteLEO: 9, LagEntries: 3, LagTime: 1500 * time.Millisecond},
		},
		Errors: map[string]uint64{"append_not_leader": 4, "transport_send": 0},
	}
}

func TestCollectorMetrics(t *testing.T) {
	c := newCollector("n1", "", fakeStats)
	want := `
# HELP replog_append_bytes_total Bytes of the records counted by replog_appends_total.
# TYPE replog_append_bytes_total counter
replog_append_bytes_total{log="",node="n1"} 40
# HELP replog_appends_total Records committed through this node's Append and AppendBatch calls.
# TYPE replog_appends_total counter
replog_appends_total{log="",node="n1"} 5
# HELP replog_commit_duration_seconds Time from the node's event loop taking an append to its commit.
# TYPE replog_commit_duration_seconds histogram
replog_commit_duration_seconds_bucket{log="",node="n1",le="0.001"} 1
replog_commit_duration_seconds_bucket{log="",node="n1",le="0.01"} 3
replog_commit_duration_seconds_bucket{log="",node="n1",le="+Inf"} 4
replog_commit_duration_seconds_sum{log="",node="n1"} 1.5
replog_commit_duration_seconds_count{log="",node="n1"} 4
# HELP replog_errors_total Errors by kind (see replog.Stats.Errors).
# TYPE replog_errors_total counter
replog_errors_total{kind="append_not_leader",log="",node="n1"} 4
replog_errors_total{kind="transport_send",log="",node="n1"} 0
# HELP replog_follower_lag_entries On the leader: its LEO minus the follower's, in offsets.
# TYPE replog_follower_lag_entries gauge
replog_follower_lag_entries{follower="n2",log="",node="n1"} 0
replog_follower_lag_entries{follower="n3",log="",node="n1"} 3
# HELP replog_follower_lag_seconds On the leader: how long the follower has not been caught up (0 while it is).
# TYPE replog_follower_lag_seconds gauge
replog_follower_lag_seconds{follower="n2",log="",node="n1"} 0
replog_follower_lag_seconds{follower="n3",log="",node="n1"} 1.5
# HELP replog_has_leader 1 while this node knows a leader (itself included), else 0.
# TYPE replog_has_leader gauge
replog_has_leader{log="",node="n1"} 1
# HELP replog_role 1 for the node's current role, 0 for the others.
# TYPE replog_role gauge
replog_role{log="",node="n1",role="candidate"} 0
replog_role{log="",node="n1",role="closed"} 0
replog_role{log="",node="n1",role="follower"} 0
replog_role{log="",node="n1",role="leader"} 1
replog_role{log="",node="n1",role="observer"} 0
replog_role{log="",node="n1",role="prospective"} 0
# HELP replog_storage_size_bytes Size of the files in the node's data directory.
# TYPE replog_storage_size_bytes gauge
replog_storage_size_bytes{log="",node="n1"} 32768
# HELP replog_storage_fsyncs_total Fsyncs of the data directory's commits and checkpoints (two per bbolt commit, one per journal record and cut).
# TYPE replog_storage_fsyncs_total counter
replog_storage_fsyncs_total{log="",node="n1"} 12
# HELP replog_storage_group_commits_total Commit journal records written: one per durable batch of writes (0 without the journal).
# TYPE replog_storage_group_commits_total counter
replog_storage_group_commits_total{log="",node="n1"} 8
# HELP replog_storage_journal_waits_total Times a batch of writes waited for a checkpoint to make room in a full commit journal.
# TYPE replog_storage_journal_waits_total counter
replog_storage_journal_waits_total{log="",node="n1"} 3
# HELP replog_storage_checkpoint_seconds_total Total time spent in checkpoints.
# TYPE replog_storage_checkpoint_seconds_total counter
replog_storage_checkpoint_seconds_total{log="",node="n1"} 0.25
# HELP replog_catch_up_throttled_fetches_total Fetches of nodes catching up that the leader made wait for its replication quota (Options.CatchUpBytesPerSecond).
# TYPE replog_catch_up_throttled_fetches_total counter
replog_catch_up_throttled_fetches_total{log="",node="n1"} 6
# HELP replog_catch_up_throttled_seconds_total Total time fetches waited for the replication quota.
# TYPE replog_catch_up_throttled_seconds_total counter
replog_catch_up_throttled_seconds_total{log="",node="n1"} 1.5
# HELP replog_catch_up_bytes_total Entry bytes the leader served under the replication quota.
# TYPE replog_catch_up_bytes_total counter
replog_catch_up_bytes_total{log="",node="n1"} 1.048576e+06
# HELP replog_uncommitted_bytes On the leader: bytes of the records it appended and has not committed yet (bounded by Options.MaxUncommittedBytes).
# TYPE replog_uncommitted_bytes gauge
replog_uncommitted_bytes{log="",node="n1"} 4096
# HELP replog_backlog_refusals_total Appends the leader refused for a full uncommitted backlog (each waits and tries again).
# TYPE replog_backlog_refusals_total counter
replog_backlog_refusals_total{log="",node="n1"} 3
# HELP replog_other_log_messages_total Messages dropped because they name another log (a named log's traffic reaching a node that runs this log with Open).
# TYPE replog_other_log_messages_total counter
replog_other_log_messages_total{log="",node="n1"} 2
# HELP replog_quiescent_fetches_sent_total Quiescent fetches this node sent as a caught-up follower (parked without a deadline; the node's heartbeats prove it alive).
# TYPE replog_quiescent_fetches_sent_total counter
replog_quiescent_fetches_sent_total{log="",node="n1"} 7
# HELP replog_quiescent_fetches_parked_total Quiescent fetches this node parked without a deadline as leader.
# TYPE replog_quiescent_fetches_parked_total counter
replog_quiescent_fetches_parked_total{log="",node="n1"} 9
# HELP replog_compaction_entries_removed_total Entries compaction removed (superseded keyed entries, expired tombstones, stored placeholders).
# TYPE replog_compaction_entries_removed_total counter
replog_compaction_entries_removed_total{log="",node="n1"} 900
# HELP replog_compaction_last_pass_seconds Duration of the last compaction pass.
# TYPE replog_compaction_last_pass_seconds gauge
replog_compaction_last_pass_seconds{log="",node="n1"} 0.5
`
	names := []string{"replog_append_bytes_total", "replog_appends_total", "replog_commit_duration_seconds", "replog_errors_total",
		"replog_follower_lag_entries", "replog_follower_lag_seconds", "replog_has_leader", "replog_role", "replog_storage_size_bytes",
		"replog_storage_fsyncs_total", "replog_storage_group_commits_total", "replog_storage_journal_waits_total", "replog_storage_checkpoint_seconds_total",
		"replog_catch_up_throttled_fetches_total", "replog_catch_up_throttled_seconds_total", "replog_catch_up_bytes_total",
		"replog_uncommitted_bytes", "replog_backlog_refusals_total", "replog_other_log_messages_total",
		"replog_quiescent_fetches_sent_total", "replog_quiescent_fetches_parked_total",
		"replog_compaction_entries_removed_total", "replog_compaction_last_pass_seconds"}
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}
	// Every descriptor is used, and nothing is emitted that Describe does
	// not announce (the pedantic registry checks both).
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(mfs) != 45 {
		t.Errorf("gathered %d metric families, want 45 (every descriptor)", len(mfs))
	}
}

// TestCollectorNames: the names pass Prometheus' own lint (units, _total
// on counters, no camel case).
func TestCollectorNames(t *testing.T) {
	problems, err := testutil.CollectAndLint(newCollector("n1", "", fakeStats))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
}

// TestCollectorFollowersVanish: a node that is not the leader exports no
// follower lag, and an unknown role gets a series of its own.
func TestCollectorFollowersVanish(t *testing.T) {
	s := fakeStats()
	s.Role, s.LeaderID, s.Followers = "somethingnew", "", nil
	c := newCollector("n1", "", func() replog.Stats { return s })
	if n := testutil.CollectAndCount(c, "replog_follower_lag_entries", "replog_follower_lag_seconds"); n != 0 {
		t.Errorf("%d follower series on a node that does not lead", n)
	}
	if v := values(t, c)[`replog_has_leader{log="",node="n1"}`]; v != 0 {
		t.Errorf("replog_has_leader = %v with no leader, want 0", v)
	}
	if n := testutil.CollectAndCount(c, "replog_role"); n != len(roles)+1 {
		t.Errorf("%d replog_role series, want %d (the known roles and the new one)", n, len(roles)+1)
	}
}

// values gathers c's gauges and counters as "name{label="value",...}" →
// value (labels sorted by name, as Prometheus sorts them).
func values(t *testing.T, c prometheus.Collector) map[string]float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	return gathered(t, reg)
}

// gathered is values of everything g gathers.
func gathered(t *testing.T, g prometheus.Gatherer) map[string]float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+strconv.Quote(l.GetValue()))
			}
			key := mf.GetName() + "{" + strings.Join(labels, ",") + "}"
			switch {
			case m.GetGauge() != nil:
				out[key] = m.GetGauge().GetValue()
			case m.GetCounter() != nil:
				out[key] = m.GetCounter().GetValue()
			case m.GetHistogram() != nil:
				out[key+"_count"] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}
