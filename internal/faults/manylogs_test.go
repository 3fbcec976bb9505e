package faults

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"testing"
	"time"
)

var (
	flagManyLogsDuration = flag.Duration("faults.manylogs-duration", 40*time.Second, "TestManyLogsUnderFaults: how long the nemesis runs")
	flagManyLogs         = flag.Int("faults.logs", 16, "TestManyLogsUnderFaults: named logs per node (the example's -logs)")
	flagLogAppenders     = flag.Int("faults.log-appenders", 2, "TestManyLogsUnderFaults: appenders per named log")
	flagLogReaders       = flag.Int("faults.log-readers", 1, "TestManyLogsUnderFaults: tailing readers per named log")
)

// TestManyLogsUnderFaults runs 3 example nodes with -logs 16 (log-1..log-16
// beside the default log, all sharing each node's process, connections
// and journal) under the whole nemesis (kills, pauses, partitions, wipes),
// with appenders and a tailing reader on every named log as well as the
// default log's workload, and checks each log's history on its own with
// the checker: acknowledged appends present once, at one offset on every
// node, no anomaly, and convergence after the final heal. Then, as a
// positive control, one log's history checked against another log's
// final logs must fail: the per-log check compares what it is given.
// -faults.manylogs-duration sets a longer run (go test ./internal/faults
// -run TestManyLogsUnderFaults -v -timeout 0 -faults.manylogs-duration=10m).
func TestManyLogsUnderFaults(t *testing.T) {
	t.Parallel()
	if *flagFake {
		t.Fatal("the fake node serves one log: run TestManyLogsUnderFaults without -faults.fake")
	}
	o := testRunOpts(t)
	o.cfg.Duration = *flagManyLogsDuration
	o.nodes = 3
	o.nodeArgs = append(o.nodeArgs, "-logs", fmt.Sprint(*flagManyLogs))
	o.cfg.Appenders, o.cfg.Readers = 4, 2
	o.cfg.LogAppenders, o.cfg.LogReaders = *flagLogAppenders, *flagLogReaders
	// A wiped node loses every log's files at once: make sure a run
	// holds one even when the random schedule draws none.
	o.cfg.MinVoterWipes = 1
	for i := 1; i <= *flagManyLogs; i++ {
		o.cfg.Logs = append(o.cfg.Logs, fmt.Sprintf("log-%d", i))
	}
	o.ready = func(ctx context.Context, c *Cluster) error { return waitLogs(ctx, c, o.cfg.Logs, time.Minute) }
	rep := faultRun(t, o)
	checkRun(t, rep)
	if len(rep.Logs) != len(o.cfg.Logs) {
		t.Fatalf("%d named logs reported, want %d", len(rep.Logs), len(o.cfg.Logs))
	}
	nm := rep.Nemesis
	t.Logf("faults (every one hit all %d logs of a node): kills=%d pauses=%d partitions=%d voter wipes=%d per fault %v",
		len(o.cfg.Logs)+1, nm.Kills, nm.Pauses, nm.Partitions, nm.VoterWipes, nm.PerFault)
	expect := splitList(*flagExpect)
	for i := range rep.Logs {
		l := &rep.Logs[i]
		var b strings.Builder
		l.Print(&b)
		t.Log(strings.TrimSpace(b.String()))
		if l.History.Counts()[OK] == 0 {
			t.Errorf("log %s: no append was acknowledged", l.Name)
		}
		if len(expect) > 0 {
			continue
		}
		if !l.Recovered {
			t.Errorf("log %s: no append acknowledged within the deadline after the final heal", l.Name)
		}
		if !l.Converged {
			t.Errorf("log %s: nodes did not converge: %v", l.Name, l.ConvergeErr)
		}
		if !l.Result.OK() {
			t.Errorf("log %s: checker found %d violations: %s", l.Name, l.Result.Violations(), l.Result.Summary())
		}
	}
	for _, k := range expect {
		found := 0
		for _, l := range rep.Logs {
			found += l.Result.Counts[k]
		}
		if found == 0 {
			t.Errorf("expected %s anomalies in the named logs with tags %q, found none", k, *flagTags)
		}
	}

	// Positive control: log A's appends and reads against log B's final
	// logs. B holds none of A's payloads, so every acknowledged append of
	// A is a lost write there.
	if len(rep.Logs) >= 2 {
		a, b := rep.Logs[0], rep.Logs[1]
		res := Check(a.History.Ops, a.History.Reads, b.Finals)
		if res.OK() || res.Counts[LostWrite] == 0 {
			t.Errorf("log %s's history checked against log %s's final logs passed (%s): the per-log check has no teeth", a.Name, b.Name, res.Summary())
		} else {
			t.Logf("positive control: log %s's history against log %s's final logs: %s", a.Name, b.Name, res.Summary())
		}
	}
}

// waitLogs waits until every node serves each of names (its
// /logs/NAME/status answers), or timeout passes: the nodes create their
// named logs after they start.
func waitLogs(ctx context.Context, c *Cluster, names []string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for _, name := range names {
		lc := c.ForLog(name)
		for _, n := range c.Nodes {
			for {
				sctx, cancel := context.WithTimeout(ctx, time.Second)
				_, err := lc.Status(sctx, n)
				cancel()
				if err == nil {
					break
				}
				if time.Now().After(deadline) || ctx.Err() != nil {
					return fmt.Errorf("log %s not served by %s within %v: %v", name, n.ID, timeout, err)
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
	}
	return nil
}
