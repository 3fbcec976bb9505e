package nodeproc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"time"
)

var (
	// ErrRunning is returned by Start when the previous incarnation has
	// not exited yet.
	ErrRunning = errors.New("nodeproc: process is running")
	// ErrNotRunning is returned by the signalling methods when no
	// incarnation is running.
	ErrNotRunning = errors.New("nodeproc: process is not running")
	// ErrClosed is returned by Start after the Supervisor was closed.
	ErrClosed = errors.New("nodeproc: supervisor closed")
	// ErrExited is wrapped by WaitReady's error when the incarnation
	// exited before it was ready.
	ErrExited = errors.New("nodeproc: process exited")
)

// maxLine is the longest output line handed to StdoutLine or StderrLine;
// the rest of a stream with a longer line is read and dropped.
const maxLine = 1 << 20

// Spec is what a Process runs.
type Spec struct {
	// Path is the executable.
	Path string
	// Args are the arguments, without the program name.
	Args []string
	// Env holds extra "KEY=value" variables, added to the parent's
	// environment.
	Env []string
	// LogFile, if set, receives the child's stdout and stderr, appended,
	// after a header line per start. It excludes StdoutLine and
	// StderrLine.
	LogFile string
	// StdoutLine and StderrLine, if set, are called with each line (without
	// its newline) the child prints on that stream, from a goroutine of
	// their own. Unset streams are discarded.
	StdoutLine, StderrLine func(line string)
	// OnExit, if set, is called once per incarnation after the child has
	// exited and its output has been read, before Wait returns that exit.
	OnExit func(Exit)
}

// Exit tells how one incarnation ended.
type Exit struct {
	// Incarnation is the number of the start that ended (1 for the first).
	Incarnation int
	// PID was the incarnation's process ID.
	PID int
	// Err is exec.Cmd.Wait's error: nil after exit status 0, else an
	// *exec.ExitError naming the status or the signal.
	Err error
	// Requested is set when Kill, Terminate or the Supervisor's Close was
	// called on this incarnation before it ended: an exit the supervisor
	// asked for, not a crash.
	Requested bool
}

// String describes the exit as exec does ("exit status 1", "signal:
// killed"); a clean exit is "exit status 0".
func (e Exit) String() string {
	if e.Err == nil {
		return "exit status 0"
	}
	return e.Err.Error()
}

// Supervisor starts processes from one locked OS thread (see the package
// doc) and stops whatever still runs when it is closed. Its methods are
// safe for concurrent use.
type Supervisor struct {
	spawn chan func()

	mu     sync.Mutex
	closed bool
	procs  []*Process
}

// NewSupervisor returns a Supervisor. Close it when done: that stops its
// spawning goroutine and kills every child still running.
func NewSupervisor() *Supervisor {
	s := &Supervisor{spawn: make(chan func())}
	go func() {
		// Never unlocked: the thread dies with the goroutine at Close,
		// after every child has exited.
		runtime.LockOSThread()
		for f := range s.spawn {
			f()
		}
	}()
	return s
}

// Process returns a stopped Process that runs spec; Start starts it.
func (s *Supervisor) Process(spec Spec) *Process {
	p := &Process{sup: s, spec: spec}
	s.mu.Lock()
	s.procs = append(s.procs, p)
	s.mu.Unlock()
	return p
}

// Close kills every running child of s (SIGKILL, counted as requested),
// waits up to timeout for each to exit, and ends the spawning thread.
// Start fails with ErrClosed afterwards. Close is idempotent; it returns
// an error naming the children that did not exit in time.
func (s *Supervisor) Close(timeout time.Duration) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	procs := s.procs
	s.mu.Unlock()
	for _, p := range procs {
		_ = p.Kill()
	}
	var errs []error
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for _, p := range procs {
		if _, err := p.Wait(ctx); err != nil && !errors.Is(err, ErrNotRunning) {
			errs = append(errs, err)
		}
	}
	// The spawning thread exits now: with Pdeathsig, anything it started
	// and that still runs gets SIGKILL from the kernel.
	close(s.spawn)
	return errors.Join(errs...)
}

// start runs cmd.Start on the spawning thread.
func (s *Supervisor) start(cmd *exec.Cmd) error {
	s.mu.Lock()
	defer s.mu.Unlock() // Close waits for a start under way
	if s.closed {
		return ErrClosed
	}
	errc := make(chan error, 1)
	s.spawn <- func() { errc <- cmd.Start() }
	return <-errc
}

// Process is one restartable child process. Its methods are safe for
// concurrent use.
type Process struct {
	sup  *Supervisor
	spec Spec

	mu        sync.Mutex
	cur       *run // the current or last incarnation; nil before the first start
	live      bool // cur started and not yet exited
	requested bool // Kill or Terminate was called on cur
	paused    bool
	starts    int
	last      *Exit // of the last incarnation that ended
}

// run is one incarnation.
type run struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited and OnExit returned
	exit Exit          // set before done is closed
}

// Start starts a new incarnation. It fails with ErrRunning if the last
// one has not exited, and ErrClosed after the Supervisor's Close.
func (p *Process) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.live {
		return fmt.Errorf("%w (pid %d)", ErrRunning, p.cur.cmd.Process.Pid)
	}
	if p.spec.LogFile != "" && (p.spec.StdoutLine != nil || p.spec.StderrLine != nil) {
		return errors.New("nodeproc: Spec.LogFile excludes StdoutLine and StderrLine")
	}
	cmd := exec.Command(p.spec.Path, p.spec.Args...)
	if p.spec.Env != nil {
		cmd.Env = append(os.Environ(), p.spec.Env...)
	}
	cmd.SysProcAttr = sysProcAttr()
	incarnation := p.starts + 1

	var logf *os.File
	var readers []func()
	if p.spec.LogFile != "" {
		f, err := os.OpenFile(p.spec.LogFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		fmt.Fprintf(f, "\n===== nodeproc: start #%d %s\n", incarnation, time.Now().Format(time.RFC3339Nano))
		cmd.Stdout, cmd.Stderr, logf = f, f, f
	}
	for _, s := range []struct {
		fn   func(string)
		pipe func() (io.ReadCloser, error)
	}{{p.spec.StdoutLine, cmd.StdoutPipe}, {p.spec.StderrLine, cmd.StderrPipe}} {
		if s.fn == nil {
			continue
		}
		r, err := s.pipe()
		if err != nil {
			return err
		}
		readers = append(readers, func() { readLines(r, s.fn) })
	}
	if err := p.sup.start(cmd); err != nil {
		if logf != nil {
			logf.Close()
		}
		return err
	}
	r := &run{cmd: cmd, done: make(chan struct{})}
	p.starts = incarnation
	p.cur, p.live, p.requested, p.paused = r, true, false, false

	go func() {
		// Wait closes the pipes: read them to the end first.
		var wg sync.WaitGroup
		for _, r := range readers {
			wg.Go(r)
		}
		wg.Wait()
		err := cmd.Wait()
		if logf != nil {
			logf.Close()
		}
		p.mu.Lock()
		r.exit = Exit{Incarnation: incarnation, PID: cmd.Process.Pid, Err: err, Requested: p.requested}
		p.live, p.paused, p.last = false, false, &r.exit
		p.mu.Unlock()
		if p.spec.OnExit != nil {
			p.spec.OnExit(r.exit)
		}
		close(r.done)
	}()
	return nil
}

// readLines calls fn with each line of r, then drains r.
func readLines(r io.Reader, fn func(string)) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	for sc.Scan() {
		fn(sc.Text())
	}
	_, _ = io.Copy(io.Discard, r)
}

// Running reports whether an incarnation is running (possibly paused).
func (p *Process) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.live
}

// Paused reports whether the running incarnation was paused and not
// resumed.
func (p *Process) Paused() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.paused
}

// Incarnation counts the starts so far (0 before the first).
func (p *Process) Incarnation() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.starts
}

// PID returns the running incarnation's process ID, 0 if none runs.
func (p *Process) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.live {
		return 0
	}
	return p.cur.cmd.Process.Pid
}

// LastExit returns how the last incarnation that ended ended, and false
// if none has.
func (p *Process) LastExit() (Exit, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.last == nil {
		return Exit{}, false
	}
	return *p.last, true
}

// Kill sends SIGKILL to the running incarnation's process group and
// returns without waiting (see Wait). It fails with ErrNotRunning if no
// incarnation runs.
func (p *Process) Kill() error { return p.signal(sigKill, true) }

// Terminate sends SIGTERM to the running incarnation's process group
// (asking it to shut down) and returns without waiting. It fails with
// ErrNotRunning if no incarnation runs.
func (p *Process) Terminate() error { return p.signal(sigTerm, true) }

// Pause stops the running incarnation's process group with SIGSTOP. It
// fails with ErrNotRunning if no incarnation runs, and with
// errors.ErrUnsupported off Linux.
func (p *Process) Pause() error { return p.signal(sigStop, false) }

// Resume continues a paused incarnation with SIGCONT. It fails with
// ErrNotRunning if no incarnation runs, and with errors.ErrUnsupported
// off Linux.
func (p *Process) Resume() error { return p.signal(sigCont, false) }

// User1 sends SIGUSR1 to the running incarnation's process group, a
// signal the child gives its own meaning to (a fault build of the node
// stalls its disk: internal/faults). It fails with ErrNotRunning if no
// incarnation runs, and with errors.ErrUnsupported off Linux.
func (p *Process) User1() error { return p.signal(sigUser1, false) }

func (p *Process) signal(sig procSignal, ending bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.live {
		return ErrNotRunning
	}
	if ending {
		p.requested = true
	}
	if err := sendSignal(p.cur.cmd.Process, sig); err != nil {
		return err
	}
	switch sig {
	case sigStop:
		p.paused = true
	case sigCont, sigKill:
		p.paused = false
	}
	return nil
}

// Wait waits until the incarnation running at the call has exited (and
// OnExit has returned) and returns its Exit; if none runs, it returns the
// last Exit at once. It fails with ErrNotRunning if no incarnation ever
// ended, and with an error wrapping ctx's if ctx ends first.
func (p *Process) Wait(ctx context.Context) (Exit, error) {
	p.mu.Lock()
	r := p.cur
	p.mu.Unlock()
	if r == nil {
		return Exit{}, ErrNotRunning
	}
	select {
	case <-r.done:
		return r.exit, nil
	case <-ctx.Done():
		return Exit{}, fmt.Errorf("nodeproc: %s (pid %d) still runs: %w", p.spec.Path, r.cmd.Process.Pid, ctx.Err())
	}
}

// WaitReady calls probe until it returns nil, waiting interval between
// calls. The context probe gets ends when ctx does or when the incarnation
// running at the call exits, so a probe may block (on a readiness signal
// of its own) rather than poll. WaitReady fails with an error wrapping
// ErrExited and naming the exit when the incarnation exits first, and
// with an error wrapping ctx's and naming probe's last error when ctx
// ends first. It fails with ErrNotRunning if no incarnation runs.
func (p *Process) WaitReady(ctx context.Context, interval time.Duration, probe func(context.Context) error) error {
	p.mu.Lock()
	r, live := p.cur, p.live
	p.mu.Unlock()
	if !live {
		return ErrNotRunning
	}
	done := r.done
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-done:
			cancel()
		case <-pctx.Done():
		}
	}()
	exited := func() error {
		select {
		case <-done:
			return fmt.Errorf("%w during start-up (%s)", ErrExited, r.exit)
		default:
			return nil
		}
	}
	for {
		err := probe(pctx)
		if err == nil {
			return nil
		}
		if xerr := exited(); xerr != nil {
			return xerr
		}
		if ctx.Err() != nil {
			return fmt.Errorf("not ready: %w (last: %v)", ctx.Err(), err)
		}
		select {
		case <-pctx.Done():
		case <-time.After(interval):
		}
	}
}

// FreeAddrs returns n distinct loopback TCP addresses ("127.0.0.1:PORT")
// that were free a moment ago: all are held open until all are found, so
// they differ, but another process may take one before the caller binds
// it.
func FreeAddrs(n int) ([]string, error) {
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	var addrs []string
	for range n {
		ln, err := listenBelowEphemeral()
		if err != nil {
			return nil, err
		}
		lns = append(lns, ln)
		addrs = append(addrs, ln.Addr().String())
	}
	return addrs, nil
}

// listenBelowEphemeral listens on a free loopback port below Linux's
// ephemeral range (32768–60999 by default): a port the kernel handed out
// for :0 is in that range, and between FreeAddrs closing it and the node
// binding it any outgoing connection on the machine may take it as its
// source port (a fault test's node once failed to start with "address
// already in use"). Random ports from 20000–32767 are tried; after 50
// taken ones, the kernel's choice.
func listenBelowEphemeral() (net.Listener, error) {
	for range 50 {
		port := 20000 + rand.IntN(32768-20000)
		if ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
			return ln, nil
		}
	}
	return net.Listen("tcp", "127.0.0.1:0")
}
