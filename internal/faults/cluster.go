package faults

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/replog-io/replog/internal/nodeproc"
)

// BuildNode builds a node binary (pkg, e.g. "./example", of the module
// rooted at modRoot) into dir and returns its path. tags is passed to -tags
// (the core's deliberate-bug tags); race adds -race.
func BuildNode(ctx context.Context, modRoot, dir, pkg, tags string, race bool) (string, error) {
	bin := filepath.Join(dir, "replog-node")
	// -buildvcs=auto overrides a GOFLAGS=-buildvcs=false so that the
	// binary records the revision it was built from (BinaryRevision).
	args := []string{"build", "-buildvcs=auto", "-o", bin}
	if tags != "" {
		args = append(args, "-tags", tags)
	}
	if race {
		args = append(args, "-race")
	}
	args = append(args, pkg)
	// $GOROOT/bin/go if GOROOT is set, else the go command on PATH.
	goCmd := "go"
	if root := os.Getenv("GOROOT"); root != "" {
		goCmd = filepath.Join(root, "bin", "go")
	}
	cmd := exec.CommandContext(ctx, goCmd, args...)
	cmd.Dir = modRoot
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return bin, nil
}

// ModuleRoot walks up from the working directory to the directory holding
// go.mod.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("go.mod not found")
		}
		dir = parent
	}
}

// ClusterConfig configures a Cluster of example-node processes.
type ClusterConfig struct {
	// Bin is the node binary (BuildNode).
	Bin string
	// Root holds one data directory and one log file per node.
	Root string
	// Nodes is the number of voters (n1..nN).
	Nodes int
	// Observers is the number of non-voting nodes (o1..oM): they fetch,
	// serve reads and forward appends, and never vote or count for the HW.
	Observers int
	// Protocol tuning passed to every node.
	FetchTimeout, ElectionTimeout, FetchMaxWait time.Duration
	// Gossip turns memberlist on (UDP+TCP on loopback, every node joining
	// the others). Gossip is not proxied, so it is not partitioned: only use
	// it with process faults (kills, pauses).
	Gossip bool
	// DirectLinks has the nodes dial each other's RPC ports directly
	// instead of through Net's proxies, which run in the harness's process
	// and so share its CPU: a run that starves the harness (a CPU hog)
	// then measures the nodes, not the proxies. Net still exists, but its
	// links carry nothing: blocks, delays and loss have no effect, so only
	// use it with process faults or none.
	DirectLinks bool
	// ExtraArgs are appended to every node's command line, ObserverArgs
	// to the observers' after them.
	ExtraArgs, ObserverArgs []string
	// Insecure runs the nodes with -insecure. By default they authenticate
	// each other with a random secret, written for the run to Root/secret
	// (mode 0600) and passed as -secret-file, as a deployment would.
	Insecure bool
	// AppendTimeout is the node's -append-timeout: how long /append waits
	// for a commit before answering "unknown" (0: the node's default).
	AppendTimeout time.Duration
	// DiskStall, if set, is how long each StallDisk stalls a node's disk.
	// The binary must be built with the tag DiskStallTag (BuildNode);
	// every node then runs with REPLOG_FAULT_DISK_STALL set to it.
	DiskStall time.Duration
	// KVEntries says the default log holds the example's key-value
	// entries beside the records (a run that writes /kv/): Entries leaves
	// them out, as it does the log's control entries, so that the record
	// checker sees only records (CheckKV checks the KV's).
	KVEntries bool
	// Logf, if set, receives harness progress lines.
	Logf func(format string, args ...any)
}

// DiskStallTag is the build tag of a node binary whose disk the harness
// can stall (the root package's faultstall.go): with
// REPLOG_FAULT_DISK_STALL=D, each SIGUSR1 makes every store write that
// starts within D wait until D has passed, and each write held logs how
// long it waited. Never build a release with it.
const DiskStallTag = "replog_fault_disk_stall"

// Status is the part of a node's /status the harness uses.
type Status struct {
	NodeID   string `json:"node_id"`
	Role     string `json:"role"`
	Epoch    uint64 `json:"epoch"`
	LeaderID string `json:"leader_id"`
	LEO      uint64 `json:"leo"`
	HW       uint64 `json:"hw"`
	LogStart uint64 `json:"log_start"`
	// DirectoryID is the node's data directory's ID: a wiped node comes
	// back with a new one, and is not its old self as a voter (R56).
	DirectoryID string `json:"directory_id"`
	// Voters is the voter set in force on the node, recorded at
	// VotersOffset (committed once HW passes it).
	Voters       []VoterStatus `json:"voters"`
	VotersOffset uint64        `json:"voters_offset"`
	// FeatureLevel is the cluster feature level the node knows finalized
	// (R68).
	FeatureLevel int `json:"feature_level"`
}

// VoterStatus is one voter of a Status: a node at one data directory
// (CaughtUp is known on the leader only).
type VoterStatus struct {
	ID          string `json:"id"`
	DirectoryID string `json:"directory_id"`
	CaughtUp    bool   `json:"caught_up"`
}

// VotersCommitted reports whether the node's voter set in force is
// committed (its HW passed the entry that recorded it).
func (s Status) VotersCommitted() bool { return s.HW > s.VotersOffset }

// VoterAt returns the voter named id in the set in force, if any.
func (s Status) VoterAt(id string) (VoterStatus, bool) {
	for _, v := range s.Voters {
		if v.ID == id {
			return v, true
		}
	}
	return VoterStatus{}, false
}

// votersKey is the voter set in force as one comparable string.
func (s Status) votersKey() string {
	var b strings.Builder
	fmt.Fprintf(&b, "@%d", s.VotersOffset)
	for _, v := range s.Voters {
		b.WriteString(" " + v.ID + "/" + v.DirectoryID)
	}
	return b.String()
}

// Node is one example-node process, restartable on the same directory and
// ports.
type Node struct {
	ID string
	// Observer is set for a non-voting node.
	Observer bool
	Dir      string
	HTTPAddr string
	RPCAddr  string
	args     []string
	logPath  string
	proc     *nodeproc.Process
	// wipes counts the deletions of Dir; wiping is set while one is under
	// way (the nemesis restarts nothing then: the wipe does). startMu
	// orders Start and Wipe: no process starts on a directory being
	// deleted.
	wipes   atomic.Int32
	wiping  atomic.Bool
	startMu sync.Mutex
}

// Cluster runs Nodes voter processes on loopback. Every node reaches every
// other node's RPC port through a Network proxy, so that the harness can
// partition them; gossip is off (memberlist advertises one address per
// node, which would bypass the per-link proxies).
type Cluster struct {
	cfg    ClusterConfig
	Nodes  []*Node
	Net    *Network
	client *http.Client
	sup    *nodeproc.Supervisor

	// log is the named log whose routes (/logs/NAME/...) the HTTP
	// methods use; empty: the node's default log (ForLog).
	log string

	mu      sync.Mutex
	crashes []string
}

// ForLog returns a view of c whose HTTP methods (Status, Append,
// Entries, FinalLog, ...) address the named log name on every node
// (/logs/NAME/...); the empty name is the default log. The view shares
// c's nodes, network and client; start, stop and fault the processes
// through c, which records their exits.
func (c *Cluster) ForLog(name string) *Cluster {
	return &Cluster{cfg: c.cfg, Nodes: c.Nodes, Net: c.Net, client: c.client, sup: c.sup, log: name}
}

// base is the URL of n's routes for c's log.
func (c *Cluster) base(n *Node) string {
	if c.log == "" {
		return "http://" + n.HTTPAddr
	}
	return "http://" + n.HTTPAddr + "/logs/" + url.PathEscape(c.log)
}

// Crashes lists the node exits the harness did not cause (a panic, a
// fatal error): each is a bug.
func (c *Cluster) Crashes() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.crashes...)
}

func (c *Cluster) logf(format string, args ...any) {
	if c.cfg.Logf != nil {
		c.cfg.Logf(format, args...)
	}
}

// StartCluster starts every node and waits until each serves /status. On
// error the nodes already started are stopped.
func StartCluster(ctx context.Context, cfg ClusterConfig) (*Cluster, error) {
	c := &Cluster{cfg: cfg, client: &http.Client{Transport: &http.Transport{
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     5 * time.Second,
		DialContext:         (&net.Dialer{Timeout: 2 * time.Second}).DialContext,
	}}}
	auth := []string{"-insecure"}
	if !cfg.Insecure {
		secretFile, err := writeSecret(cfg.Root)
		if err != nil {
			return nil, err
		}
		auth = []string{"-secret-file", secretFile}
	}
	var ids, voters []string
	rpc, gossip := map[string]string{}, map[string]string{}
	perNode := 2 // HTTP, RPC
	if cfg.Gossip {
		perNode++
	}
	free, err := nodeproc.FreeAddrs(perNode * (cfg.Nodes + cfg.Observers))
	if err != nil {
		return nil, err
	}
	for i := 1; i <= cfg.Nodes+cfg.Observers; i++ {
		id := fmt.Sprintf("n%d", i)
		observer := i > cfg.Nodes
		if observer {
			id = fmt.Sprintf("o%d", i-cfg.Nodes)
		} else {
			voters = append(voters, id)
		}
		addrs := free[perNode*(i-1) : perNode*i]
		httpAddr, rpcAddr := addrs[0], addrs[1]
		dir := filepath.Join(cfg.Root, id)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		ids = append(ids, id)
		rpc[id] = rpcAddr
		if cfg.Gossip {
			// memberlist binds TCP and UDP on the same port: take a port
			// free for TCP and hope UDP is free too (loopback, rarely not).
			gossip[id] = addrs[2]
		}
		c.Nodes = append(c.Nodes, &Node{ID: id, Dir: dir, HTTPAddr: httpAddr, RPCAddr: rpcAddr,
			Observer: observer, logPath: filepath.Join(cfg.Root, id+".log")})
	}
	nw, err := NewNetwork(ids, rpc)
	if err != nil {
		return nil, err
	}
	c.Net = nw
	c.sup = nodeproc.NewSupervisor()
	for _, n := range c.Nodes {
		var peers, httpPeers []string
		for _, m := range c.Nodes {
			if m != n {
				addr := nw.Link(n.ID, m.ID).Addr()
				if cfg.DirectLinks {
					addr = m.RPCAddr
				}
				peers = append(peers, m.ID+"="+addr)
				httpPeers = append(httpPeers, m.ID+"=http://"+m.HTTPAddr)
			}
		}
		gossipArgs := []string{"-gossip="}
		if cfg.Gossip {
			var join []string
			for _, m := range c.Nodes {
				if m != n {
					join = append(join, gossip[m.ID])
				}
			}
			gossipArgs = []string{"-gossip", gossip[n.ID], "-join", strings.Join(join, ",")}
		}
		n.args = append([]string{
			"-id", n.ID, "-dir", n.Dir, "-http", n.HTTPAddr, "-rpc", n.RPCAddr,
			"-voters", strings.Join(voters, ","),
			"-peers", strings.Join(peers, ","), "-http-peers", strings.Join(httpPeers, ","),
			"-cluster", "replog-faults",
			"-fetch-timeout", cfg.FetchTimeout.String(),
			"-election-timeout", cfg.ElectionTimeout.String(),
			"-fetch-max-wait", cfg.FetchMaxWait.String(),
			// The dashboard's status sampling is not needed here.
			"-sample-interval", "0",
		}, gossipArgs...)
		n.args = append(n.args, auth...)
		if cfg.AppendTimeout > 0 {
			n.args = append(n.args, "-append-timeout", cfg.AppendTimeout.String())
		}
		n.args = append(n.args, cfg.ExtraArgs...)
		if n.Observer {
			n.args = append(n.args, cfg.ObserverArgs...)
		}
		var env []string
		if cfg.DiskStall > 0 {
			env = []string{"REPLOG_FAULT_DISK_STALL=" + cfg.DiskStall.String()}
		}
		n.proc = c.sup.Process(nodeproc.Spec{Path: cfg.Bin, Args: n.args, Env: env, LogFile: n.logPath, OnExit: c.onExit(n)})
	}
	for _, n := range c.Nodes {
		if err := c.Start(n); err != nil {
			c.Stop()
			return nil, err
		}
	}
	for _, n := range c.Nodes {
		if err := c.WaitReady(ctx, n); err != nil {
			c.Stop()
			return nil, err
		}
	}
	return c, nil
}

// writeSecret writes a fresh cluster secret (32 random bytes, hex) to
// root/secret, readable by its owner only, and returns the file's path.
func writeSecret(root string) (string, error) {
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", err
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(root, "secret")
	if err := os.WriteFile(path, []byte(hex.EncodeToString(raw)+"\n"), 0o600); err != nil {
		return "", err
	}
	// WriteFile keeps the mode of a file that already exists.
	if err := os.Chmod(path, 0o600); err != nil {
		return "", err
	}
	return path, nil
}

// Voters returns the voting nodes.
func (c *Cluster) Voters() []*Node {
	var vs []*Node
	for _, n := range c.Nodes {
		if !n.Observer {
			vs = append(vs, n)
		}
	}
	return vs
}

// Start starts n's process (it must not be running). It waits for a Wipe
// of n under way, which starts n itself.
func (c *Cluster) Start(n *Node) error {
	n.startMu.Lock()
	defer n.startMu.Unlock()
	if err := n.proc.Start(); err != nil {
		return fmt.Errorf("%s: %w", n.ID, err)
	}
	return nil
}

// onExit records an exit of n that the harness did not cause as a crash.
func (c *Cluster) onExit(n *Node) func(nodeproc.Exit) {
	return func(e nodeproc.Exit) {
		if e.Requested {
			return
		}
		msg := fmt.Sprintf("%s exited on its own at %s: %s (see %s)", n.ID, time.Now().Format("15:04:05.000"), e, n.logPath)
		c.logf("CRASH: %s", msg)
		c.mu.Lock()
		c.crashes = append(c.crashes, msg)
		c.mu.Unlock()
	}
}

// Running reports whether n's process is up (possibly paused).
func (n *Node) Running() bool { return n.proc.Running() }

// Incarnation counts n's process starts.
func (n *Node) Incarnation() int { return n.proc.Incarnation() }

// Paused reports whether n is stopped with SIGSTOP.
func (n *Node) Paused() bool { return n.proc.Paused() }

// Wipes counts the times n's data directory was deleted (Cluster.Wipe).
func (n *Node) Wipes() int { return int(n.wipes.Load()) }

// Wiping reports whether a Cluster.Wipe of n is under way.
func (n *Node) Wiping() bool { return n.wiping.Load() }

// Wipe SIGKILLs n (if it runs), deletes its data directory and starts it
// again empty on the same ID, ports and flags: a new incarnation with a
// new directory ID. An observer must catch up from the leader's log start
// (R53); a voter comes back as an observer too (R56) and is made a voter
// again at its new directory by the leader once its old incarnation has
// been silent for FetchTimeout and it caught up (R58). The caller keeps
// at most one voter without its disk at a time (Nemesis.wipeVoter).
// WaitReady after Wipe sees the new process.
func (c *Cluster) Wipe(n *Node) error {
	if !n.wiping.CompareAndSwap(false, true) {
		return fmt.Errorf("%s: a wipe is already under way", n.ID)
	}
	defer n.wiping.Store(false)
	n.startMu.Lock()
	defer n.startMu.Unlock()
	c.Kill(n)
	if err := os.RemoveAll(n.Dir); err != nil {
		return fmt.Errorf("%s: wiping %s: %w", n.ID, n.Dir, err)
	}
	if err := os.MkdirAll(n.Dir, 0o755); err != nil {
		return err
	}
	n.wipes.Add(1)
	if err := n.proc.Start(); err != nil {
		return fmt.Errorf("%s: %w", n.ID, err)
	}
	return nil
}

// DiskUsage returns the number of segment files (sealed and active) in
// n's data directory and the bytes of all its files.
func (n *Node) DiskUsage() (segments int, bytes int64) {
	ents, err := os.ReadDir(n.Dir)
	if err != nil {
		return 0, 0
	}
	for _, e := range ents {
		name := e.Name()
		if name == "replog.db" || strings.HasPrefix(name, "replog-") && strings.HasSuffix(name, ".seg") {
			segments++
		}
		if fi, err := e.Info(); err == nil && fi.Mode().IsRegular() {
			bytes += fi.Size()
		}
	}
	return segments, bytes
}

// Kill SIGKILLs the process groups of nodes (all signals first, so they
// die together), waits for each process to exit and returns the nodes it
// killed (nodes not running are skipped).
func (c *Cluster) Kill(nodes ...*Node) []*Node {
	var victims []*Node
	for _, n := range nodes {
		err := n.proc.Kill()
		if errors.Is(err, nodeproc.ErrNotRunning) {
			continue
		}
		if err != nil {
			c.logf("%s: SIGKILL: %v", n.ID, err)
		}
		victims = append(victims, n)
	}
	for _, n := range victims {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if _, err := n.proc.Wait(ctx); err != nil {
			c.logf("%s: no exit 30s after SIGKILL: %v", n.ID, err)
		}
		cancel()
	}
	return victims
}

// Terminate sends SIGTERM to n (the example closes its Log: a leader
// hands its leadership over first) and waits up to timeout for it to
// exit, then SIGKILLs it. It returns false if n was not running.
func (c *Cluster) Terminate(n *Node, timeout time.Duration) bool {
	if err := n.proc.Terminate(); err != nil {
		if !errors.Is(err, nodeproc.ErrNotRunning) {
			c.logf("%s: SIGTERM: %v", n.ID, err)
		}
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if _, err := n.proc.Wait(ctx); err != nil {
		c.logf("%s: no exit %v after SIGTERM, SIGKILL: %v", n.ID, timeout, err)
		c.Kill(n)
	}
	return true
}

// Pause sends SIGSTOP to n (no-op if it is not running).
func (c *Cluster) Pause(n *Node) bool { return n.proc.Pause() == nil }

// StallDisk stalls the disks of nodes for ClusterConfig.DiskStall
// (SIGUSR1 to a binary built with DiskStallTag): the writes they start
// meanwhile wait until then. It reports whether every node got the
// signal (a node not running does not).
func (c *Cluster) StallDisk(nodes ...*Node) bool {
	ok := c.cfg.DiskStall > 0
	for _, n := range nodes {
		ok = c.cfg.DiskStall > 0 && n.proc.User1() == nil && ok
	}
	return ok
}

// DiskStalls is what a node's log says of its disk stalls (StallDisk).
type DiskStalls struct {
	// Stalls counts the stalls the node began; Held the writes that
	// waited for one, the longest for Longest.
	Stalls, Held int
	Longest      time.Duration
}

// DiskStalls reads every node's log for its disk stalls: the positive
// control that StallDisk stalled writes (under load each stall holds
// at least one).
func (c *Cluster) DiskStalls() map[string]DiskStalls {
	out := map[string]DiskStalls{}
	for _, n := range c.Nodes {
		data, err := os.ReadFile(n.logPath)
		if err != nil {
			continue
		}
		var ds DiskStalls
		for _, line := range strings.Split(string(data), "\n") {
			const held = "replog fault: disk stall: a write waited "
			switch {
			case strings.HasPrefix(line, "replog fault: disk stall of "):
				ds.Stalls++
			case strings.HasPrefix(line, held):
				ds.Held++
				if d, err := time.ParseDuration(strings.TrimPrefix(line, held)); err == nil {
					ds.Longest = max(ds.Longest, d)
				}
			}
		}
		out[n.ID] = ds
	}
	return out
}

// Resume sends SIGCONT to n.
func (c *Cluster) Resume(n *Node) bool { return n.proc.Resume() == nil }

// WaitReady polls n's /status until it answers or ctx ends.
func (c *Cluster) WaitReady(ctx context.Context, n *Node) error {
	err := n.proc.WaitReady(ctx, 50*time.Millisecond, func(ctx context.Context) error {
		sctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		_, err := c.Status(sctx, n)
		return err
	})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, nodeproc.ErrExited), errors.Is(err, nodeproc.ErrNotRunning):
		return fmt.Errorf("%s exited during start-up (see %s)", n.ID, n.logPath)
	default:
		return fmt.Errorf("%s %w", n.ID, err)
	}
}

// Stop kills every node and closes the proxies. Safe to call more than
// once.
func (c *Cluster) Stop() {
	if c.sup != nil {
		c.Kill(c.Nodes...)
		if err := c.sup.Close(30 * time.Second); err != nil {
			c.logf("stopping the nodes: %v", err)
		}
	}
	if c.Net != nil {
		_ = c.Net.Close()
	}
	c.client.CloseIdleConnections()
}

// Status fetches n's /status.
func (c *Cluster) Status(ctx context.Context, n *Node) (Status, error) {
	var st Status
	err := c.callJSON(ctx, n, http.MethodGet, "/status", &st)
	return st, err
}

// callJSON sends method path to n and decodes its answer, which must be
// 200 OK, into out.
func (c *Cluster) callJSON(ctx context.Context, n *Node, method, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, c.base(n)+path, nil)
	if err != nil {
		return err
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s %s: HTTP %d", n.ID, method, path, resp.StatusCode)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// Cursor fetches cursor name from n's GET /cursors/{name}: its next
// offset, or ok false if it was never committed (404).
func (c *Cluster) Cursor(ctx context.Context, n *Node, name string) (next uint64, ok bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base(n)+"/cursors/"+url.PathEscape(name), nil)
	if err != nil {
		return 0, false, err
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return 0, false, err
	}
	defer resp.Body.Close()
	var body struct {
		Next  *uint64 `json:"next"`
		Error string  `json:"error"`
	}
	derr := json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&body)
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return 0, false, nil
	case resp.StatusCode != http.StatusOK:
		return 0, false, fmt.Errorf("cursor %s: HTTP %d: %s", name, resp.StatusCode, body.Error)
	case derr != nil || body.Next == nil:
		return 0, false, fmt.Errorf("cursor %s: bad answer (%v)", name, derr)
	}
	return *body.Next, true, nil
}

// Leader asks every running, unpaused node for its status and returns the
// node that says it leads in the highest epoch and that epoch, or nil.
func (c *Cluster) Leader(ctx context.Context) (*Node, uint64) {
	var best *Node
	var bestEpoch uint64
	for _, n := range c.Nodes {
		if !n.Running() || n.Paused() {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, time.Second)
		st, err := c.Status(sctx, n)
		cancel()
		if err == nil && st.Role == "leader" && (best == nil || st.Epoch > bestEpoch) {
			best, bestEpoch = n, st.Epoch
		}
	}
	return best, bestEpoch
}

// ChangeVoter posts /voters/add?node=id (add) or /voters/remove?node=id
// to n and returns the HTTP status (0: no answer) and the error text
// ("" on 200). The node answers once the change is committed (or not).
func (c *Cluster) ChangeVoter(ctx context.Context, n *Node, add bool, id string) (int, string) {
	verb := "remove"
	if add {
		verb = "add"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base(n)+"/voters/"+verb+"?node="+id, nil)
	if err != nil {
		return 0, err.Error()
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return 0, shortErr(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode == http.StatusOK {
		return resp.StatusCode, ""
	}
	var e apiErrorJSON
	if json.Unmarshal(body, &e) == nil && e.Error != "" {
		return resp.StatusCode, truncate(e.Error, 160)
	}
	return resp.StatusCode, truncate(string(body), 160)
}

// apiErrorJSON is the example's error body.
type apiErrorJSON struct {
	Error string `json:"error"`
}

// LeaderStatus returns the leader (Leader) and its status.
func (c *Cluster) LeaderStatus(ctx context.Context) (*Node, Status, bool) {
	n, _ := c.Leader(ctx)
	if n == nil {
		return nil, Status{}, false
	}
	sctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	st, err := c.Status(sctx, n)
	if err != nil || st.Role != "leader" {
		return nil, Status{}, false
	}
	return n, st, true
}

// WaitVoter polls the leader until its voter set in force is committed
// and names id at directory dir (dir "": not at all; caughtUp: and the
// leader counts it caught up), or ctx ends.
func (c *Cluster) WaitVoter(ctx context.Context, id, dir string, caughtUp bool) error {
	var last string
	for {
		if _, st, ok := c.LeaderStatus(ctx); ok && st.VotersCommitted() {
			v, in := st.VoterAt(id)
			switch {
			case dir == "" && !in:
				return nil
			case dir != "" && in && v.DirectoryID == dir && (v.CaughtUp || !caughtUp):
				return nil
			}
			last = "leader " + st.NodeID + "'s committed voters " + st.votersKey()
		}
		select {
		case <-ctx.Done():
			if last == "" {
				last = "no leader with a committed voter set"
			}
			return fmt.Errorf("waiting for voter %s at %q: %w (%s)", id, dir, ctx.Err(), last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// appendResp is /append's JSON body.
type appendResp struct {
	Offset *uint64 `json:"offset"`
	// Duplicate: an earlier append with the request's Idempotency-Key
	// is at Offset; this one appended nothing.
	Duplicate bool   `json:"duplicate"`
	Error     string `json:"error"`
	Outcome   string `json:"outcome"`
	// Code names the error ("timeout": the append's context expired
	// before its outcome was known).
	Code   string `json:"code"`
	Leader string `json:"leader"`
}

// AppendResult is what Cluster.AppendKey made of an /append answer.
type AppendResult struct {
	Outcome Outcome
	// Offset is the acknowledged offset (OK only); Replayed is set when
	// the node answered that an earlier append with the same key is there.
	Offset   uint64
	Replayed bool
	// Err is the error text; Cause why an Unknown outcome is unknown.
	Err, Cause string
}

// Append posts payload to n's /append and classifies the answer: a refused
// connection or an explicit "failed" is Failed; timeouts, broken
// connections, "unknown" and anything unexpected are Unknown.
func (c *Cluster) Append(ctx context.Context, n *Node, payload string) (Outcome, uint64, string) {
	r := c.AppendKey(ctx, n, payload, "")
	return r.Outcome, r.Offset, r.Err
}

// AppendKey is Append with an Idempotency-Key header (none for key ""),
// and says why an unknown outcome is unknown (Cause*).
func (c *Cluster) AppendKey(ctx context.Context, n *Node, payload, key string) AppendResult {
	unknown := func(cause, msg string) AppendResult {
		if ctx.Err() != nil {
			cause = CauseClientTimeout
		}
		return AppendResult{Outcome: Unknown, Err: msg, Cause: cause}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base(n)+"/append", strings.NewReader(payload))
	if err != nil {
		return AppendResult{Outcome: Failed, Err: err.Error()}
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		// A refused dial proves the node never got the request, but not
		// with a key: net/http takes a request with Idempotency-Key for
		// idempotent and, when a kept-alive connection breaks under it
		// (a node killed after it read the request), sends it again on a
		// new one, whose dial error is all Do returns.
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" && key == "" {
			return AppendResult{Outcome: Failed, Err: "dial: " + shortErr(op.Err)}
		}
		return unknown(CauseConnection, shortErr(err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if err != nil {
		return unknown(CauseConnection, "reading response: "+shortErr(err))
	}
	var ar appendResp
	if err := json.Unmarshal(body, &ar); err != nil {
		return unknown(CauseConnection, fmt.Sprintf("HTTP %d, bad JSON %q", resp.StatusCode, truncate(string(body), 100)))
	}
	if resp.StatusCode == http.StatusOK {
		if ar.Offset == nil {
			return unknown(CauseConnection, fmt.Sprintf("HTTP 200 without offset: %q", truncate(string(body), 100)))
		}
		return AppendResult{Outcome: OK, Offset: *ar.Offset, Replayed: ar.Duplicate}
	}
	msg := fmt.Sprintf("HTTP %d: %s", resp.StatusCode, ar.Error)
	if ar.Code != "" {
		msg = fmt.Sprintf("HTTP %d %s: %s", resp.StatusCode, ar.Code, ar.Error)
	}
	if ar.Outcome == "failed" {
		return AppendResult{Outcome: Failed, Err: msg}
	}
	cause := CauseNodeUnknown
	switch {
	case ar.Code == "timeout" || ar.Code == "" && resp.StatusCode == http.StatusGatewayTimeout:
		cause = CauseTimeout
	case ar.Code == "closing":
		cause = CauseNodeClosing
	}
	return AppendResult{Outcome: Unknown, Err: msg, Cause: cause}
}

// entryJSON is one line of /entries (an entry, or a last error line).
type entryJSON struct {
	Offset   *uint64 `json:"offset"`
	Epoch    uint64  `json:"epoch"`
	Data     []byte  `json:"data"`
	Key      string  `json:"key"`
	Error    string  `json:"error"`
	LogStart *uint64 `json:"log_start"`
}

// OutOfRangeError is Entries' error when the node answered that the
// offset asked for (or reached) is below its log start: deleted by
// retention. LogStart is where to resume.
type OutOfRangeError struct {
	LogStart uint64
	Msg      string
}

func (e *OutOfRangeError) Error() string {
	return fmt.Sprintf("below the log start %d: %s", e.LogStart, e.Msg)
}

// Entries reads n's /entries from offset from, calling fn for each entry
// (its Payload is the record's id, see DecodePayload)
// until the stream ends, fn returns an error, or ctx ends. With follow
// false the stream ends at the node's HW.
func (c *Cluster) Entries(ctx context.Context, n *Node, from uint64, follow bool, fn func(LogEntry) error) error {
	return c.entryLines(ctx, n, from, follow, func(e entryJSON) error {
		if c.cfg.KVEntries && (bytes.HasPrefix(e.Data, []byte(kvEntryPrefix)) || strings.HasPrefix(e.Key, kvKeyPrefix)) {
			return nil // a KV entry: a Delete is a tombstone, its key and no data
		}
		return fn(LogEntry{Offset: *e.Offset, Epoch: e.Epoch, Payload: DecodePayload(string(e.Data))})
	})
}

// entryLines reads n's /entries from offset from, calling fn for each
// entry line as the node sent it (Offset set), until the stream ends
// (io.EOF), fn returns an error, or ctx ends. An error line, or an
// answer that the offset is below the log start, ends it with an error
// (*OutOfRangeError for the latter).
func (c *Cluster) entryLines(ctx context.Context, n *Node, from uint64, follow bool, fn func(entryJSON) error) error {
	url := fmt.Sprintf("%s/entries?from=%d&follow=%t", c.base(n), from, follow)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		var e entryJSON
		if resp.StatusCode == http.StatusRequestedRangeNotSatisfiable && json.Unmarshal(b, &e) == nil && e.LogStart != nil {
			return &OutOfRangeError{LogStart: *e.LogStart, Msg: e.Error}
		}
		return fmt.Errorf("HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(b))
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var e entryJSON
		if err := json.Unmarshal(line, &e); err != nil {
			return fmt.Errorf("bad entry line %q: %w", truncate(string(line), 100), err)
		}
		if e.Offset == nil && e.Error != "" {
			if e.LogStart != nil {
				return &OutOfRangeError{LogStart: *e.LogStart, Msg: e.Error}
			}
			return fmt.Errorf("error line: %s", e.Error)
		}
		if e.Offset == nil {
			return fmt.Errorf("entry line without offset: %q", truncate(string(line), 100))
		}
		if err := fn(e); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return io.EOF
}

// FinalLog reads n's whole committed log from its log start
// (follow=false), its HW and its log start. If the log start passes the
// reader meanwhile (retention), it reads again from the new one.
func (c *Cluster) FinalLog(ctx context.Context, n *Node) (FinalLog, error) {
	for try := 0; ; try++ {
		st, err := c.Status(ctx, n)
		if err != nil {
			return FinalLog{}, err
		}
		f := FinalLog{Node: n.ID, HW: st.HW, LogStart: st.LogStart}
		err = c.Entries(ctx, n, st.LogStart, false, func(e LogEntry) error {
			f.Entries = append(f.Entries, e)
			return nil
		})
		var oor *OutOfRangeError
		if errors.As(err, &oor) && try < 10 {
			continue
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return f, err
		}
		return f, nil
	}
}

// deleteJSON is /delete-before's answer (an error carries log_start too).
type deleteJSON struct {
	LogStart *uint64 `json:"log_start"`
	HW       uint64  `json:"hw"`
	Error    string  `json:"error"`
}

// DeleteBefore posts /delete-before?offset=offset to n and returns what it
// answered (Node, Requested, Code, LogStart, HW, Err; times unset).
func (c *Cluster) DeleteBefore(ctx context.Context, n *Node, offset uint64) DeleteOp {
	d := DeleteOp{Node: n.ID, Requested: offset}
	url := fmt.Sprintf("%s/delete-before?offset=%d", c.base(n), offset)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
	if err != nil {
		d.Err = err.Error()
		return d
	}
	resp, err := c.client.Do(req)
	if err != nil {
		d.Err = shortErr(err)
		return d
	}
	defer resp.Body.Close()
	d.Code = resp.StatusCode
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	var dj deleteJSON
	if err := json.Unmarshal(body, &dj); err != nil {
		d.Err = fmt.Sprintf("bad JSON %q", truncate(string(body), 100))
		return d
	}
	if dj.LogStart != nil {
		d.LogStart = *dj.LogStart
	}
	d.HW, d.Err = dj.HW, truncate(dj.Error, 160)
	if d.Code == http.StatusOK && dj.LogStart == nil {
		d.Err = "HTTP 200 without log_start"
	}
	return d
}

func shortErr(err error) string { return truncate(err.Error(), 160) }

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// LogErrors returns, per node, the number of log lines at ERROR level,
// panics, fatal errors and data races (nodes built with -race), and up to max distinct examples (timestamps cut).
func (c *Cluster) LogErrors(max int) (map[string]int, []string) {
	counts := map[string]int{}
	seen := map[string]bool{}
	var examples []string
	for _, n := range c.Nodes {
		data, err := os.ReadFile(n.logPath)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			if !strings.Contains(line, "[ERROR]") && !strings.HasPrefix(line, "panic:") &&
				!strings.HasPrefix(line, "fatal error:") && !strings.HasPrefix(line, "WARNING: DATA RACE") {
				continue
			}
			counts[n.ID]++
			key := line
			if i := strings.Index(line, "[ERROR]"); i >= 0 {
				key = line[i:]
			}
			key = truncate(key, 200)
			if !seen[key] && len(examples) < max {
				seen[key] = true
				examples = append(examples, n.ID+": "+key)
			}
		}
	}
	return counts, examples
}

// BinaryRevision returns the VCS revision the binary was built from, with
// "+dirty" when the working tree had changes ("unknown" without VCS info).
func BinaryRevision(bin string) string {
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		return "unknown"
	}
	rev, dirty := "unknown", ""
	for _, s := range info.Settings {
		switch {
		case s.Key == "vcs.revision":
			rev = s.Value
		case s.Key == "vcs.modified" && s.Value == "true":
			dirty = "+dirty"
		}
	}
	return rev[:min(len(rev), 12)] + dirty
}
