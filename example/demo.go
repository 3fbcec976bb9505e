package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/replog-io/replog/internal/nodeproc"
)

// demoIDs returns the demo's node IDs: voters n1..nN (the bootstrap set
// of every node), then spares, which are observers (not in -voters) and
// are not started until the control API is asked to: start one, then make
// it a voter with a dashboard's "add voter".
func demoIDs(voters, spares int) (vs, ss []string) {
	for i := 1; i <= voters+spares; i++ {
		id := fmt.Sprintf("n%d", i)
		if i <= voters {
			vs = append(vs, id)
		} else {
			ss = append(ss, id)
		}
	}
	return vs, ss
}

// Timeouts of the demo supervisor.
const (
	readyTimeout = 60 * time.Second // a started node prints http=ADDR within this
	stopTimeout  = 10 * time.Second // SIGTERM, then SIGKILL after this
)

// child is one node process of the demo.
type child struct {
	id    string
	url   string            // HTTP base URL (fixed across restarts)
	dir   string            // data directory (the wipe action deletes it)
	spare bool              // not started with the demo
	proc  *nodeproc.Process // nil in tests without processes

	// Guarded by demo.mu.
	state    string        // "starting", "running", "stopped"
	ready    chan struct{} // closed when the current process prints http=ADDR
	lastExit string
}

// nodeStateJSON is one node in the control API.
type nodeStateJSON struct {
	ID       string `json:"id"`
	URL      string `json:"url"`
	Spare    bool   `json:"spare,omitempty"`
	State    string `json:"state"`
	PID      int    `json:"pid,omitempty"`
	LastExit string `json:"last_exit,omitempty"`
}

// demo supervises the demo's node processes. It never restarts a node on
// its own: the dashboard's buttons (through the control API) do.
type demo struct {
	out    *lineWriter // the parent's stdout, shared by the children's output
	errOut *lineWriter
	// sup starts the children (in process groups of their own, killed by
	// the kernel if the demo dies).
	sup *nodeproc.Supervisor

	mu       sync.Mutex
	children map[string]*child
	order    []string
	stopping bool // set by stopAll: no more starts
	// op serialises kill/restart of the same node (one at a time overall).
	op sync.Mutex
}

// runDemo starts the voters (cfg.nodes), serves the control API, prints
// the URLs and waits for ctx to end; then it stops every node (SIGTERM,
// then SIGKILL). The spares (cfg.spares) wait for the control API.
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

	voters, spares := demoIDs(cfg.nodes, cfg.spares)
	all := append(slices.Clone(voters), spares...)
	free, err := nodeproc.FreeAddrs(3 * len(all))
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
	for i, id := range all {
		na[id] = addrs{
			http:   free[3*i],
			rpc:    free[3*i+1],
			gossip: free[3*i+2],
		}
	}
	d := &demo{
		out:      &lineWriter{w: stdout},
		errOut:   &lineWriter{w: stderr},
		sup:      nodeproc.NewSupervisor(),
		children: map[string]*child{},
		order:    all,
	}
	// After stopAll (deferred below): kills only what did not stop.
	defer func() {
		if err := d.sup.Close(stopTimeout); err != nil {
			d.errOut.line(err.Error())
		}
	}()

	for _, id := range all {
		var peers, httpPeers, join []string
		for _, other := range all {
			if other == id {
				continue
			}
			// A voter does not name the spares as static peers: a brand-new
			// cluster bootstraps only once every node it knows of has
			// answered (R60), and a spare is not started until asked. It
			// learns a spare's address from gossip once the spare joins.
			if !slices.Contains(spares, other) || slices.Contains(spares, id) {
				peers = append(peers, other+"="+na[other].rpc)
			}
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
			"-voters", strings.Join(voters, ","),
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
		if cfg.manualVoters {
			args = append(args, "-manual-voter-changes")
		}
		if cfg.logs > 0 {
			args = append(args, "-logs", strconv.Itoa(cfg.logs))
		}
		if cfg.pipeline != "" && id == voters[0] {
			// One pipeline: each would append its own outputs.
			args = append(args, "-pipeline", cfg.pipeline, "-pipeline-cursor", cfg.pipelineCursor)
		}
		for _, f := range []struct {
			name string
			v    time.Duration
		}{{"-fetch-timeout", cfg.fetchTimeout}, {"-election-timeout", cfg.electionTimeout}, {"-fetch-max-wait", cfg.fetchMaxWait}} {
			if f.v > 0 {
				args = append(args, f.name, f.v.String())
			}
		}
		if cfg.retentionAge > 0 {
			args = append(args, "-retention-age", cfg.retentionAge.String())
		}
		for _, f := range []struct {
			name string
			v    int64
		}{{"-retention-bytes", cfg.retentionBytes}, {"-segment-bytes", cfg.segmentBytes},
			{"-fetch-max-bytes", cfg.fetchMaxBytes}, {"-kv-snapshot-bytes", cfg.kvSnapshotBytes}} {
			if f.v > 0 {
				args = append(args, f.name, strconv.FormatInt(f.v, 10))
			}
		}
		args = append(args, "-kv-snapshot-every", strconv.Itoa(cfg.kvSnapshotEvery))
		if cfg.retainUntilSnapshot {
			args = append(args, "-retain-until-snapshot")
		}
		c := d.newChild(id, "http://"+na[id].http, exe, args)
		c.dir, c.spare = filepath.Join(dir, id), slices.Contains(spares, id)
		d.children[id] = c
	}

	var dashboards []string
	for _, id := range all {
		dashboards = append(dashboards, d.children[id].url)
	}
	srv := newHTTPServer(guard(dashboards, d.controlHandler(), ctlLogger), ctlLogger)
	go func() { _ = srv.Serve(controlLn) }()
	defer srv.Close()
	defer d.stopAll()

	fmt.Fprintf(d.out, "replog demo: %d voters, %d spares, data in %s\n", len(voters), len(spares), dir)
	// Start the voters at once: a new cluster's first election needs
	// every one of them.
	readies := map[string]chan error{}
	for _, id := range voters {
		ch := make(chan error, 1)
		readies[id] = ch
		go func() { ch <- d.start(id) }()
	}
	for _, id := range voters {
		select {
		case err := <-readies[id]:
			if err != nil {
				return fmt.Errorf("starting %s: %w", id, err)
			}
		case <-ctx.Done():
			return nil
		}
	}
	for _, id := range voters {
		fmt.Fprintf(d.out, "dashboard %s %s/\n", id, d.children[id].url)
	}
	for _, id := range spares {
		fmt.Fprintf(d.out, "spare %s %s/ (an observer, not started: its Start button on a dashboard starts it, \"add voter\" makes it a voter)\n", id, d.children[id].url)
	}
	fmt.Fprintf(d.out, "control %s\n", controlURL)
	fmt.Fprintf(d.out, "Open a dashboard URL in a browser. Ctrl-C stops all nodes.\n")

	<-ctx.Done()
	fmt.Fprintf(d.out, "[demo] stopping all nodes\n")
	return nil
}

// newChild returns node id's (stopped) child, which runs exe with args.
// Its output goes to the demo's, each line prefixed with the node's ID.
func (d *demo) newChild(id, url, exe string, args []string) *child {
	c := &child{id: id, url: url, state: "stopped"}
	prefix := "[" + id + "] "
	c.proc = d.sup.Process(nodeproc.Spec{
		Path: exe,
		Args: args,
		StdoutLine: func(line string) {
			if strings.HasPrefix(line, "http=") {
				d.mu.Lock()
				if c.ready != nil {
					select {
					case <-c.ready:
					default:
						close(c.ready)
					}
				}
				d.mu.Unlock()
			}
			d.out.line(prefix + line)
		},
		StderrLine: func(line string) { d.errOut.line(prefix + line) },
		OnExit: func(e nodeproc.Exit) {
			d.mu.Lock()
			c.state, c.lastExit = "stopped", e.String()
			d.mu.Unlock()
			d.out.line(fmt.Sprintf("[demo] %s exited (%s)", id, e))
		},
	})
	return c
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
	ready := make(chan struct{})
	c.ready = ready
	if err := c.proc.Start(); err != nil {
		d.mu.Unlock()
		return err
	}
	c.state = "starting"
	incarnation := c.proc.Incarnation()
	d.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	err := c.proc.WaitReady(ctx, 0, func(ctx context.Context) error {
		select {
		case <-ready:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	switch {
	case err == nil:
		d.mu.Lock()
		if c.state == "starting" && c.proc.Incarnation() == incarnation {
			c.state = "running"
		}
		d.mu.Unlock()
		return nil
	case errors.Is(err, nodeproc.ErrExited):
		return fmt.Errorf("%s exited during startup (%s)", id, c.lastExitLocked(d))
	default:
		return fmt.Errorf("%s did not print http=ADDR within %v", id, readyTimeout)
	}
}

func (c *child) lastExitLocked(d *demo) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return c.lastExit
}

// kill sends SIGKILL to node id (its whole process group) and waits for
// it to exit. graceful sends SIGTERM first and SIGKILL only after
// stopTimeout.
func (d *demo) kill(id string, graceful bool) error {
	d.mu.Lock()
	c := d.children[id]
	if c.state == "stopped" || c.proc == nil {
		d.mu.Unlock()
		return nil
	}
	p := c.proc
	d.mu.Unlock()

	wait := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
		defer cancel()
		_, err := p.Wait(ctx)
		return err
	}
	if graceful {
		_ = p.Terminate()
		if wait() == nil {
			return nil
		}
		d.errOut.line(fmt.Sprintf("%s did not stop within %v after SIGTERM: killing it", id, stopTimeout))
	}
	if err := p.Kill(); err != nil && !errors.Is(err, nodeproc.ErrNotRunning) && !errors.Is(err, os.ErrProcessDone) {
		d.errOut.line(fmt.Sprintf("killing %s: %v", id, err))
	}
	if wait() != nil {
		return fmt.Errorf("%s did not exit after SIGKILL", id)
	}
	return nil
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
		s := nodeStateJSON{ID: id, URL: c.url, Spare: c.spare, State: c.state, LastExit: c.lastExit}
		if c.state != "stopped" && c.proc != nil {
			s.PID = c.proc.PID()
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
//	                          (a spare's first start too)
//	POST /nodes/{id}/wipe     stop it gracefully, delete its data directory,
//	                          start it again: a new incarnation, which fetches
//	                          as an observer until it is a voter again
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
		case "wipe":
			d.out.line("[demo] wipe " + id + ": stop, delete its data directory, start")
			if err = d.kill(id, true); err == nil {
				err = d.wipe(id)
			}
			if err == nil {
				err = d.start(id)
			}
		default:
			writeJSON(w, http.StatusNotFound, apiError{Error: "no action " + action + "; use kill, restart or wipe"})
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

// wipe deletes stopped node id's data directory.
func (d *demo) wipe(id string) error {
	d.mu.Lock()
	c := d.children[id]
	dir := c.dir
	d.mu.Unlock()
	if dir == "" {
		return fmt.Errorf("%s has no data directory to wipe", id)
	}
	return os.RemoveAll(dir)
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
