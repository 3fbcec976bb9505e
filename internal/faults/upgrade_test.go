package faults

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/storage"
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
// for a second under load). Before the last voter moves, while the
// cluster's feature level is still 6 (that voter's fetches say 6), the
// leader of the moment, if it runs this build, goes back to the previous
// release and forward again (a downgrade of one node in the middle of an
// upgrade). Once every voter runs this build the level must reach 7
// (R68, read from each node's /status) and every node must turn its
// commit journal on (its directory storage format 2, replog.journal
// present); appends go on. Then a follower is rolled back to the previous
// release once more, which must not work: that build cannot read the
// level entry (storage.ErrCorrupt, "unknown entry type 6") and must not
// lose the entries it held (its log end does not go back, whether it
// exits or keeps running without reading past the level entry); it
// comes forward again and catches up. The checker must find nothing (no
// acknowledged append lost or doubled, reads consistent), the nodes must
// converge, no node may exit on its own (but for the refused rollback),
// and no restart may leave a gap without an acknowledged append longer
// than -faults.max-upgrade-gap (2s; the target is 300ms, as for a
// rolling restart on one build). The gaps are printed, one line per
// restart starting "upgrade gap", and a summary line starting
// "upgrade:" with the level the cluster ends at.
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
	last := byID[ids[len(ids)-1]]
	for _, id := range ids[:len(ids)-1] {
		restartOn(byID[id], "current")
		steps = append(steps, id+"->current")
	}
	// The downgrade of one node, while last still holds the level at 6.
	back, _ := c.Leader(ctx)
	if back == nil || back == last {
		back = byID[ids[0]]
	}
	restartOn(back, "previous")
	restartOn(back, "current")
	steps = append(steps, back.ID+"->previous", back.ID+"->current")
	for _, n := range c.Nodes {
		if n == last {
			continue
		}
		if lv, err := featureLevel(ctx, c, n); err != nil || lv != protocol.BaseFeatureLevel {
			t.Errorf("%s at level %d (%v) while %s runs the previous release; want %d", n.ID, lv, err, last.ID, protocol.BaseFeatureLevel)
		}
	}
	restartOn(last, "current")
	steps = append(steps, last.ID+"->current")

	// Every node of this build now: the level goes to this build's
	// highest (protocol.Version: with it the journal's 7), and with it
	// every node's journal.
	upgraded := time.Now()
	if err := waitLevel(ctx, c, protocol.Version, 30*time.Second); err != nil {
		t.Error(err)
	}
	// restartOn holds the cluster a second after the node is back: a raise
	// within that hold shows here as a wait of about 0.
	t.Logf("level %d on every node %v after the last voter's step ended", protocol.Version, time.Since(upgraded).Round(time.Millisecond))
	if err := waitJournals(ctx, c, 30*time.Second); err != nil {
		t.Error(err)
	}
	waitAcks(fmt.Sprintf("at level %d, every journal on", protocol.Version))

	// A rollback after the raise: the old build must not read past the
	// level entry, nor drop what it holds.
	var fol *Node
	if lead, _ := c.Leader(ctx); lead != nil {
		for _, n := range c.Nodes {
			if n != lead {
				fol = n
				break
			}
		}
	}
	if fol == nil {
		fol = byID[ids[0]]
	}
	crashesBefore := len(c.Crashes())
	refusal := rollbackAfterRaise(ctx, t, c, h, sw, fol, bins)
	expectedCrashes := len(c.Crashes()) - crashesBefore
	fmt.Println("upgrade: rollback after the raise: " + refusal)
	t.Log("rollback after the raise: " + refusal)
	steps = append(steps, fmt.Sprintf("%s->previous(at level %d)->current", fol.ID, protocol.Version))
	for len(acked) > 0 {
		<-acked
	}
	waitAcks("after " + fol.ID + " came forward again")
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
	endLevel := 0
	var levels []string
	for _, n := range c.Nodes {
		lv, err := featureLevel(ctx, c, n)
		if err != nil {
			t.Errorf("%s: reading its level at the end: %v", n.ID, err)
		}
		if endLevel == 0 || lv < endLevel {
			endLevel = lv
		}
		levels = append(levels, fmt.Sprintf("%s=%d", n.ID, lv))
	}
	if endLevel != protocol.Version {
		t.Errorf("levels at the end %v; want %d on every node", levels, protocol.Version)
	}
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
	if len(rep.Crashes) > expectedCrashes {
		t.Errorf("%d node processes exited on their own (%d of them the refused rollback): %v", len(rep.Crashes), expectedCrashes, rep.Crashes)
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
	line := fmt.Sprintf("upgrade: %s -> current, %d restarts, worst gap %v (bound %v, target 300ms), %d acknowledged, ends at level %d (%s), %s",
		rev[:12], len(rep.RollingGaps), worst.Round(time.Millisecond), *flagMaxGap, rep.Outcomes.Acked, endLevel, strings.Join(levels, " "), rep.Result.Summary())
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

// featureLevel reads n's finalized cluster feature level from its
// /status (0 from a build before levels).
func featureLevel(ctx context.Context, c *Cluster, n *Node) (int, error) {
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(sctx, http.MethodGet, "http://"+n.HTTPAddr+"/status", nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("status %d", resp.StatusCode)
	}
	var st struct {
		FeatureLevel int `json:"feature_level"`
	}
	err = json.NewDecoder(resp.Body).Decode(&st)
	return st.FeatureLevel, err
}

// waitLevel waits until every node's /status shows a finalized level of
// at least want.
func waitLevel(ctx context.Context, c *Cluster, want int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		var low []string
		for _, n := range c.Nodes {
			if lv, err := featureLevel(ctx, c, n); err != nil || lv < want {
				low = append(low, fmt.Sprintf("%s=%d(%v)", n.ID, lv, err))
			}
		}
		if len(low) == 0 {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("level %d not reached within %v: %v", want, timeout, low)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// journalOn reports whether n's data directory is storage format 2 with
// its commit journal.
func journalOn(n *Node) error {
	f, err := storage.DirFormat(n.Dir)
	if err != nil {
		return err
	}
	if f != storage.StorageFormatJournal {
		return fmt.Errorf("%s: storage format %d", n.ID, f)
	}
	if _, err := os.Stat(filepath.Join(n.Dir, storage.JournalFileName)); err != nil {
		return fmt.Errorf("%s: format 2 without a journal: %w", n.ID, err)
	}
	return nil
}

// waitJournals waits until every node has turned its journal on.
func waitJournals(ctx context.Context, c *Cluster, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		var errs []error
		for _, n := range c.Nodes {
			if err := journalOn(n); err != nil {
				errs = append(errs, err)
			}
		}
		if len(errs) == 0 {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("journals not on within %v: %w", timeout, errors.Join(errs...))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// rollbackAfterRaise puts n back on the previous release at this build's
// level and watches what that build does with the directory (format 2, a
// journal it does not know, a level entry it cannot read): it must exit,
// or keep running without reading past the level entry, and in neither case may
// its log end go back (nothing it held is dropped). Then n comes forward
// again and must catch up, its directory still format 2. It returns what
// the old build did, and fails t if it neither refused nor stopped at the
// level entry, or lost entries.
func rollbackAfterRaise(ctx context.Context, t *testing.T, c *Cluster, h *History, sw *binarySwitch, n *Node, bins map[string]string) string {
	t.Helper()
	before, err := c.Status(ctx, n)
	if err != nil {
		t.Errorf("%s: status before the rollback: %v", n.ID, err)
	}
	leader, _ := c.Leader(ctx)
	h.AddEvent(Event{Kind: "terminate", Nodes: []string{n.ID}, Leader: leader == n, Detail: fmt.Sprintf("upgrade: SIGTERM, back on the previous build at level %d", protocol.Version)})
	if !c.Terminate(n, 20*time.Second) {
		t.Errorf("%s was not running", n.ID)
	}
	var logFrom int64
	if fi, err := os.Stat(n.logPath); err == nil {
		logFrom = fi.Size()
	}
	if err := sw.set(n.ID, bins["previous"]); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(n); err != nil {
		t.Fatal(err)
	}
	oldLog := func() string {
		b, _ := os.ReadFile(n.logPath)
		if int64(len(b)) < logFrom {
			return ""
		}
		return string(b[logFrom:])
	}
	const unreadable = "unknown entry type 6"
	var what string
	deadline := time.Now().Add(20 * time.Second)
	for what == "" {
		switch st, err := c.Status(ctx, n); {
		case !n.Running():
			what = "the previous build exited on its own"
		case err == nil && strings.Contains(oldLog(), unreadable):
			what = fmt.Sprintf("the previous build runs but cannot read the level entry (%q), log end %d (before: %d)", unreadable, st.LEO, before.LEO)
			if st.LEO < before.LEO {
				t.Errorf("%s on the previous build: log end %d, below the %d it held: entries lost", n.ID, st.LEO, before.LEO)
			}
		case time.Now().After(deadline):
			what = "neither"
			t.Errorf("%s on the previous build at level %d: still running after 20s and its log does not say %q", n.ID, protocol.Version, unreadable)
		default:
			time.Sleep(100 * time.Millisecond)
		}
	}
	if !n.Running() {
		if !strings.Contains(oldLog(), unreadable) && !strings.Contains(oldLog(), "corrupt") {
			t.Logf("%s: the previous build's log after the rollback:\n%s", n.ID, truncate(oldLog(), 2000))
		}
	}
	if n.Running() {
		c.Terminate(n, 20*time.Second)
	}
	if err := sw.set(n.ID, bins["current"]); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(n); err != nil {
		t.Fatal(err)
	}
	detail := "upgrade: back and caught up"
	if err := c.WaitReady(ctx, n); err != nil {
		detail = "upgrade: " + err.Error()
	} else if err := sw.check(n, bins["current"]); err != nil {
		detail = "upgrade: " + err.Error()
	} else {
		sctx, scancel := context.WithTimeout(ctx, 30*time.Second)
		st, err := c.Status(sctx, n)
		if err == nil {
			err = c.WaitVoter(sctx, n.ID, st.DirectoryID, true)
		}
		scancel()
		if err == nil {
			err = journalOn(n)
		}
		if err != nil {
			detail = "upgrade: " + err.Error()
		}
	}
	h.AddEvent(Event{Kind: "rejoined", Nodes: []string{n.ID}, Detail: detail})
	if detail != "upgrade: back and caught up" {
		t.Errorf("%s forward again after the refused rollback: %s", n.ID, detail)
	}
	return what
}
