package replogtest

import (
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/replog-io/replog"
	"github.com/replog-io/replog/internal/tcplink"
	"github.com/replog-io/replog/internal/testnode"
)

// TB is the part of testing.TB a Cluster uses; *testing.T, *testing.B
// and *testing.F satisfy it.
type TB interface {
	Helper()
	Cleanup(func())
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
	TempDir() string
}

// ClusterID is the Options.ClusterID of every node of a Cluster.
const ClusterID = "replogtest"

// DefaultTimeout is how long a Cluster's waits (WaitLeader) last before
// they fail the test, unless the Timeout option says otherwise: long
// enough for a loaded machine running -race.
const DefaultTimeout = 30 * time.Second

// An Option adjusts a Cluster that NewCluster starts.
type Option func(*config)

type config struct {
	configure []func(id string, o *replog.Options)
	timeout   time.Duration
}

// Configure adjusts each node's Options before it opens, and again before
// each Restart, after the Cluster has set its own (see NewCluster). Several
// Configure options apply in order.
func Configure(f func(id string, o *replog.Options)) Option {
	return func(c *config) { c.configure = append(c.configure, f) }
}

// Timeout sets how long the Cluster's waits last (default DefaultTimeout).
func Timeout(d time.Duration) Option {
	return func(c *config) { c.timeout = d }
}

// Cluster is a replog cluster of nodes in this process, with the links
// between them under the test's control (see the package doc). Its
// methods must be called from the test's goroutine (they may call
// Fatalf); the Logs they return may be used from any goroutine.
type Cluster struct {
	t   TB
	cfg config
	ids []string

	mu      sync.Mutex
	nodes   map[string]*node
	links   map[[2]string]*tcplink.Link // [from, to]: the proxy from dials to reach to
	apart   map[[2]string]bool          // cut pairs (both orders) of Partition
	paused  map[string]bool
	killing map[string]bool
}

type node struct {
	dir  string
	opts replog.Options // as last opened, Configure applied
	log  *replog.Log    // nil while down
}

// NewCluster starts n voters, "n1" to "nN", in this process and returns
// once every node has opened (WaitLeader waits for the first election).
// Each node has a data directory from t.TempDir, the cluster a random
// Secret, fast protocol timings (FetchMaxWait 100ms, FetchTimeout 1s,
// ElectionTimeout 200ms), NoSync, no gossip, and for each other node a
// static Peers address: a link, a loopback proxy the Cluster bound before
// any node opened, so that no port is guessed and none can be taken by
// another process meanwhile. The node's own RPCAddr is "127.0.0.1:0".
// With REPLOG_TEST_LOG set to a level name, nodes log to stderr.
// Configure options may change any of it (Peers and Voters at their
// peril). t.Cleanup stops every node and link, and waits for their
// goroutines.
func NewCluster(t TB, n int, opts ...Option) *Cluster {
	t.Helper()
	if n < 1 {
		t.Fatalf("replogtest: NewCluster with %d nodes", n)
	}
	c := &Cluster{
		t: t, cfg: config{timeout: DefaultTimeout},
		nodes: map[string]*node{}, links: map[[2]string]*tcplink.Link{},
		apart: map[[2]string]bool{}, paused: map[string]bool{}, killing: map[string]bool{},
	}
	for _, o := range opts {
		o(&c.cfg)
	}
	for i := 1; i <= n; i++ {
		c.ids = append(c.ids, fmt.Sprintf("n%d", i))
	}
	// The directories first: t.Cleanup runs last-registered first, so the
	// nodes are stopped before their directories are removed.
	for _, id := range c.ids {
		c.nodes[id] = &node{dir: t.TempDir()}
	}
	t.Cleanup(c.cleanup)
	secret := make([]byte, 32)
	_, _ = rand.Read(secret) // never fails (crypto/rand)
	for _, a := range c.ids {
		for _, b := range c.ids {
			if a == b {
				continue
			}
			l, err := tcplink.New()
			if err != nil {
				t.Fatalf("replogtest: link %s→%s: %v", a, b, err)
			}
			c.links[[2]string{a, b}] = l
		}
	}
	for _, id := range c.ids {
		peers := map[string]string{}
		for _, other := range c.ids {
			if other != id {
				peers[other] = c.links[[2]string{id, other}].Addr()
			}
		}
		c.nodes[id].opts = replog.Options{
			Dir:             c.nodes[id].dir,
			NodeID:          id,
			ClusterID:       ClusterID,
			Voters:          slices.Clone(c.ids),
			RPCAddr:         "127.0.0.1:0",
			Peers:           peers,
			Secret:          secret,
			FetchMaxWait:    testnode.FetchMaxWait,
			FetchTimeout:    testnode.FetchTimeout,
			ElectionTimeout: testnode.ElectionTimeout,
			NoSync:          true,
			Logger:          testnode.Logger(),
		}
		c.open(id)
	}
	return c
}

// open opens node id with its options, Configure applied, and points the
// links to it at its RPC address.
func (c *Cluster) open(id string) *replog.Log {
	c.t.Helper()
	nd := c.nodes[id]
	o := nd.opts
	o.Dir = nd.dir
	for _, f := range c.cfg.configure {
		f(id, &o)
	}
	l, err := replog.Open(o)
	if err != nil {
		c.t.Fatalf("replogtest: open %s: %v", id, err)
	}
	c.mu.Lock()
	nd.log = l
	for _, from := range c.ids {
		if lk := c.links[[2]string{from, id}]; lk != nil {
			lk.SetTarget(l.Status().RPCAddr)
		}
	}
	c.mu.Unlock()
	return l
}

// IDs returns the nodes' IDs, "n1" to "nN", running or not.
func (c *Cluster) IDs() []string { return slices.Clone(c.ids) }

// Node returns node id's Log, or nil while it is down (killed or
// stopped). It fails the test for an ID not in the cluster.
func (c *Cluster) Node(id string) *replog.Log {
	c.t.Helper()
	nd := c.node(id)
	c.mu.Lock()
	defer c.mu.Unlock()
	return nd.log
}

func (c *Cluster) node(id string) *node {
	c.t.Helper()
	nd, ok := c.nodes[id]
	if !ok {
		c.t.Fatalf("replogtest: no node %q (the cluster has %v)", id, c.ids)
	}
	return nd
}

// Running returns the IDs of the nodes that are up (paused ones too).
func (c *Cluster) Running() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ids []string
	for _, id := range c.ids {
		if c.nodes[id].log != nil {
			ids = append(ids, id)
		}
	}
	return ids
}

// WaitLeader waits until one node leads and every running node that can
// reach it (neither paused nor partitioned from it) follows it and holds
// the recorded voter set, and returns its ID. Until a node has the
// recorded set it counts the bootstrap voters, whose first election needs
// every one of them (docs/protocol.md R57): a test that kills the first
// leader before this returned might wait for ever. It fails the test
// after the Timeout.
func (c *Cluster) WaitLeader() string {
	c.t.Helper()
	var lead string
	c.waitFor("a leader every node that reaches it follows", func() bool {
		lead = c.agreedLeader()
		return lead != ""
	})
	return lead
}

// agreedLeader returns the leader WaitLeader waits for, or "": a leader
// that every running node it reaches follows, among them a majority of
// the voters in force (a leader cut off from the rest may not have
// noticed yet that it no longer is one).
func (c *Cluster) agreedLeader() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, lead := range c.ids {
		l := c.nodes[lead].log
		if l == nil || c.paused[lead] {
			continue
		}
		st := l.Status()
		if st.Role != replog.RoleLeader {
			continue
		}
		agreed := true
		for _, id := range c.ids {
			n := c.nodes[id].log
			if n == nil || !c.reaches(id, lead) {
				continue
			}
			s := n.Status()
			if s.LeaderID != lead || len(s.Voters) == 0 || s.Voters[0].DirectoryID == "" {
				agreed = false
				break
			}
		}
		reached := 0
		for _, v := range st.Voters {
			if nd := c.nodes[v.ID]; nd != nil && nd.log != nil && c.reaches(v.ID, lead) {
				reached++
			}
		}
		if agreed && reached > len(st.Voters)/2 {
			return lead
		}
	}
	return ""
}

// reaches reports whether running node a and node b (a, or another) can
// talk: neither is paused and no partition separates them. c.mu is held.
func (c *Cluster) reaches(a, b string) bool {
	if b == "" {
		return false
	}
	return a == b || !c.paused[a] && !c.paused[b] && !c.apart[[2]string{a, b}]
}

// Leader waits for a leader (WaitLeader) and returns its Log.
func (c *Cluster) Leader() *replog.Log {
	c.t.Helper()
	return c.Node(c.WaitLeader())
}

// Followers waits for a leader (WaitLeader) and returns the Logs of the
// other running nodes, by ID.
func (c *Cluster) Followers() []*replog.Log {
	c.t.Helper()
	lead := c.WaitLeader()
	var out []*replog.Log
	for _, id := range c.Running() {
		if id != lead {
			out = append(out, c.Node(id))
		}
	}
	return out
}

// Kill stops node id the way a crash looks to the others: its links are
// cut first (open connections drop, new ones are refused), so it hands
// nothing over and says no goodbye; then its Log is closed. Only its own
// goroutines see a Close: the rest of the cluster sees a process that
// died. A leader's Close first tries to hand the leadership over for
// Options.CloseTransferTimeout (1s by default), which the cut links make
// fail, so killing a leader takes that long. Node(id) is nil afterwards;
// Restart brings it back on its directory.
func (c *Cluster) Kill(id string) {
	c.t.Helper()
	l := c.running(id)
	c.mu.Lock()
	c.killing[id] = true
	c.applyLocked()
	c.mu.Unlock()
	// Close's error (a failed disk, say) is the node's; a crash has none.
	_ = l.Close()
	c.mu.Lock()
	c.nodes[id].log = nil
	delete(c.killing, id)
	c.applyLocked()
	c.mu.Unlock()
}

// Stop closes node id gracefully (Log.Close: a leader hands over first)
// and fails the test if Close fails. Node(id) is nil afterwards.
func (c *Cluster) Stop(id string) {
	c.t.Helper()
	l := c.running(id)
	if err := l.Close(); err != nil {
		c.t.Errorf("replogtest: close %s: %v", id, err)
	}
	c.mu.Lock()
	c.nodes[id].log = nil
	c.mu.Unlock()
}

// Restart opens node id again on its directory, with the options it had
// (Configure applied again), after Kill or Stop, and returns its Log. Its
// links keep the state they had (a partition outlives the node).
func (c *Cluster) Restart(id string) *replog.Log {
	c.t.Helper()
	if c.Node(id) != nil {
		c.t.Fatalf("replogtest: Restart(%s) while it runs: Kill or Stop it first", id)
	}
	return c.open(id)
}

func (c *Cluster) running(id string) *replog.Log {
	c.t.Helper()
	l := c.Node(id)
	if l == nil {
		c.t.Fatalf("replogtest: node %s is down", id)
	}
	return l
}

// Pause holds every byte to and from node id until Resume: connections
// stay open and nothing crosses them, as when its process is stopped
// (SIGSTOP) and its peers' bytes wait in socket buffers; then they flow,
// late. Unlike a stopped process, the node's own goroutines keep running
// (its timers fire, it may campaign: nobody hears it until Resume).
func (c *Cluster) Pause(id string) {
	c.t.Helper()
	c.node(id)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.paused[id] = true
	c.applyLocked()
}

// Resume lets node id's held bytes flow again (see Pause).
func (c *Cluster) Resume(id string) {
	c.t.Helper()
	c.node(id)
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.paused, id)
	c.applyLocked()
}

// Partition cuts the links between the nodes named and all the others:
// open connections drop and new ones are refused, both ways; the named
// nodes still reach each other, and so do the others. Partitions add up
// (a second call cuts more links) until Heal.
func (c *Cluster) Partition(ids ...string) {
	c.t.Helper()
	side := map[string]bool{}
	for _, id := range ids {
		c.node(id)
		side[id] = true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, a := range c.ids {
		for _, b := range c.ids {
			if side[a] != side[b] {
				c.apart[[2]string{a, b}] = true
			}
		}
	}
	c.applyLocked()
}

// Heal removes every partition (not pauses: see Resume).
func (c *Cluster) Heal() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.apart)
	c.applyLocked()
}

// applyLocked sets every link's mode from the partitions, pauses and
// kills under way. c.mu is held.
func (c *Cluster) applyLocked() {
	for k, l := range c.links {
		from, to := k[0], k[1]
		switch {
		case c.apart[k] || c.killing[from] || c.killing[to]:
			l.SetMode(tcplink.Cut)
		case c.paused[from] || c.paused[to]:
			l.SetMode(tcplink.Hold)
		default:
			l.SetMode(tcplink.Pass)
		}
	}
}

// waitFor polls cond until it holds, or fails the test after the
// Timeout.
func (c *Cluster) waitFor(what string, cond func() bool) {
	c.t.Helper()
	deadline := time.Now().Add(c.cfg.timeout)
	for !cond() {
		if time.Now().After(deadline) {
			c.t.Fatalf("replogtest: timed out after %v waiting for %s", c.cfg.timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// cleanup stops every running node (at once: a leader's handover to a
// node closing too would be waited for one at a time otherwise), then
// every link.
func (c *Cluster) cleanup() {
	c.mu.Lock()
	clear(c.paused)
	clear(c.apart)
	c.applyLocked()
	var logs []*replog.Log
	var ids []string
	for _, id := range c.ids {
		if l := c.nodes[id].log; l != nil {
			logs, ids = append(logs, l), append(ids, id)
			c.nodes[id].log = nil
		}
	}
	c.mu.Unlock()
	errs := make([]error, len(logs))
	var wg sync.WaitGroup
	for i, l := range logs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := l.Close(); err != nil {
				errs[i] = fmt.Errorf("close %s: %w", ids[i], err)
			}
		}()
	}
	wg.Wait()
	for _, l := range c.links {
		if err := l.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		c.t.Errorf("replogtest: %v", err)
	}
}
