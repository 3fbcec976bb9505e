//go:build linux

package nodeproc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/replog-io/replog/internal/testwait"
)

// newSupervisor returns a Supervisor closed when the test ends.
func newSupervisor(t *testing.T) *Supervisor {
	s := NewSupervisor()
	t.Cleanup(func() {
		if err := s.Close(30 * time.Second); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// lineChan collects a child's stdout lines.
func lineChan() (chan string, func(string)) {
	ch := make(chan string, 64)
	return ch, func(l string) { ch <- l }
}

// waitLine is a WaitReady probe: ready once want is printed.
func waitLine(lines chan string, want string) func(context.Context) error {
	return func(ctx context.Context) error {
		for {
			select {
			case l := <-lines:
				if l == want {
					return nil
				}
			case <-ctx.Done():
				return fmt.Errorf("no %q line", want)
			}
		}
	}
}

// startReady starts the helper in mode (one that prints "ready") and
// waits until it has; the channel gets its later lines.
func startReady(t *testing.T, s *Supervisor, mode string) (*Process, chan string) {
	t.Helper()
	lines, onLine := lineChan()
	p := s.Process(helperSpec(mode, onLine))
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	if err := p.WaitReady(waitCtx(t), 0, waitLine(lines, "ready")); err != nil {
		t.Fatal(err)
	}
	return p, lines
}

func waitCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// A child that exits on its own: its output reaches the line callbacks,
// its Env is set, and Wait and OnExit report the status, not requested.
func TestExitOnItsOwn(t *testing.T) {
	s := newSupervisor(t)
	var mu sync.Mutex
	var out, errOut []string
	var exits []Exit
	spec := helperSpec("exit", func(l string) { mu.Lock(); out = append(out, l); mu.Unlock() },
		"NODEPROC_TEST_CODE=3", "NODEPROC_TEST_WORD=hello")
	spec.StderrLine = func(l string) { mu.Lock(); errOut = append(errOut, l); mu.Unlock() }
	spec.OnExit = func(e Exit) { mu.Lock(); exits = append(exits, e); mu.Unlock() }
	p := s.Process(spec)
	if _, err := p.Wait(waitCtx(t)); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("Wait before any start: %v, want ErrNotRunning", err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	e, err := p.Wait(waitCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if e.String() != "exit status 3" || e.Requested || e.Incarnation != 1 || e.PID == 0 {
		t.Errorf("exit %+v (%s), want exit status 3, not requested, incarnation 1", e, e)
	}
	mu.Lock()
	defer mu.Unlock()
	// OnExit has returned and the output was read before Wait returned.
	if len(exits) != 1 || exits[0] != e {
		t.Errorf("OnExit got %+v, want once %+v", exits, e)
	}
	if strings.Join(out, "|") != "out: hello" || strings.Join(errOut, "|") != "err: hello" {
		t.Errorf("stdout %q, stderr %q; want the child's lines with its Env", out, errOut)
	}
	if p.Running() || p.PID() != 0 {
		t.Errorf("Running %v PID %d after exit", p.Running(), p.PID())
	}
	if last, ok := p.LastExit(); !ok || last != e {
		t.Errorf("LastExit %+v %v, want %+v", last, ok, e)
	}
	if err := p.Kill(); !errors.Is(err, ErrNotRunning) {
		t.Errorf("Kill after exit: %v, want ErrNotRunning", err)
	}
}

// Kill, then restart: the kill is reported as requested and by signal, a
// second Start while running is refused, each start is a new incarnation
// with a new process, and a clean exit reads "exit status 0".
func TestKillAndRestart(t *testing.T) {
	s := newSupervisor(t)
	lines, onLine := lineChan()
	p := s.Process(helperSpec("sleep", onLine))
	if p.Incarnation() != 0 {
		t.Fatalf("incarnation %d before the first start", p.Incarnation())
	}
	var pids []int
	for i := 1; i <= 2; i++ {
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		if err := p.WaitReady(waitCtx(t), 0, waitLine(lines, "ready")); err != nil {
			t.Fatal(err)
		}
		if err := p.Start(); !errors.Is(err, ErrRunning) {
			t.Fatalf("Start while running: %v, want ErrRunning", err)
		}
		if !p.Running() || p.Incarnation() != i {
			t.Fatalf("start %d: Running %v incarnation %d", i, p.Running(), p.Incarnation())
		}
		pid := p.PID()
		if !alive(pid) {
			t.Fatalf("pid %d not alive while Running", pid)
		}
		pids = append(pids, pid)
		if err := p.Kill(); err != nil {
			t.Fatal(err)
		}
		e, err := p.Wait(waitCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		if e.String() != "signal: killed" || !e.Requested || e.Incarnation != i || e.PID != pid {
			t.Errorf("exit %+v (%s), want signal: killed, requested, incarnation %d, pid %d", e, e, i, pid)
		}
		if p.Running() || alive(pid) {
			t.Errorf("after Kill and Wait: Running %v, pid %d alive %v", p.Running(), pid, alive(pid))
		}
	}
	if pids[0] == pids[1] {
		t.Errorf("restart kept pid %d", pids[0])
	}
}

// Terminate asks for a graceful stop: the child's own SIGTERM handler
// runs and it exits 0, counted as requested.
func TestTerminate(t *testing.T) {
	s := newSupervisor(t)
	p, lines := startReady(t, s, "term")
	if err := p.Terminate(); err != nil {
		t.Fatal(err)
	}
	e, err := p.Wait(waitCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if e.Err != nil || !e.Requested {
		t.Errorf("exit %+v (%s), want exit status 0, requested", e, e)
	}
	if got := <-lines; got != "terminating" {
		t.Errorf("line %q after SIGTERM, want the handler's \"terminating\"", got)
	}
}

// WaitReady gives up when the child exits first (naming how) and when its
// context ends first (naming the probe's last error); a probe that holds
// succeeds at once.
func TestWaitReadyOutcomes(t *testing.T) {
	s := newSupervisor(t)
	p := s.Process(helperSpec("exit", nil, "NODEPROC_TEST_CODE=1"))
	if err := p.WaitReady(waitCtx(t), 0, nil); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("WaitReady before Start: %v, want ErrNotRunning", err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	never := func(context.Context) error { return errors.New("not yet") }
	err := p.WaitReady(waitCtx(t), 10*time.Millisecond, never)
	if !errors.Is(err, ErrExited) || !strings.Contains(err.Error(), "exit status 1") {
		t.Errorf("WaitReady on a child that exits: %v, want ErrExited naming exit status 1", err)
	}

	lines, onLine := lineChan()
	q := s.Process(helperSpec("sleep", onLine))
	if err := q.Start(); err != nil {
		t.Fatal(err)
	}
	// The probe that fails does not read lines: "ready" waits for the
	// second WaitReady.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err = q.WaitReady(ctx, 10*time.Millisecond, never)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "not yet") {
		t.Errorf("WaitReady past its context: %v, want DeadlineExceeded naming the probe's error", err)
	}
	if err := q.WaitReady(waitCtx(t), 0, waitLine(lines, "ready")); err != nil {
		t.Errorf("WaitReady on a ready child: %v", err)
	}
}

// With LogFile, both streams of every incarnation are appended to the
// file, each start after a header line.
func TestLogFile(t *testing.T) {
	s := newSupervisor(t)
	log := filepath.Join(t.TempDir(), "node.log")
	spec := helperSpec("exit", nil, "NODEPROC_TEST_WORD=logged")
	spec.StdoutLine, spec.LogFile = nil, log
	p := s.Process(spec)
	for range 2 {
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		if _, err := p.Wait(waitCtx(t)); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	for _, want := range []string{"start #1", "start #2"} {
		if !strings.Contains(text, want) {
			t.Errorf("log lacks header %q:\n%s", want, text)
		}
	}
	if strings.Count(text, "out: logged") != 2 || strings.Count(text, "err: logged") != 2 {
		t.Errorf("log does not hold both streams of both starts:\n%s", text)
	}
	spec.StdoutLine = func(string) {}
	if err := s.Process(spec).Start(); err == nil {
		t.Errorf("Start with LogFile and StdoutLine both set succeeded")
	}
}

// Close kills what still runs (requested: not a crash) and refuses new
// starts.
func TestCloseKillsChildren(t *testing.T) {
	s := NewSupervisor()
	p, _ := startReady(t, s, "sleep")
	pid := p.PID()
	if err := s.Close(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	e, ok := p.LastExit()
	if !ok || !e.Requested || e.String() != "signal: killed" {
		t.Errorf("after Close: %+v %v, want killed, requested", e, ok)
	}
	if alive(pid) {
		t.Errorf("pid %d survived Close", pid)
	}
	if err := p.Start(); !errors.Is(err, ErrClosed) {
		t.Errorf("Start after Close: %v, want ErrClosed", err)
	}
	if err := s.Close(time.Second); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// alive reports whether pid runs (a zombie counts as exited).
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	return procState(pid) != 'Z'
}

// procState is pid's state letter ('R', 'S', 'T' stopped, 'Z' zombie)
// from /proc/PID/stat, "pid (comm) S ..." (comm may hold spaces, so cut at
// the last ')'); 'X' if pid is gone.
func procState(pid int) byte {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 'X'
	}
	stat := string(b)
	if i := strings.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) {
		return stat[i+2]
	}
	return '?'
}

// Pause stops the child (state T), Resume continues it, Kill ends a
// paused child; none of it works on a child that is not running.
func TestPauseResume(t *testing.T) {
	s := newSupervisor(t)
	if err := s.Process(helperSpec("sleep", nil)).Pause(); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("Pause before Start: %v, want ErrNotRunning", err)
	}
	p, _ := startReady(t, s, "sleep")
	pid := p.PID()
	if err := p.Pause(); err != nil || !p.Paused() {
		t.Fatalf("Pause: %v, Paused %v", err, p.Paused())
	}
	testwait.WaitFor(t, "the paused child in state T", 10*time.Second, func() bool { return procState(pid) == 'T' })
	if err := p.Resume(); err != nil || p.Paused() {
		t.Fatalf("Resume: %v, Paused %v", err, p.Paused())
	}
	testwait.WaitFor(t, "the resumed child out of state T", 10*time.Second, func() bool { return procState(pid) != 'T' })
	if err := p.Pause(); err != nil {
		t.Fatal(err)
	}
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	e, err := p.Wait(waitCtx(t))
	if err != nil || e.String() != "signal: killed" || p.Paused() {
		t.Errorf("kill of a paused child: %+v %v, Paused %v; want killed, not paused", e, err, p.Paused())
	}
	if err := p.Resume(); !errors.Is(err, ErrNotRunning) {
		t.Errorf("Resume after exit: %v, want ErrNotRunning", err)
	}
}

// User1 delivers SIGUSR1 to a running child (twice: it is not a one-off)
// and fails on one that is not running.
func TestUser1(t *testing.T) {
	s := newSupervisor(t)
	if err := s.Process(helperSpec("user1", nil)).User1(); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("User1 before Start: %v, want ErrNotRunning", err)
	}
	p, lines := startReady(t, s, "user1")
	for i := range 2 {
		if err := p.User1(); err != nil {
			t.Fatal(err)
		}
		if err := waitLine(lines, "user1")(waitCtx(t)); err != nil {
			t.Fatalf("signal %d: %v", i+1, err)
		}
	}
	if p.Paused() {
		t.Errorf("User1 left the child marked paused")
	}
}

// startWithChild starts a helper mode that prints "child PID" and returns
// the helper's Process and the grandchild's PID, alive.
func startWithChild(t *testing.T, s *Supervisor, mode string) (*Process, int) {
	t.Helper()
	lines, onLine := lineChan()
	p := s.Process(helperSpec(mode, onLine))
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	var child int
	err := p.WaitReady(waitCtx(t), 0, func(ctx context.Context) error {
		select {
		case l := <-lines:
			_, err := fmt.Sscanf(l, "child %d", &child)
			return err
		case <-ctx.Done():
			return errors.New("no child line")
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if !alive(child) {
		t.Fatalf("grandchild %d is not running before the kill", child)
	}
	return p, child
}

// Kill reaches the child's whole process group: a grandchild it started
// without nodeproc (no parent-death signal of its own) dies with it.
func TestKillReachesTheProcessGroup(t *testing.T) {
	s := newSupervisor(t)
	p, child := startWithChild(t, s, "group")
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Wait(waitCtx(t)); err != nil {
		t.Fatal(err)
	}
	testwait.WaitFor(t, fmt.Sprintf("grandchild %d to die with its process group", child), 30*time.Second,
		func() bool { return !alive(child) })
}

// A parent killed by SIGKILL, with no chance to stop its children, leaves
// no orphan: the children it started through its Supervisor (each in a
// process group of its own, so the kill of the parent's group does not
// reach them) get their parent-death signal.
func TestNoOrphanWhenTheParentIsKilled(t *testing.T) {
	s := newSupervisor(t)
	p, child := startWithChild(t, s, "parent")
	if pgid, err := syscall.Getpgid(child); err != nil || pgid != child {
		t.Fatalf("grandchild %d in process group %d (%v), want its own", child, pgid, err)
	}
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	e, err := p.Wait(waitCtx(t))
	if err != nil || e.String() != "signal: killed" {
		t.Fatalf("parent exit %+v %v, want killed", e, err)
	}
	testwait.WaitFor(t, fmt.Sprintf("grandchild %d to die with its parent", child), 30*time.Second,
		func() bool { return !alive(child) })
}
