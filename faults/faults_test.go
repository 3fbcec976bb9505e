package faults

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var (
	flagDuration  = flag.Duration("faults.duration", 60*time.Second, "how long the nemesis runs in TestFaults")
	flagSeed      = flag.Int64("faults.seed", 0, "nemesis and client seed (0: from the clock, printed)")
	flagNodes     = flag.Int("faults.nodes", 3, "number of voter processes (3 or 5)")
	flagTags      = flag.String("faults.tags", "", "build tags for the node binary (e.g. replog_bug_ack_leader_write)")
	flagRace      = flag.Bool("faults.race", false, "build the node binary with -race")
	flagNemesis   = flag.String("faults.nemesis", "", "comma-separated faults to use (default all): "+faultNames())
	flagExpect    = flag.String("faults.expect", "", "comma-separated anomaly kinds the run must find (for bug-tag runs) instead of none")
	flagAppenders = flag.Int("faults.appenders", 4, "concurrent appenders")
	flagReaders   = flag.Int("faults.readers", 3, "concurrent tailing readers")
	flagFake      = flag.Bool("faults.fake", false, "run the harness's own fake node (internal/fakenode) instead of ./example")
	flagNodeArgs  = flag.String("faults.node-args", "", "extra node flags, space-separated (e.g. -fake-bug-lose with -faults.fake)")
	flagKeep      = flag.Bool("faults.keep", false, "keep the data directory, node logs and history even on success")
	flagFetchTO   = flag.Duration("faults.fetch-timeout", time.Second, "node -fetch-timeout")
	flagElectTO   = flag.Duration("faults.election-timeout", 300*time.Millisecond, "node -election-timeout")
	flagMaxWait   = flag.Duration("faults.fetch-max-wait", 200*time.Millisecond, "node -fetch-max-wait")
)

func faultNames() string {
	var s []string
	for _, f := range sortedKeys(AllFaults) {
		s = append(s, f)
	}
	return strings.Join(s, ",")
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

// TestFaults runs real node processes under the nemesis and checks the
// history: no anomaly (or, with -faults.expect, the expected ones), and
// convergence after the final heal.
func TestFaults(t *testing.T) {
	seed := *flagSeed
	if seed == 0 {
		seed = time.Now().UnixNano() % 1_000_000
	}
	t.Logf("seed %d (rerun: -faults.seed=%d)", seed, seed)

	root, err := os.MkdirTemp("", "replog-faults-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() || *flagKeep {
			t.Logf("kept data, node logs and history in %s", root)
			return
		}
		_ = os.RemoveAll(root)
	})

	ctx, cancel := context.WithTimeout(context.Background(), *flagDuration+5*time.Minute)
	defer cancel()
	mod, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	pkg := "./example"
	if *flagFake {
		pkg = "./faults/internal/fakenode"
	}
	bin, err := BuildNode(ctx, mod, root, pkg, *flagTags, *flagRace)
	if err != nil {
		t.Fatalf("building the example node: %v", err)
	}

	c, err := StartCluster(ctx, ClusterConfig{
		Bin: bin, Root: root, Nodes: *flagNodes,
		FetchTimeout: *flagFetchTO, ElectionTimeout: *flagElectTO, FetchMaxWait: *flagMaxWait,
		AppendTimeout: 3 * time.Second, ExtraArgs: strings.Fields(*flagNodeArgs),
		Logf: t.Logf,
	})
	if err != nil {
		t.Fatalf("starting the cluster: %v", err)
	}
	t.Cleanup(c.Stop)

	rep, err := Run(ctx, c, RunConfig{
		Duration: *flagDuration, Seed: seed, Faults: splitList(*flagNemesis),
		Appenders: *flagAppenders, Readers: *flagReaders,
		AppendTimeout: 5 * time.Second, Retries: 2, ConvergeTimeout: 90 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	c.Stop()

	var sum strings.Builder
	rep.Print(&sum)
	t.Logf("summary (pkg=%s tags=%q args=%q):\n%s", pkg, *flagTags, *flagNodeArgs, sum.String())
	if err := rep.Dump(filepath.Join(root, "history.txt")); err != nil {
		t.Errorf("writing history: %v", err)
	}

	counts := rep.History.Counts()
	if counts[OK] == 0 {
		t.Errorf("no append was acknowledged during the run")
	}
	if !rep.Recovered {
		t.Errorf("no append acknowledged within the deadline after the final heal")
	}
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
