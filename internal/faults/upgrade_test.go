package faults

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// previousRelease is the revision TestUpgradeFromPreviousRelease starts
// the cluster on: the last release, whose nodes this build must run beside
// during a rolling upgrade. It moves when a release is cut (see
// docs/upgrading.md), to that release's commit, so that every change is
// checked against what is deployed, not against the tip.
const previousRelease = "30f352f"

var (
	flagPrevious = flag.String("faults.previous", previousRelease,
		"TestUpgradeFromPreviousRelease: the revision of the previous release (any commit in this clone's history)")
	flagMaxGap = flag.Duration("faults.max-upgrade-gap", 2*time.Second,
		"TestUpgradeFromPreviousRelease: fail when a restart leaves a longer gap without an acknowledged append (the target is 300ms)")
)

// TestUpgradeFromPreviousRelease is a rolling upgrade under load: three
// voters start on the previous release's example node (built from this
// clone's own history), eight idempotent appenders and two tailing
// readers run throughout, and each voter in turn gets SIGTERM and comes
// back on this build with the same directory, flags and ports (the next
// once the leader counts it a caught-up voter again, and every state held
// for a second under load); before the last voter's turn, a node of this
// build (the leader if it is one) goes back to the previous release and
// forward again: a downgrade in the middle of an upgrade, while the
// feature level is still the previous release's. The checker must
// find nothing (no acknowledged append lost or doubled, reads
// consistent), the nodes must converge, no node may exit on its own, and
// no restart may leave a gap without an acknowledged append longer than
// -faults.max-upgrade-gap (2s; the target is 300ms, as for a rolling
// restart on one build). The gaps are printed, one line per restart
// starting "upgrade gap", and a summary line starting "upgrade:".
func TestUpgradeFromPreviousRelease(t *testing.T) {
	t.Parallel()
	mod, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	rev := resolvePrevious(t, mod, *flagPrevious)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	root, err := os.MkdirTemp("", "replog-upgrade-")
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

	// Both builds, side by side (the two compilations share the cores;
	// the old tree's are never cached across runs).
	oldSrc := filepath.Join(root, "previous-src")
	if err := extractRevision(ctx, mod, rev, oldSrc); err != nil {
		t.Fatalf("extracting %s: %v", rev, err)
	}
	bins := map[string]string{}
	var bmu sync.Mutex
	var bwg sync.WaitGroup
	var berr []error
	for label, src := range map[string]string{"previous": oldSrc, "current": mod} {
		dir := filepath.Join(root, label+"-bin")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		bwg.Add(1)
		go func() {
			defer bwg.Done()
			bin, err := BuildNode(ctx, src, dir, "./example", "", *flagRace)
			bmu.Lock()
			defer bmu.Unlock()
			if err != nil {
				berr = append(berr, fmt.Errorf("building the %s node: %w", label, err))
				return
			}
			bins[label] = bin
		}()
	}
	bwg.Wait()
	if len(berr) > 0 {
		t.Fatal(errors.Join(berr...))
	}
	t.Logf("previous release %s, current build %s", rev[:12], BinaryRevision(bins["current"]))

	sw, err := newBinarySwitch(root)
	if err != nil {
		t.Fatal(err)
	}
	ids := []string{"n1", "n2", "n3"}
	for _, id := range ids {
		if err := sw.set(id, bins["previous"]); err != nil {
			t.Fatal(err)
		}
	}
	c, err := StartCluster(ctx, ClusterConfig{
		Bin: sw.path, Root: filepath.Join(root, "cluster"), Nodes: len(ids),
		FetchTimeout: *flagFetchTO, ElectionTimeout: *flagElectTO, FetchMaxWait: *flagMaxWait,
		AppendTimeout: 3 * time.Second, Logf: t.Logf,
	})
	if err != nil {
		t.Fatalf("starting the cluster on the previous release: %v", err)
	}
	t.Cleanup(c.Stop)

	cfg := RunConfig{Seed: seedFlag(t), Appenders: 8, AppendTimeout: 5 * time.Second, Idempotent: true, ConvergeTimeout: 60 * time.Second}
	h := NewHistory()
	acked := make(chan struct{}, 1)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < cfg.Appenders; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			appender(ctx, c, h, cfg, i, stop, acked)
		}()
	}
	readCtx, stopReads := context.WithCancel(ctx)
	defer stopReads()
	var rwg sync.WaitGroup
	for i := 0; i < 2; i++ {
		rwg.Add(1)
		go func() {
			defer rwg.Done()
			reader(readCtx, c, h, cfg.Seed, i, 0)
		}()
	}
	pollCtx, stopPolls := context.WithCancel(ctx)
	defer stopPolls()
	rwg.Add(1)
	go func() {
		defer rwg.Done()
		pollStatuses(pollCtx, c, h)
	}()

	// waitAcks holds the cluster as it is for a second under load and
	// until a few appends are acknowledged, so that every mixed state
	// carries traffic and every restart starts (and its gap ends) with
	// appends flowing.
	waitAcks := func(what string) {
		hold := time.After(time.Second)
		deadline := time.After(20 * time.Second)
		for got := 0; got < 5; got++ {
			select {
			case <-acked:
			case <-deadline:
				t.Errorf("no appends acknowledged within 20s %s", what)
				return
			}
		}
		<-hold
	}
	waitAcks("on the previous release")

	byID := map[string]*Node{}
	for _, n := range c.Nodes {
		byID[n.ID] = n
	}
	// restartOn replaces n's process by one running bin.
	restartOn := func(n *Node, label string) {
		leader, _ := c.Leader(ctx)
		h.AddEvent(Event{Kind: "terminate", Nodes: []string{n.ID}, Leader: leader == n, Detail: "upgrade: SIGTERM, back on the " + label + " build"})
		if !c.Terminate(n, 20*time.Second) {
			t.Errorf("%s was not running", n.ID)
		}
		if err := sw.set(n.ID, bins[label]); err != nil {
			t.Fatal(err)
		}
		if err := c.Start(n); err != nil {
			t.Fatal(err)
		}
		detail := "upgrade: back and caught up"
		if err := c.WaitReady(ctx, n); err != nil {
			detail = "upgrade: " + err.Error()
		} else if err := sw.check(n, bins[label]); err != nil {
			detail = "upgrade: " + err.Error()
		} else {
			sctx, scancel := context.WithTimeout(ctx, 30*time.Second)
			st, err := c.Status(sctx, n)
			if err == nil {
				err = c.WaitVoter(sctx, n.ID, st.DirectoryID, true)
			}
			scancel()
			if err != nil {
				detail = "upgrade: " + err.Error()
			}
		}
		h.AddEvent(Event{Kind: "rejoined", Nodes: []string{n.ID}, Detail: detail})
		if detail != "upgrade: back and caught up" {
			t.Errorf("%s on the %s build: %s", n.ID, label, detail)
		}
		for len(acked) > 0 {
			<-acked
		}
		waitAcks("after " + n.ID + " came back on the " + label + " build")
	}
	// The way back is taken while one voter still runs the previous
	// release: once every voter runs this one, the leader raises the
	// cluster feature level (R68), after which the previous release can
	// no longer read the log (docs/upgrading.md, section 4).
	var steps []string
	for _, id := range ids[:len(ids)-1] {
		restartOn(byID[id], "current")
		steps = append(steps, id+"->current")
	}
	back, _ := c.Leader(ctx)
	if back == nil || back == byID[ids[len(ids)-1]] {
		back = byID[ids[0]]
	}
	restartOn(back, "previous")
	restartOn(back, "current")
	last := ids[len(ids)-1]
	restartOn(byID[last], "current")
	steps = append(steps, back.ID+"->previous", back.ID+"->current", last+"->current")

	close(stop)
	wg.Wait()
	deadline := time.Now().Add(cfg.ConvergeTimeout)
	rep := &Report{Seed: cfg.Seed, Nodes: len(ids), Concurrency: 1, History: h}
	rep.Duration = h.Now()
	rep.Recovered = recoverAppends(ctx, c, h, cfg, deadline)
	rep.Finals, rep.ConvergeErr = converge(ctx, c, deadline)
	rep.Converged = rep.ConvergeErr == nil
	stopReads()
	stopPolls()
	rwg.Wait()
	rep.Result = Check(h.Ops, h.Reads, rep.Finals)
	rep.Result.Merge(CheckStatuses(h.Statuses))
	rep.Statuses = len(h.Statuses)
	rep.RollingGaps = RollingGaps(h.Ops, h.Events)
	rep.Reads = len(h.Reads)
	rep.Outcomes = outcomeStats(h.Ops)
	rep.Crashes = c.Crashes()
	c.Stop()

	// How often a node of the previous release refused this build's
	// handshake version before it dialled again in the old one (one per
	// lane and connection: expected, and logged at Warn by the old node).
	fallbacks := 0
	for _, n := range c.Nodes {
		if b, err := os.ReadFile(n.logPath); err == nil {
			fallbacks += strings.Count(string(b), "inbound handshake: wrong cluster or version")
		}
	}
	t.Logf("handshakes of this build refused by a previous-release node, then redialled in its version: %d (log lines, rate-limited)", fallbacks)

	var sum strings.Builder
	rep.Print(&sum)
	t.Logf("summary:\n%s", sum.String())
	if err := rep.Dump(filepath.Join(root, "history.txt")); err != nil {
		t.Errorf("writing history: %v", err)
	}
	checkRun(t, rep)
	if !rep.Recovered {
		t.Errorf("no append acknowledged after the upgrade within %v", cfg.ConvergeTimeout)
	}
	if len(rep.Crashes) > 0 {
		t.Errorf("%d node processes exited on their own: %v", len(rep.Crashes), rep.Crashes)
	}
	if len(rep.RollingGaps) != len(steps) {
		t.Errorf("%d restarts measured, want %d (%v)", len(rep.RollingGaps), len(steps), steps)
	}
	var worst time.Duration
	for i, g := range rep.RollingGaps {
		step := ""
		if i < len(steps) {
			step = steps[i]
		}
		worst = max(worst, g.Gap)
		line := fmt.Sprintf("upgrade gap %s (leader %v): longest gap without an acknowledged append %v", step, g.Leader, g.Gap.Round(time.Millisecond))
		t.Log(line)
		fmt.Println(line)
		if g.Gap > *flagMaxGap {
			t.Errorf("%s: a gap of %v without an acknowledged append, above %v", step, g.Gap.Round(time.Millisecond), *flagMaxGap)
		}
	}
	line := fmt.Sprintf("upgrade: %s -> current, %d restarts, worst gap %v (bound %v, target 300ms), %d acknowledged, %s",
		rev[:12], len(rep.RollingGaps), worst.Round(time.Millisecond), *flagMaxGap, rep.Outcomes.Acked, rep.Result.Summary())
	t.Log(line)
	fmt.Println(line)
}

// resolvePrevious returns the full commit of rev in the clone at mod, or
// fails the test saying why it cannot: CI clones are full clones, and a
// shallow one lacks the previous release.
func resolvePrevious(t *testing.T, mod, rev string) string {
	t.Helper()
	out, err := exec.Command("git", "-C", mod, "rev-parse", "--verify", "--quiet", rev+"^{commit}").Output()
	if err == nil {
		return strings.TrimSpace(string(out))
	}
	shallow, _ := exec.Command("git", "-C", mod, "rev-parse", "--is-shallow-repository").Output()
	switch {
	case strings.TrimSpace(string(shallow)) == "true":
		t.Fatalf("the previous release %s is not in this clone's history: it is a shallow clone (git fetch --unshallow; CI must clone in full)", rev)
	case len(shallow) == 0:
		t.Fatalf("the previous release %s cannot be found: %s is not a git checkout (the mixed-version test builds it from the clone's history)", rev, mod)
	}
	t.Fatalf("the previous release %s is not a commit in this clone's history (git fetch the tags and branches it is on)", rev)
	return ""
}

// extractRevision writes the tree of rev into dir (git archive, unpacked
// here: no work tree or worktree entry is added to the clone).
func extractRevision(ctx context.Context, mod, rev, dir string) error {
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "git", "-C", mod, "archive", "--format=tar", rev)
	cmd.Stderr = &stderr
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	uerr := untar(pipe, dir)
	_, _ = io.Copy(io.Discard, pipe)
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("git archive: %w: %s", err, stderr.String())
	}
	return uerr
}

func untar(r io.Reader, dir string) error {
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		name := filepath.Clean(hdr.Name)
		if name == "." || strings.HasPrefix(name, "..") || filepath.IsAbs(name) {
			continue
		}
		path := filepath.Join(dir, name)
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(path, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				return err
			}
			f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(hdr.Mode)&0o777|0o600)
			if err != nil {
				return err
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		case tar.TypeSymlink:
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				return err
			}
			if err := os.Symlink(hdr.Linkname, path); err != nil {
				return err
			}
		}
	}
}

// binarySwitch is the node "binary" of a mixed-version cluster: a shell
// script that execs the binary named, per node, in a file beside it, so
// that one node's next start runs another build while the harness keeps
// one process (and its incarnation count) per node. exec keeps the PID,
// so signals reach the node itself.
type binarySwitch struct {
	path string
	dir  string
}

func newBinarySwitch(root string) (*binarySwitch, error) {
	s := &binarySwitch{path: filepath.Join(root, "replog-node-switch"), dir: filepath.Join(root, "replog-node-switch.d")}
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return nil, err
	}
	script := `#!/bin/sh
# The node binary for -id <id> is named in ` + s.dir + `/<id>.
id=
prev=
for a in "$@"; do
	if [ "$prev" = "-id" ]; then id=$a; fi
	prev=$a
done
exec "$(cat "` + s.dir + `/$id")" "$@"
`
	if err := os.WriteFile(s.path, []byte(script), 0o755); err != nil {
		return nil, err
	}
	return s, nil
}

// set makes id's next start run bin.
func (s *binarySwitch) set(id, bin string) error {
	return os.WriteFile(filepath.Join(s.dir, id), []byte(bin), 0o644)
}

// check verifies, where /proc tells, that n's process runs bin.
func (s *binarySwitch) check(n *Node, bin string) error {
	pid := n.proc.PID()
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return nil // no /proc: nothing to check
	}
	if exe != bin {
		return fmt.Errorf("%s (pid %d) runs %s, want %s", n.ID, pid, exe, bin)
	}
	return nil
}
