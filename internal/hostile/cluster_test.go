package hostile

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/replog-io/replog"
	"github.com/replog-io/replog/internal/nodeproc"
	"github.com/replog-io/replog/internal/testnode"
	"github.com/replog-io/replog/internal/testwait"
	"github.com/replog-io/replog/membership"
	"github.com/replog-io/replog/protocol"
)

// clusterID is the victims' cluster ID. Tests look for it (and for node
// IDs) in what a refused outsider receives.
const clusterID = "hostile-test-cluster"

// security is how a test cluster protects its transport and gossip.
type security struct {
	// secret, if set, is Options.Secret; otherwise the cluster runs with
	// Options.Insecure.
	secret []byte
}

var (
	insecureMode = security{}
	secretMode   = security{secret: []byte("hostile-suite cluster secret, 32+ bytes long")}
)

func (s security) String() string {
	if s.secret != nil {
		return "secret"
	}
	return "insecure"
}

// nodeOptions are the protocol timings of every in-process test cluster
// (internal/testnode): fast, with room for a loaded machine under -race.
func nodeOptions(dir, id string, voters []string, sec security) replog.Options {
	o := replog.Options{
		Dir:             dir,
		NodeID:          id,
		ClusterID:       clusterID,
		Voters:          voters,
		RPCAddr:         "127.0.0.1:0",
		GossipAddr:      "127.0.0.1:0",
		GossipTuning:    membership.FastForTests(),
		FetchMaxWait:    testnode.FetchMaxWait,
		FetchTimeout:    testnode.FetchTimeout,
		ElectionTimeout: testnode.ElectionTimeout,
		NoSync:          true,
		Logger:          testnode.Logger(),
	}
	applySecurity(&o, sec)
	return o
}

// cluster runs replog nodes in this process, on loopback, found by gossip.
type cluster struct {
	t     *testing.T
	sec   security
	opts  map[string]replog.Options
	nodes map[string]*replog.Log
	dirs  map[string]string
}

// newCluster opens voters (the first n of n1, n2, n3, ...) and waits for a
// leader. mutate may adjust each node's options before it opens.
func newCluster(t *testing.T, n int, sec security, mutate func(id string, o *replog.Options)) *cluster {
	t.Helper()
	var voters []string
	for i := 1; i <= n; i++ {
		voters = append(voters, fmt.Sprintf("n%d", i))
	}
	return newClusterOf(t, voters, voters, sec, mutate)
}

// newClusterOf opens the nodes in run (a subset of voters).
func newClusterOf(t *testing.T, voters, run []string, sec security, mutate func(id string, o *replog.Options)) *cluster {
	t.Helper()
	c := &cluster{t: t, sec: sec, opts: map[string]replog.Options{}, nodes: map[string]*replog.Log{}, dirs: map[string]string{}}
	t.Cleanup(c.closeAll)
	for _, id := range run {
		o := nodeOptions(t.TempDir(), id, voters, sec)
		if mutate != nil {
			mutate(id, &o)
		}
		c.start(id, o)
	}
	return c
}

// newClusterWithImpostorOfN3 runs voters n1 and n2 with an impostor of
// voter n3 (a fake node handing its frames to handle) at the address n1 and
// n2 have for n3 (Peers). The real n3 takes part first: it runs at that
// address until the first voter set is committed on all three, and is
// stopped before the fake starts listening there. A brand-new cluster's
// first election needs the grant of every configured voter (R57: before
// directories are recorded nobody can tell a wiped voter from a new one),
// so with the fake in n3's place from the start n1 and n2 would never elect
// a leader; and a fake that granted that vote would itself be recorded as
// voter n3, not an outsider at a voter's address (with a secret it could
// not even be asked). Once the set is recorded, n1 and n2 are a majority
// of it and elect without n3, as in a cluster whose n3 went down.
// opts are newFakeNodeAt's.
func newClusterWithImpostorOfN3(t *testing.T, sec security, handle func(f *fakeNode, m protocol.Message), opts ...func(*fakeNode)) (*cluster, *fakeNode) {
	t.Helper()
	addrs, err := nodeproc.FreeAddrs(1)
	if err != nil {
		t.Fatal(err)
	}
	n3Addr := addrs[0]
	voters := []string{"n1", "n2", "n3"}
	c := newClusterOf(t, voters, voters, sec, func(id string, o *replog.Options) {
		if id == "n3" {
			o.RPCAddr = n3Addr
		} else {
			o.Peers = map[string]string{"n3": n3Addr}
		}
	})
	c.leader()
	for _, id := range c.ids() {
		l := c.nodes[id]
		testwait.WaitFor(t, id+" to commit the first voter set", 20*time.Second, func() bool {
			return l.Status().HighWatermark > 0 // offset 0 holds it (R57)
		})
	}
	c.stop("n3")
	return c, newFakeNodeAt(t, n3Addr, "n3", clusterID, handle, opts...)
}

func (c *cluster) start(id string, o replog.Options) *replog.Log {
	c.t.Helper()
	if o.GossipAddr != "" {
		o.Join = nil
		for nid, l := range c.nodes {
			if nid != id {
				o.Join = append(o.Join, l.Status().GossipAddr)
			}
		}
	}
	l, err := replog.Open(o)
	if err != nil {
		c.t.Fatalf("open %s: %v", id, err)
	}
	c.opts[id] = o
	c.nodes[id] = l
	c.dirs[id] = o.Dir
	return l
}

// stop closes node id (gracefully: it leaves gossip).
func (c *cluster) stop(id string) {
	c.t.Helper()
	l := c.nodes[id]
	delete(c.nodes, id)
	if err := l.Close(); err != nil {
		c.t.Logf("close %s: %v", id, err)
	}
}

func (c *cluster) closeAll() {
	for id := range c.nodes {
		c.stop(id)
	}
}

func (c *cluster) ids() []string {
	var ids []string
	for id := range c.nodes {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// leader waits until exactly one running node leads and every running
// node agrees, and returns its ID and epoch.
func (c *cluster) leader() (string, uint64) {
	c.t.Helper()
	var id string
	var epoch uint64
	testwait.WaitFor(c.t, "a leader all nodes agree on", 20*time.Second, func() bool {
		id, epoch = "", 0
		for nid, l := range c.nodes {
			if st := l.Status(); st.Role == "leader" {
				if id != "" {
					return false
				}
				id, epoch = nid, st.Epoch
			}
		}
		if id == "" {
			return false
		}
		for _, l := range c.nodes {
			if st := l.Status(); st.LeaderID != id || st.Epoch != epoch {
				return false
			}
		}
		return true
	})
	return id, epoch
}

// appendN appends n records prefix-0 .. prefix-(n-1) through node id and
// returns their offsets.
func (c *cluster) appendN(id, prefix string, n int) []uint64 {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var offs []uint64
	for i := range n {
		off, err := c.nodes[id].Append(ctx, fmt.Appendf(nil, "%s-%d", prefix, i))
		if err != nil {
			c.t.Fatalf("append %s-%d through %s: %v", prefix, i, id, err)
		}
		offs = append(offs, off)
	}
	return offs
}

// readAll reads the committed data entries [0, hw) of node id, or fails.
func readAll(t *testing.T, l *replog.Log, what string) []replog.Entry {
	t.Helper()
	hw := l.Status().ReadableHW
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out []replog.Entry
	for e, err := range l.ReadRange(ctx, 0, hw) {
		if err != nil {
			t.Fatalf("%s: read: %v", what, err)
		}
		out = append(out, e)
	}
	return out
}

// checkPrefix fails unless node id's committed log starts with want (data
// at the same offsets).
func (c *cluster) checkPrefix(id string, want []replog.Entry) {
	c.t.Helper()
	testwait.WaitFor(c.t, id+" to have committed the expected entries", 20*time.Second, func() bool {
		return c.nodes[id].Status().ReadableHW >= want[len(want)-1].Offset+1
	})
	got := readAll(c.t, c.nodes[id], id)
	if len(got) < len(want) {
		c.t.Fatalf("%s: %d committed entries, want at least the %d written before the attack", id, len(got), len(want))
	}
	for i, w := range want {
		if got[i].Offset != w.Offset || string(got[i].Data) != string(w.Data) {
			c.t.Fatalf("%s: committed entry %d is %d %q, was %d %q before the attack", id, i, got[i].Offset, got[i].Data, w.Offset, w.Data)
		}
	}
}

// keepsCommitting appends one record through the leader and waits until
// every running node reads it at the acknowledged offset.
func (c *cluster) keepsCommitting(tag string) {
	c.t.Helper()
	lead, _ := c.leader()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	data := []byte("after-" + tag)
	off, err := c.nodes[lead].Append(ctx, data)
	if err != nil {
		c.t.Fatalf("append through leader %s after the attack: %v", lead, err)
	}
	for _, id := range c.ids() {
		l := c.nodes[id]
		testwait.WaitFor(c.t, id+" to commit the append made after the attack", 20*time.Second, func() bool {
			return l.Status().ReadableHW > off
		})
		for e, err := range l.ReadRange(ctx, off, off+1) {
			if err != nil {
				c.t.Fatalf("%s: read %d: %v", id, off, err)
			}
			if string(e.Data) != string(data) {
				c.t.Fatalf("%s: offset %d holds %q, want %q", id, off, e.Data, data)
			}
		}
	}
}

// watchReaders follows every running node's committed log from offset 0
// until stop is called, and records any entry whose data starts with
// poison. It returns stop, which returns what was seen.
func (c *cluster) watchReaders(poison string) (stop func() []string) {
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var bad []string
	var wg sync.WaitGroup
	for _, id := range c.ids() {
		l := c.nodes[id]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for e, err := range l.Read(ctx, 0) {
				if err != nil {
					return
				}
				if strings.HasPrefix(string(e.Data), poison) {
					mu.Lock()
					bad = append(bad, fmt.Sprintf("%s read %q at offset %d (epoch %d)", id, e.Data, e.Offset, e.Epoch))
					mu.Unlock()
				}
			}
		}()
	}
	return func() []string {
		cancel()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		return bad
	}
}
