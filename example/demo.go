package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
)

// demoIDs are the demo's nodes, all voters.
var demoIDs = []string{"n1", "n2", "n3"}

// Timeouts of the demo supervisor.
const (
	readyTimeout = 60 * time.Second // a started node prints http=ADDR within this
	stopTimeout  = 10 * time.Second // SIGTERM, then SIGKILL after this
)

// child is one node process of the demo.
type child struct {
	id   string
	args []string
	url  string // HTTP base URL (fixed across restarts)

	// Guarded by demo.mu.
	cmd      *exec.Cmd
	state    string        // "starting", "running", "stopped"
	exited   chan struct{} // closed when the current process has exited
	lastExit string
}

// nodeStateJSON is one node in the control API.
type nodeStateJSON struct {
	ID       string `json:"id"`
	URL      string `json:"url"`
	State    string `json:"state"`
	PID      int    `json:"pid,omitempty"`
	LastExit string `json:"last_exit,omitempty"`
}

// demo supervises the demo's node processes. It never restarts a node on
// its own: the dashboard's buttons (through the control API) do.
type demo struct {
	exe    string
	out    *lineWriter // the parent's stdout, shared by the children's output
	errOut *lineWriter
	// spawn runs process starts on one locked OS thread: Pdeathsig fires
	// when the thread that started a child exits, and Go may retire the
	// threads of other goroutines.
	spawn chan func()

	mu       sync.Mutex
	children map[string]*child
	order    []string
	stopping bool // set by stopAll: no more starts
	// op serialises kill/restart of the same node (one at a time overall).
	op sync.Mutex
}

// runDemo starts three nodes, serves the control API, prints the URLs and
// waits for ctx to end; then it stops every node (SIGTERM, then SIGKILL).
func runDemo(ctx context.Context, cfg config, stdout, stderr io.Writer) (err error) {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	dir := cfg.dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "replog-demo-"); err != nil {
			return err
		}
		defer os.RemoveAll(dir)
	} else if dir, err = filepath.Abs(dir); err != nil {
		return err
	}

	// The nodes authenticate each other with a secret the demo makes for
	// this run, handed over in a file only this user can read, in a
	// directory of its own (never in the data directory, which may be
	// kept).
	auth := []string{"-insecure"}
	if !cfg.insecure {
		secretFile := cfg.secretFile
		if secretFile == "" {
			secretDir, err := os.MkdirTemp("", "replog-demo-secret-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(secretDir)
			if secretFile, err = writeSecretFile(secretDir, "secret"); err != nil {
				return err
			}
		} else if secretFile, err = filepath.Abs(secretFile); err != nil {
			return err
		}
		auth = []string{"-secret-file", secretFile}
	}
	ctlLogger := hclog.New(&hclog.LoggerOptions{
		Name:   "control",
		Level:  hclog.LevelFromString(cfg.logLevel),
		Output: stderr,
	})
	if cfg.logLevel == "off" {
		ctlLogger = hclog.NewNullLogger()
	}

	ports, err := freePorts(3 * len(demoIDs))
	if err != nil {
		return err
	}
	controlLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	controlURL := "http://" + controlLn.Addr().String()

	type addrs struct{ http, rpc, gossip string }
	na := map[string]addrs{}
	for i, id := range demoIDs {
		na[id] = addrs{
			http:   fmt.Sprintf("127.0.0.1:%d", ports[3*i]),
			rpc:    fmt.Sprintf("127.0.0.1:%d", ports[3*i+1]),
			gossip: fmt.Sprintf("127.0.0.1:%d", ports[3*i+2]),
		}
	}
	d := &demo{
		exe:      exe,
		out:      &lineWriter{w: stdout},
		errOut:   &lineWriter{w: stderr},
		spawn:    make(chan func()),
		children: map[string]*child{},
		order:    demoIDs,
	}
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		for f := range d.spawn {
			f()
		}
	}()
	defer close(d.spawn)

	for _, id := range demoIDs {
		var peers, httpPeers, join []string
		for _, other := range demoIDs {
			if other == id {
				continue
			}
			peers = append(peers, other+"="+na[other].rpc)
			httpPeers = append(httpPeers, other+"=http://"+na[other].http)
			join = append(join, na[other].gossip)
		}
		args := []string{
			"-id", id,
			"-dir", filepath.Join(dir, id),
			"-http", na[id].http,
			"-rpc", na[id].rpc,
			"-gossip", na[id].gossip,
			"-join", strings.Join(join, ","),
			"-voters", strings.Join(demoIDs, ","),
			"-peers", strings.Join(peers, ","),
			"-http-peers", strings.Join(httpPeers, ","),
			"-cluster", cfg.cluster,
			"-control", controlURL,
			"-log-level", cfg.logLevel,
		}
		args = append(args, auth...)
		if cfg.nosync {
			args = append(args, "-nosync")
		}
		for _, f := range []struct {
			name string
			v    time.Duration
		}{{"-fetch-timeout", cfg.fetchTimeout}, {"-election-timeout", cfg.electionTimeout}, {"-fetch-max-wait", cfg.fetchMaxWait}} {
			if f.v > 0 {
				args = append(args, f.name, f.v.String())
			}
		}
		d.children[id] = &child{id: id, args: args, url: "http://" + na[id].http, state: "stopped"}
	}

	var dashboards []string
	for _, id := range demoIDs {
		dashboards = append(dashboards, d.children[id].url)
	}
	srv := newHTTPServer(guard(dashboards, d.controlHandler(), ctlLogger), ctlLogger)
	go func() { _ = srv.Serve(controlLn) }()
	defer srv.Close()
	defer d.stopAll()

	fmt.Fprintf(d.out, "replog demo: %d nodes, data in %s\n", len(demoIDs), dir)
	// Start all at once: each node's Open may wait for the others.
	readies := map[string]chan error{}
	for _, id := range demoIDs {
		ch := make(chan error, 1)
		readies[id] = ch
		go func() { ch <- d.start(id) }()
	}
	for _, id := range demoIDs {
		select {
		case err := <-readies[id]:
			if err != nil {
				return fmt.Errorf("starting %s: %w", id, err)
			}
		case <-ctx.Done():
			return nil
		}
	}
	for _, id := range demoIDs {
		fmt.Fprintf(d.out, "dashboard %s %s/\n", id, d.children[id].url)
	}
	fmt.Fprintf(d.out, "control %s\n", controlURL)
	fmt.Fprintf(d.out, "Open a dashboard URL in a browser. Ctrl-C stops all nodes.\n")

	<-ctx.Done()
	fmt.Fprintf(d.out, "[demo] stopping all nodes\n")
	return nil
}

// start starts node id's process and waits until it serves HTTP or exits.
func (d *demo) start(id string) error {
	d.mu.Lock()
	c := d.children[id]
	if d.stopping {
		d.mu.Unlock()
		return errors.New("the demo is stopping")
	}
	if c.state != "stopped" {
		d.mu.Unlock()
		return fmt.Errorf("%s is %s", id, c.state)
	}
	cmd := exec.Command(d.exe, c.args...)
	cmd.SysProcAttr = childSysProcAttr()
	cmd.Stdin = nil
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		d.mu.Unlock()
		return err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		d.mu.Unlock()
		return err
	}
	started := make(chan error, 1)
	d.spawn <- func() { started <- cmd.Start() }
	if err := <-started; err != nil {
		d.mu.Unlock()
		return err
	}
	exited := make(chan struct{})
	c.cmd, c.state, c.exited = cmd, "starting", exited
	d.mu.Unlock()

	ready := make(chan struct{})
	var readyOnce sync.Once
	var pipes sync.WaitGroup
	pipes.Add(2)
	prefix := "[" + id + "] "
	go func() {
		defer pipes.Done()
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, "http=") {
				readyOnce.Do(func() { close(ready) })
			}
			d.out.line(prefix + line)
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	go func() {
		defer pipes.Done()
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			d.errOut.line(prefix + sc.Text())
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	go func() {
		pipes.Wait() // Wait closes the pipes: read them to the end first
		err := cmd.Wait()
		d.mu.Lock()
		c.state = "stopped"
		c.lastExit = exitText(err)
		d.mu.Unlock()
		d.out.line(fmt.Sprintf("[demo] %s exited (%s)", id, c.lastExit))
		close(exited)
	}()

	select {
	case <-ready:
		d.mu.Lock()
		if c.cmd == cmd && c.state == "starting" {
			c.state = "running"
		}
		d.mu.Unlock()
		return nil
	case <-exited:
		return fmt.Errorf("%s exited during startup (%s)", id, c.lastExitLocked(d))
	case <-time.After(readyTimeout):
		return fmt.Errorf("%s did not print http=ADDR within %v", id, readyTimeout)
	}
}

func (c *child) lastExitLocked(d *demo) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return c.lastExit
}

// exitText describes how a process ended.
func exitText(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// kill sends SIGKILL to node id (its whole process group) and waits for
// it to exit. graceful sends SIGTERM first and SIGKILL only after
// stopTimeout.
func (d *demo) kill(id string, graceful bool) error {
	d.mu.Lock()
	c := d.children[id]
	if c.state == "stopped" || c.cmd == nil {
		d.mu.Unlock()
		return nil
	}
	proc, exited := c.cmd.Process, c.exited
	d.mu.Unlock()

	if graceful {
		_ = proc.Signal(syscall.SIGTERM)
		select {
		case <-exited:
			return nil
		case <-time.After(stopTimeout):
			d.errOut.line(fmt.Sprintf("%s did not stop within %v after SIGTERM: killing it", id, stopTimeout))
		}
	}
	if err := killProcess(proc); err != nil && !errors.Is(err, os.ErrProcessDone) {
		d.errOut.line(fmt.Sprintf("killing %s: %v", id, err))
	}
	select {
	case <-exited:
		return nil
	case <-time.After(stopTimeout):
		return fmt.Errorf("%s did not exit after SIGKILL", id)
	}
}

// stopAll stops every node gracefully, in parallel.
func (d *demo) stopAll() {
	d.mu.Lock()
	d.stopping = true
	d.mu.Unlock()
	d.op.Lock()
	defer d.op.Unlock()
	var wg sync.WaitGroup
	for _, id := range d.order {
		wg.Go(func() {
			if err := d.kill(id, true); err != nil {
				d.errOut.line(err.Error())
			}
		})
	}
	wg.Wait()
}

// states lists the nodes for the control API.
func (d *demo) states() []nodeStateJSON {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []nodeStateJSON
	for _, id := range d.order {
		c := d.children[id]
		s := nodeStateJSON{ID: id, URL: c.url, State: c.state, LastExit: c.lastExit}
		if c.state != "stopped" && c.cmd != nil && c.cmd.Process != nil {
			s.PID = c.cmd.Process.Pid
		}
		out = append(out, s)
	}
	return out
}

// controlHandler serves the demo's control API:
//
//	GET  /nodes               the nodes, their URLs, states and PIDs
//	POST /nodes/{id}/kill     SIGKILL the node (no graceful shutdown)
//	POST /nodes/{id}/restart  stop it gracefully if running, start it again
//	GET  /                    redirect to the first running node's dashboard
func (d *demo) controlHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /nodes", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, d.states())
	})
	mux.HandleFunc("POST /nodes/{id}/{action}", func(w http.ResponseWriter, r *http.Request) {
		id, action := r.PathValue("id"), r.PathValue("action")
		d.mu.Lock()
		_, ok := d.children[id]
		d.mu.Unlock()
		if !ok {
			writeJSON(w, http.StatusNotFound, apiError{Error: "no node " + id})
			return
		}
		d.op.Lock()
		defer d.op.Unlock()
		var err error
		switch action {
		case "kill":
			d.out.line("[demo] kill -9 " + id)
			err = d.kill(id, false)
		case "restart":
			d.out.line("[demo] restart " + id)
			if err = d.kill(id, true); err == nil {
				err = d.start(id)
			}
		default:
			writeJSON(w, http.StatusNotFound, apiError{Error: "no action " + action + "; use kill or restart"})
			return
		}
		// A restart may take longer than the server's WriteTimeout (a
		// node gets stopTimeout to stop and readyTimeout to start).
		extend(http.NewResponseController(w))
		if err != nil {
			writeJSON(w, http.StatusInternalServerError, apiError{Error: err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, d.states())
	})
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		for _, s := range d.states() {
			if s.State == "running" {
				http.Redirect(w, r, s.URL+"/", http.StatusFound)
				return
			}
		}
		writeJSON(w, http.StatusServiceUnavailable, apiError{Error: "no node is running"})
	})
	return mux
}

// freePorts returns n distinct loopback TCP ports that were free a moment
// ago (there is a small window in which another process could take one).
func freePorts(n int) ([]int, error) {
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	var ports []int
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// lineWriter serialises whole lines from several goroutines.
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lineWriter) line(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintln(l.w, s)
}

// Write lets fmt.Fprintf write to l (one call, one write).
func (l *lineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
