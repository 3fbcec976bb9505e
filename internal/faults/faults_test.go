package faults

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var (
	flagDuration  = flag.Duration("faults.duration", 45*time.Second, "how long the nemesis runs in TestFaults")
	flagSeed      = flag.Int64("faults.seed", 0, "nemesis and client seed (0: from the clock, printed)")
	flagNodes     = flag.Int("faults.nodes", 3, "number of voter processes (3 or 5)")
	flagTags      = flag.String("faults.tags", "", "build tags for the node binary (e.g. replog_bug_ack_leader_write)")
	flagRace      = flag.Bool("faults.race", false, "build the node binary with -race")
	flagNemesis   = flag.String("faults.nemesis", "", "comma-separated faults to use (default all): "+faultNames())
	flagExpect    = flag.String("faults.expect", "", "comma-separated anomaly kinds the run must find (for bug-tag runs) instead of none")
	flagAppenders = flag.Int("faults.appenders", 8, "concurrent appenders")
	flagReaders   = flag.Int("faults.readers", 3, "concurrent tailing readers")
	flagFake      = flag.Bool("faults.fake", false, "run the harness's own fake node (internal/fakenode) instead of ./example")
	flagNodeArgs  = flag.String("faults.node-args", "", "extra node flags, space-separated (e.g. -fake-bug-lose with -faults.fake)")
	flagConc      = flag.Int("faults.concurrency", 1, "how many nemesis faults may be in force at once")
	flagGossip    = flag.Bool("faults.gossip", false, "turn gossip on (not proxied: the nemesis then only kills and pauses)")
	flagResults   = flag.String("faults.results", "", "append one JSON line per run with its figures to this file")
	flagObservers = flag.Int("faults.observers", 0, "number of observer (non-voting) nodes besides the voters")
	flagKeep      = flag.Bool("faults.keep", false, "keep the data directory, node logs and history even on success")
	flagFetchTO   = flag.Duration("faults.fetch-timeout", time.Second, "node -fetch-timeout")
	flagElectTO   = flag.Duration("faults.election-timeout", 300*time.Millisecond, "node -election-timeout")
	flagMaxWait   = flag.Duration("faults.fetch-max-wait", 200*time.Millisecond, "node -fetch-max-wait")
	flagIdem      = flag.Bool("faults.idempotent", true, "appends carry an Idempotency-Key and are retried with it until acknowledged; a duplicate is then a violation (false: 2 retries without a key, duplicates after an unknown outcome tolerated; always false with -faults.fake)")

	// TestRetentionFaults.
	flagSegment     = flag.Int64("faults.segment-bytes", 256<<10, "TestRetentionFaults: node -segment-bytes (segments roll every second or so)")
	flagRetBytes    = flag.Int64("faults.retention-bytes", 1<<20, "TestRetentionFaults: node -retention-bytes")
	flagRetAge      = flag.Duration("faults.retention-age", 10*time.Second, "TestRetentionFaults: node -retention-age")
	flagDeleteEvery = flag.Duration("faults.delete-every", 2*time.Second, "TestRetentionFaults: a POST /delete-before to a random node about this often (0: none)")
	flagWipeEvery   = flag.Duration("faults.wipe-every", 15*time.Second, "TestRetentionFaults: wipe an observer's data directory and restart it empty this often (0: only when the schedule draws wipe-observer)")
)

// retentionDuration is TestRetentionFaults' nemesis time unless
// -faults.duration is given: short, because it runs beside TestFaults in
// the default run.
const retentionDuration = 30 * time.Second

func faultNames() string {
	return strings.Join(sortedKeys(AllFaults), ",")
}

func splitList(s string) []string {
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}

// runOpts is one fault run's setup.
type runOpts struct {
	pkg, tags string
	race      bool
	nodes     int
	observers int
	nodeArgs  []string
	// observerArgs are added to the observers' command lines only.
	observerArgs []string
	gossip       bool
	// directLinks connects the nodes without proxies
	// (ClusterConfig.DirectLinks): no link faults then.
	directLinks bool
	cfg         RunConfig
	keep        bool
	logEvents   bool
	// fetchTimeout, electionTimeout, fetchMaxWait are the nodes' timings
	// (zero: the -faults.* flags').
	fetchTimeout, electionTimeout, fetchMaxWait time.Duration
	// diskStall, if set, builds the nodes with DiskStallTag and is how
	// long each Cluster.StallDisk stalls (ClusterConfig.DiskStall).
	diskStall time.Duration
	// kvEntries: the run writes the example's /kv/ too
	// (ClusterConfig.KVEntries).
	kvEntries bool
	// ready, if set, runs after the cluster started and before the
	// workload, and fails the test on error (e.g. waiting for named logs).
	ready func(context.Context, *Cluster) error
}

// buildTags are the node binary's build tags: o.tags, and DiskStallTag
// for a run that stalls disks.
func (o runOpts) buildTags() string {
	if o.diskStall > 0 {
		return strings.Join(append(splitList(o.tags), DiskStallTag), ",")
	}
	return o.tags
}

// faultRun builds the node binary, starts the cluster (stopped by
// t.Cleanup even if the test fails), runs the workload under the nemesis
// and returns the report; data, node logs and the history dump are kept
// in a temp dir when the test fails.
func faultRun(t *testing.T, o runOpts) *Report {
	t.Helper()
	// Build, convergence and the final checks need a few minutes on top of
	// the nemesis: refuse to start a run that go test would kill midway
	// (its nodes would be killed too, but nothing would be reported).
	margin := o.cfg.ConvergeTimeout + time.Minute
	if deadline, ok := t.Deadline(); ok && time.Until(deadline) < o.cfg.Duration+margin {
		t.Fatalf("a %v run needs about %v more, but go test's -timeout leaves %v: pass -timeout 0 or a larger one",
			o.cfg.Duration, margin, time.Until(deadline).Round(time.Second))
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.cfg.Duration+5*time.Minute)
	defer cancel()
	c, root, rev := startRunCluster(ctx, t, o)
	if o.ready != nil {
		if err := o.ready(ctx, c); err != nil {
			t.Fatal(err)
		}
	}

	rep, err := Run(ctx, c, o.cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.Stop()
	if counts, examples := c.LogErrors(10); len(counts) > 0 {
		t.Logf("node log lines at ERROR level, panics, data races: %v; e.g.\n  %s", counts, strings.Join(examples, "\n  "))
		for _, e := range examples {
			if strings.Contains(e, "DATA RACE") {
				t.Errorf("a node reported a data race (see its log)")
				break
			}
		}
	}

	var sum strings.Builder
	rep.Print(&sum)
	t.Logf("summary (pkg=%s tags=%q args=%q):\n%s", o.pkg, o.buildTags(), o.nodeArgs, sum.String())
	if err := rep.Dump(filepath.Join(root, "history.txt")); err != nil {
		t.Errorf("writing history: %v", err)
	}
	if *flagResults != "" {
		sum := rep.Summarize(o.buildTags())
		sum.Revision, sum.Pkg, sum.Args = rev, o.pkg, o.nodeArgs
		line, _ := json.Marshal(sum)
		f, err := os.OpenFile(*flagResults, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err == nil {
			_, err = f.Write(append(line, '\n'))
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			t.Errorf("writing results: %v", err)
		}
	}
	if rep.History.Counts()[OK] == 0 {
		t.Errorf("no append was acknowledged during the run")
	}
	if !rep.Recovered {
		t.Errorf("no append acknowledged within the deadline after the final heal")
	}
	if f := rep.Nemesis.ReplaceFailures; len(f) > 0 && len(splitList(*flagExpect)) == 0 {
		t.Errorf("%d wiped voters were not made voters again at their new directory within %v: %v", len(f), ReplaceTimeout, f)
	}
	if len(rep.Crashes) > 0 {
		t.Errorf("%d node processes exited on their own (panic or fatal error): %v", len(rep.Crashes), rep.Crashes)
	}
	return rep
}

// startRunCluster builds the node binary and starts o's cluster in a
// temp dir (kept, and named, if tb fails or o.keep), stopped by
// tb.Cleanup; it returns the cluster, the temp dir and the binary's
// revision.
func startRunCluster(ctx context.Context, tb testing.TB, o runOpts) (*Cluster, string, string) {
	tb.Helper()
	root, err := os.MkdirTemp("", "replog-faults-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if tb.Failed() || o.keep {
			tb.Logf("kept data, node logs and history in %s", root)
			return
		}
		_ = os.RemoveAll(root)
	})
	mod, err := ModuleRoot()
	if err != nil {
		tb.Fatal(err)
	}
	bin, err := BuildNode(ctx, mod, root, o.pkg, o.buildTags(), o.race)
	if err != nil {
		tb.Fatalf("building the node: %v", err)
	}
	rev := BinaryRevision(bin)
	tb.Logf("node binary %s built from %s", o.pkg, rev)
	logf := func(string, ...any) {}
	if o.logEvents {
		logf = tb.Logf
	}
	or := func(d time.Duration, flag *time.Duration) time.Duration {
		if d != 0 {
			return d
		}
		return *flag
	}
	c, err := StartCluster(ctx, ClusterConfig{
		Bin: bin, Root: root, Nodes: o.nodes, Observers: o.observers,
		FetchTimeout: or(o.fetchTimeout, flagFetchTO), ElectionTimeout: or(o.electionTimeout, flagElectTO), FetchMaxWait: or(o.fetchMaxWait, flagMaxWait),
		AppendTimeout: 3 * time.Second, ExtraArgs: o.nodeArgs, ObserverArgs: o.observerArgs, Gossip: o.gossip,
		DirectLinks: o.directLinks, DiskStall: o.diskStall, KVEntries: o.kvEntries,
		Logf: logf,
	})
	if err != nil {
		tb.Fatalf("starting the cluster: %v", err)
	}
	tb.Cleanup(c.Stop)
	return c, root, rev
}

func seedFlag(t *testing.T) int64 {
	seed := *flagSeed
	if seed == 0 {
		seed = time.Now().UnixNano() % 1_000_000
	}
	t.Logf("seed %d (rerun: -faults.seed=%d)", seed, seed)
	return seed
}

// TestFaults runs real node processes under the nemesis and checks the
// history: no violation (or, with -faults.expect, the expected anomalies),
// and convergence after the final heal. It runs beside
// TestRetentionFaults.
func TestFaults(t *testing.T) {
	t.Parallel()
	rep := faultRun(t, testRunOpts(t))
	checkRun(t, rep)
}

// TestRetentionFaults is TestFaults with retention small enough that
// segments roll and drop all through the run: -segment-bytes 256 KiB,
// -retention-bytes 1 MiB and -retention-age 10s on every node, a deleter
// POSTing /delete-before to random nodes at random offsets every ~2s,
// readers that lag now and then (up to 6s, so that retention overtakes
// them and they resume from the log start), and at least one observer, wiped (data directory deleted) and restarted
// empty every 15s besides the schedule's wipe-observer faults, and the
// default schedule's voter wipes (a wiped voter resets to the leader's log
// start, R53). The checker accepts what is missing below a node's log start, and nothing
// else. It runs for 30s beside TestFaults; -faults.duration sets a longer
// run (go test ./internal/faults -run TestRetentionFaults -faults.duration=10m
// -timeout 0 -v).
func TestRetentionFaults(t *testing.T) {
	t.Parallel()
	o := testRunOpts(t)
	o.cfg.Duration = retentionDuration
	flag.Visit(func(f *flag.Flag) {
		if f.Name == "faults.duration" {
			o.cfg.Duration = *flagDuration
		}
	})
	o.observers = max(o.observers, 1)
	o.nodeArgs = append(o.nodeArgs,
		"-segment-bytes", fmt.Sprint(*flagSegment), "-retention-bytes", fmt.Sprint(*flagRetBytes),
		"-retention-age", flagRetAge.String(), "-delete-timeout", "3s")
	o.cfg.DeleteEvery, o.cfg.WipeEvery, o.cfg.DiskEvery = *flagDeleteEvery, *flagWipeEvery, time.Second
	o.cfg.ReaderLag = 6 * time.Second // retention keeps a few seconds of appends
	rep := faultRun(t, o)
	checkRun(t, rep)
	if len(splitList(*flagExpect)) > 0 {
		return
	}
	// The run did what it is for: segments dropped (log starts moved on
	// every node) and an observer was wiped; both are needed for the
	// checker's verdict to mean anything.
	for node, start := range rep.Retention.LogStarts {
		if start == 0 {
			t.Errorf("%s's log start never moved: retention deleted nothing there", node)
		}
	}
	if o.cfg.WipeEvery > 0 && o.cfg.WipeEvery < o.cfg.Duration && rep.Nemesis.Wipes == 0 {
		t.Errorf("no observer was wiped")
	}
}

// testRunOpts is the run the flags ask for.
func testRunOpts(t *testing.T) runOpts {
	pkg := "./example"
	if *flagFake {
		pkg = "./internal/faults/internal/fakenode"
	}
	faults := splitList(*flagNemesis)
	if *flagGossip && len(faults) == 0 {
		faults = ProcessFaults
	}
	return runOpts{
		gossip: *flagGossip, observers: *flagObservers,
		pkg: pkg, tags: *flagTags, race: *flagRace, nodes: *flagNodes,
		nodeArgs: strings.Fields(*flagNodeArgs), keep: *flagKeep, logEvents: true,
		cfg: RunConfig{
			Duration: *flagDuration, Seed: seedFlag(t), Faults: faults,
			NemesisConcurrency: *flagConc,
			Appenders:          *flagAppenders, Readers: *flagReaders,
			AppendTimeout: 5 * time.Second, Retries: 2, ConvergeTimeout: 90 * time.Second,
			Idempotent: *flagIdem && !*flagFake, // the fake node ignores the key
		},
	}
}

// checkRun fails t unless the run found no violation and converged (or,
// with -faults.expect, found the expected anomalies).
func checkRun(t *testing.T, rep *Report) {
	t.Helper()
	if expect := splitList(*flagExpect); len(expect) > 0 {
		for _, k := range expect {
			if rep.Result.Counts[k] == 0 {
				t.Errorf("expected %s anomalies with tags %q, found none", k, *flagTags)
			}
		}
		return
	}
	if !rep.Converged {
		t.Errorf("nodes did not converge: %v", rep.ConvergeErr)
	}
	if !rep.Result.OK() {
		t.Errorf("checker found %d violations: %s", rep.Result.Violations(), rep.Result.Summary())
	}
}

// TestHarnessCatchesLostWrites runs the whole pipeline against the fake
// node with its deliberate bug (the leader acknowledges before its write
// is durable or committed) under a nemesis that isolates and kills the
// leader: the checker must report lost writes. This keeps the harness
// honest independently of replog's own bug tags.
func TestHarnessCatchesLostWrites(t *testing.T) {
	rep := faultRun(t, runOpts{
		pkg: "./internal/faults/internal/fakenode", nodes: 3, nodeArgs: []string{"-fake-bug-lose"}, logEvents: true,
		cfg: RunConfig{
			Duration: 6 * time.Second, Seed: 1, Faults: []string{FaultIsolateKillLeader},
			Appenders: 3, Readers: 2, AppendTimeout: 5 * time.Second, Retries: 2,
			ConvergeTimeout: 10 * time.Second,
		},
	})
	if rep.Result.Counts[LostWrite] == 0 {
		t.Errorf("the fake node's lost writes went unnoticed: %s", rep.Result.Summary())
	}
	if rep.Result.OK() {
		t.Errorf("a run with lost writes passed the checker")
	}
}
