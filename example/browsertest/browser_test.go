// Package browsertest drives the example's dashboard in headless Chromium.
// It is a separate module so that chromedp stays out of replog's go.mod.
//
// It needs /usr/bin/chromium (Debian package "chromium") and fails, rather
// than skips, without it. Run: cd example/browsertest && go test ./...
package browsertest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

const chromiumPath = "/usr/bin/chromium"

// demo is a running demo parent (three node processes).
type demo struct {
	cmd  *exec.Cmd
	urls map[string]string // node ID -> dashboard URL
	done chan struct{}
	logs *lockedWriter
}

// startDemo builds the example and runs its demo mode until the test ends.
func startDemo(t *testing.T) *demo {
	t.Helper()
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "example")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = ".." // the example package, in replog's own module
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the example: %v\n%s", err, out)
	}
	// Two named logs beside the default one, for the dashboard's Logs card.
	cmd := exec.Command(bin, "-dir", filepath.Join(tmp, "data"), "-nosync", "-log-level", "warn", "-logs", "2")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	logs := &lockedWriter{}
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d := &demo{cmd: cmd, urls: map[string]string{}, done: make(chan struct{}), logs: logs}
	ready := make(chan struct{})
	go func() {
		re := regexp.MustCompile(`^dashboard (\S+) (http://\S+)$`)
		sc := bufio.NewScanner(stdout)
		announced := false
		for sc.Scan() {
			line := sc.Text()
			if m := re.FindStringSubmatch(line); m != nil {
				d.urls[m[1]] = m[2]
			}
			if strings.HasPrefix(line, "control ") && !announced {
				announced = true
				close(ready)
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		_ = cmd.Wait()
		close(d.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-d.done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-d.done
			t.Errorf("demo did not stop within 30s of SIGTERM")
		}
		if t.Failed() {
			t.Logf("demo stderr:\n%s", d.logs.String())
		}
	})
	select {
	case <-ready:
	case <-d.done:
		t.Fatalf("demo exited before printing its URLs:\n%s", logs.String())
	case <-time.After(90 * time.Second):
		t.Fatalf("demo printed no URLs within 90s:\n%s", logs.String())
	}
	return d
}

// artifactPath is where a screenshot goes: $ARTIFACTS_DIR, else ./artifacts.
func artifactPath(t *testing.T, name string) string {
	dir := os.Getenv("ARTIFACTS_DIR")
	if dir == "" {
		dir = "artifacts"
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, name)
}

func TestDashboardShowsCommitOnAllNodes(t *testing.T) {
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Fatalf("this test drives headless Chromium and needs %s (Debian: apt-get install -y chromium): %v", chromiumPath, err)
	}
	d := startDemo(t)
	url := d.urls["n1"]
	if url == "" || len(d.urls) != 3 {
		t.Fatalf("demo printed dashboard URLs %v, want n1..n3", d.urls)
	}

	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromiumPath),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 1100),
	)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(allocCtx, chromedp.WithLogf(t.Logf))
	defer cancel()
	ctx, cancelTimeout := context.WithTimeout(ctx, 3*time.Minute)
	defer cancelTimeout()

	// Any uncaught JavaScript error fails the test.
	var jsMu sync.Mutex
	var jsErrors []string
	consoleCtx, stopConsole := context.WithCancel(ctx)
	defer stopConsole()
	messages := chromedp.Console(consoleCtx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleException {
				jsMu.Lock()
				jsErrors = append(jsErrors, m.Text)
				jsMu.Unlock()
			}
		}
	}()

	// waitJS polls a JavaScript boolean expression until it is true.
	waitJS := func(what, expr string) {
		t.Helper()
		deadline := time.Now().Add(90 * time.Second)
		for {
			ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](expr))
			if err != nil {
				t.Fatalf("waiting for %s: %v", what, err)
			}
			if ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the page never showed %s", what)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	screenshot := func(name string) string {
		t.Helper()
		buf, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		path := artifactPath(t, name)
		if err := os.WriteFile(path, buf, 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}

	if err := chromedp.Do(ctx,
		chromedp.Navigate(url),
		chromedp.WaitVisible(chromedp.CSS(`.row[data-node="n3"]`)),
	); err != nil {
		t.Fatal(err)
	}
	waitJS("a leader and three reachable nodes",
		`document.querySelectorAll('.row[data-up="true"]').length === 3 && !!document.querySelector('.row[data-role="leader"]')`)

	const record = "hello from chromium"
	if err := chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.CSS(`#append-input`), record),
		chromedp.Click(chromedp.CSS(`#append-button`)),
	); err != nil {
		t.Fatal(err)
	}
	waitJS("the append's result", `document.getElementById('append-result').dataset.offset !== undefined ||
		document.getElementById('append-result').classList.contains('err')`)
	offsetText, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById('append-result').dataset.offset || ''`))
	if err != nil {
		t.Fatal(err)
	}
	if offsetText == "" {
		msg, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`#append-result`)))
		t.Fatalf("append through the page failed: %s", msg)
	}
	var offset uint64
	if _, err := fmt.Sscan(offsetText, &offset); err != nil {
		t.Fatal(err)
	}

	// The HW reaching past the entry on every node, read from the DOM.
	hwPast := fmt.Sprintf(`['n1','n2','n3'].every(n => Number(document.querySelector('.row[data-node="' + n + '"] [data-field="hw"]').textContent) > %d)`, offset)
	waitJS(fmt.Sprintf("HW > %d on all three nodes", offset), hwPast)

	// The slow-motion replay lists the steps of the append: the leader
	// writes it, followers fetch it (round 1), the leader moves the HW and
	// the followers learn it (round 2).
	waitJS("the replay's steps", `(() => {
		const t = document.getElementById('steps').textContent;
		return document.querySelectorAll('#steps li:not(.empty)').length >= 4 &&
			t.includes('leader') && t.includes('writes offset') && t.includes('fetch round 1') &&
			t.includes('a majority') && t.includes('fetch round 2') && !t.includes('has not reached');
	})()`)
	replayShot := screenshot("dashboard-replay.png")

	// Back to live: the committed entry is in the reader's table and every
	// HW is past it.
	waitJS("live mode after the replay", `document.body.dataset.mode === 'live'`)
	waitJS("the record in the committed-entries table", fmt.Sprintf(`document.getElementById('entries').textContent.includes(%q)`, record))
	waitJS(fmt.Sprintf("HW > %d on all three nodes (live)", offset), hwPast)

	// "Delete before offset N": a second record, then a deletion before
	// it. Every replica's log start moves there (the leader's first, the
	// followers' with their next fetch), the boxes below it turn grey, and
	// the second record stays.
	const second = "kept after the deletion"
	if err := chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.CSS(`#append-input`), second),
		chromedp.Click(chromedp.CSS(`#append-button`)),
	); err != nil {
		t.Fatal(err)
	}
	waitJS("the second append's result", fmt.Sprintf(`Number(document.getElementById('append-result').dataset.offset) > %d ||
		document.getElementById('append-result').classList.contains('err')`, offset))
	offsetText, err = chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById('append-result').dataset.offset || ''`))
	if err != nil {
		t.Fatal(err)
	}
	var kept uint64
	if _, err := fmt.Sscan(offsetText, &kept); err != nil || kept <= offset {
		msg, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`#append-result`)))
		t.Fatalf("second append through the page: %s (offset %q)", msg, offsetText)
	}
	waitJS(fmt.Sprintf("HW > %d on all three nodes", kept), fmt.Sprintf(`['n1','n2','n3'].every(n => Number(document.querySelector('.row[data-node="' + n + '"] [data-field="hw"]').textContent) > %d)`, kept))
	if err := chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.CSS(`#delete-offset`), fmt.Sprint(kept)),
		chromedp.Click(chromedp.CSS(`#delete-button`)),
	); err != nil {
		t.Fatal(err)
	}
	waitJS("the deletion's result", `document.getElementById('delete-result').dataset.logStart !== undefined ||
		document.getElementById('delete-result').classList.contains('err')`)
	startText, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById('delete-result').dataset.logStart || ''`))
	if err != nil {
		t.Fatal(err)
	}
	if startText != fmt.Sprint(kept) {
		msg, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`#delete-result`)))
		t.Fatalf("delete before %d through the page answered log start %q: %s", kept, startText, msg)
	}
	startAt := func(node string) string {
		return fmt.Sprintf(`Number(document.querySelector('.row[data-node="%s"] [data-field="log_start"]').textContent) >= %d`, node, kept)
	}
	// Live mode: a replay of the second append shows older frames.
	waitJS(fmt.Sprintf("log start %d and grey boxes on all three nodes", kept), fmt.Sprintf(`document.body.dataset.mode === 'live' && ['n1','n2','n3'].every(n =>
		(%s) && document.querySelectorAll('.row[data-node="' + n + '"] .cell.deleted').length > 0)`, startAt("' + n + '")))
	waitJS("the second record in the committed-entries table and not the first", fmt.Sprintf(`(() => {
		const t = document.getElementById('entries').textContent;
		return t.includes(%q) && !t.includes(%q);
	})()`, second, record))

	shot := screenshot("dashboard.png")

	// The key-value card: two Puts of one key through the page's node,
	// then its history there, newest last.
	for _, v := range []string{"blue", "green"} {
		if err := chromedp.Do(ctx,
			chromedp.SetValue(chromedp.CSS(`#kv-key`), "color"),
			chromedp.SetValue(chromedp.CSS(`#kv-value`), v),
			chromedp.Click(chromedp.CSS(`#kv-form button[data-kv="put"]`)),
		); err != nil {
			t.Fatal(err)
		}
		waitJS("the put of "+v, fmt.Sprintf(`(() => {
			const rows = [...document.querySelectorAll('#kv-history tr')].map(r => r.cells[1].textContent);
			return rows.length > 0 && rows[rows.length - 1] === %q;
		})()`, v))
	}
	if got, err := chromedp.Run(ctx, chromedp.Evaluate[string](`[...document.querySelectorAll('#kv-history tr')].map(r => r.cells[1].textContent).join(',')`)); err != nil || got != "blue,green" {
		msg, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`#kv-result`)))
		t.Fatalf("the key's history shows %q (%v; result %q)", got, err, msg)
	}

	// The Logs card: the default log, then the demo's -logs 2, each with
	// a leader among n1..n3 and its LEO and HW.
	waitJS("the Logs card listing (default), log-1 and log-2 with leaders and offsets", `(() => {
		const rows = [...document.querySelectorAll('#logs tr')].map(r => [...r.cells].map(c => c.textContent));
		return rows.length === 3 && rows[0][0] === '(default)' && rows[1][0] === 'log-1' && rows[2][0] === 'log-2' &&
			rows.every(r => /^n[1-3]$/.test(r[1]) && /^\d+$/.test(r[2]) && /^\d+$/.test(r[3]));
	})()`)

	// Voters and observers: n1..n3 vote, each at a recorded directory;
	// the spare n4 is not running. Started with its row's Start button it
	// is an observer, and "Add voter" makes it a voter.
	member := func(node, cond string) string {
		return fmt.Sprintf(`(() => { const r = document.querySelector('#members tr[data-node="%s"]'); return !!r && (%s); })()`, node, cond)
	}
	waitJS("n1..n3 listed as voters with directories", `['n1','n2','n3'].every(n => {
		const r = document.querySelector('#members tr[data-node="' + n + '"]');
		return r && r.dataset.kind === 'voter' && /^[0-9a-f]{8}$/.test(r.querySelector('td.dir').textContent);
	})`)
	waitJS("n4 listed as not running", member("n4", `r.dataset.kind === 'down'`))
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`.row[data-node="n4"] button.ghost`))); err != nil {
		t.Fatal(err)
	}
	waitJS("n4 an observer after Start", member("n4", `r.dataset.kind === 'observer' && !r.dataset.replacing`))
	// A leader change during the add (check-quorum on a loaded machine)
	// ends it with an error on the page, and the change may or may not
	// have been made: the page shows the error, then n4 as an observer
	// (clicked again) or a voter (made after all).
	isVoter := member("n4", `r.dataset.kind === 'voter' && r.cells[3].textContent === 'yes'`)
	const addFailed = `document.getElementById('members-result').classList.contains('err')`
	for try := 1; ; try++ {
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#members tr[data-node="n4"] button[data-action="add-voter"]`))); err != nil {
			t.Fatal(err)
		}
		waitJS("n4 a voter after Add voter, or the add's error", isVoter+" || "+addFailed)
		if ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](isVoter)); err != nil || ok {
			if err != nil {
				t.Fatal(err)
			}
			break
		}
		msg, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`#members-result`)))
		if try == 3 {
			t.Fatalf("Add voter failed %d times, the last: %s", try, msg)
		}
		t.Logf("Add voter, try %d: the page says %q; looking again once a leader shows", try, msg)
		waitJS("a leader and n4 an observer or a voter", `!!document.querySelector('.row[data-role="leader"]') && `+
			member("n4", `(r.dataset.kind === 'observer' && !document.querySelector('#members button[data-action]:disabled')) || r.dataset.kind === 'voter'`))
		if ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](member("n4", `r.dataset.kind === 'voter'`))); err != nil || ok {
			if err != nil {
				t.Fatal(err)
			}
			waitJS("n4 a voter, caught up, after the add that failed on the page", isVoter)
			break
		}
	}
	membersShot := screenshot("dashboard-members.png")

	// "Make leader" on a voter that does not lead: the leader hands over
	// (through this page's node, which forwards it if it does not lead)
	// and the board shows the new leader.
	successor, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(() => {
		const b = document.querySelector('#members tr[data-kind="voter"] button[data-action="make-leader"]');
		return b ? b.closest('tr').dataset.node : '';
	})()`))
	if err != nil || successor == "" {
		t.Fatalf("no Make leader button on a voter that does not lead (%v)", err)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(fmt.Sprintf(`#members tr[data-node=%q] button[data-action="make-leader"]`, successor)))); err != nil {
		t.Fatal(err)
	}
	waitJS("the transfer's result", `document.getElementById('members-result').dataset.leader !== undefined ||
		document.getElementById('members-result').classList.contains('err')`)
	if got, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById('members-result').dataset.leader || ''`)); err != nil || got != successor {
		msg, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`#members-result`)))
		t.Fatalf("Make leader %s: the page says %q (leader %q, %v)", successor, msg, got, err)
	}
	waitJS(successor+" shown as the leader", fmt.Sprintf(`document.querySelector('.row[data-node=%q]').dataset.role === 'leader'`, successor))

	// The kill and restart buttons reach the demo's control API.
	follower, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('.row[data-role="follower"]').dataset.node`))
	if err != nil {
		t.Fatalf("finding a follower row: %v", err)
	}
	row := fmt.Sprintf(`.row[data-node=%q]`, follower)
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(row+` button.danger`))); err != nil {
		t.Fatal(err)
	}
	waitJS(follower+" shown as down after Kill", fmt.Sprintf(`document.querySelector('%s').dataset.role === 'down'`, row))
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(row+` button.ghost`))); err != nil {
		t.Fatal(err)
	}
	waitJS(follower+" back after Restart", fmt.Sprintf(`document.querySelector('%s').dataset.up === 'true'`, row))
	// Its log start survived the restart (the deletion is on its disk).
	waitJS(follower+"'s log start after the restart", startAt(follower))
	t.Logf("screenshots: %s, %s, %s", shot, replayShot, membersShot)

	stopConsole()
	jsMu.Lock()
	defer jsMu.Unlock()
	for _, msg := range jsErrors {
		t.Errorf("JavaScript error on the page: %s", msg)
	}
}

// lockedWriter collects the demo's stderr; the exec package writes it from
// a goroutine while the test may read it.
type lockedWriter struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
