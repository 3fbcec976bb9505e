package replog

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/replog-io/replog/internal/testnode"
	"github.com/replog-io/replog/internal/testwait"
	"github.com/replog-io/replog/membership"
)

// testCluster runs Logs in this process over loopback TCP and memberlist,
// every port chosen by the kernel (hashicorp/raft's MakeCluster, for
// replog).
type testCluster struct {
	t      *testing.T
	opts   map[string]Options
	nodes  map[string]*Log
	mutate func(id string, o *Options)
}

// testOptions are the protocol timings of every in-process test cluster
// (internal/testnode): fast, but with room for a loaded machine running
// -race.
func testOptions(dir, id string, voters []string) Options {
	return Options{
		Dir:             dir,
		NodeID:          id,
		ClusterID:       "test",
		Voters:          voters,
		RPCAddr:         "127.0.0.1:0",
		GossipAddr:      "127.0.0.1:0",
		GossipTuning:    membership.FastForTests(),
		FetchMaxWait:    testnode.FetchMaxWait,
		FetchTimeout:    testnode.FetchTimeout,
		ElectionTimeout: testnode.ElectionTimeout,
		NoSync:          true,
		Logger:          testnode.Logger(),
		Secret:          testSecret,
	}
}

// newCluster starts voters n1..nN joined by gossip. mutate may adjust each
// node's options before it opens.
func newCluster(t *testing.T, n int, mutate func(id string, o *Options)) *testCluster {
	t.Helper()
	c := &testCluster{t: t, opts: map[string]Options{}, nodes: map[string]*Log{}, mutate: mutate}
	var voters []string
	for i := 1; i <= n; i++ {
		voters = append(voters, fmt.Sprintf("n%d", i))
	}
	for _, id := range voters {
		o := testOptions(t.TempDir(), id, voters)
		c.start(id, o)
	}
	t.Cleanup(c.closeAll)
	return c
}

// start opens node id with o (joining the cluster's gossip) and records it.
func (c *testCluster) start(id string, o Options) *Log {
	c.t.Helper()
	if o.GossipAddr != "" {
		// Join through every running node: a restarted first node must
		// not join only itself.
		o.Join = nil
		for nid, l := range c.nodes {
			if nid != id {
				o.Join = append(o.Join, l.Status().GossipAddr)
			}
		}
	}
	if c.mutate != nil {
		c.mutate(id, &o)
	}
	l, err := Open(o)
	if err != nil {
		c.t.Fatalf("open %s: %v", id, err)
	}
	// Restarts reuse the bound ports so that peers' cached addresses stay
	// right.
	o.RPCAddr = l.Status().RPCAddr
	if o.GossipAddr != "" {
		o.GossipAddr = l.Status().GossipAddr
	}
	c.opts[id] = o
	c.nodes[id] = l
	return l
}

func (c *testCluster) restart(id string) *Log {
	c.t.Helper()
	return c.start(id, c.opts[id])
}

func (c *testCluster) closeAll() {
	for id, l := range c.nodes {
		if err := l.Close(); err != nil {
			c.t.Errorf("close %s: %v", id, err)
		}
		delete(c.nodes, id)
	}
}

// waitFor polls cond until it holds or the timeout passes.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	testwait.WaitFor(t, what, timeout, cond)
}

// leader waits until exactly one running node is leader and all running
// voters agree on it, and returns its ID.
// leader waits until all nodes agree on a leader and hold the recorded
// voter set: until a node has fetched it, it is in the bootstrap set, where
// an election needs every configured voter (R57), so a test that crashed
// the first leader before that would wait for it for ever.
func (c *testCluster) leader(timeout time.Duration) string {
	c.t.Helper()
	var id string
	waitFor(c.t, "a leader all nodes agree on", timeout, func() bool {
		id = ""
		for nid, l := range c.nodes {
			st := l.Status()
			if st.Role == "leader" {
				if id != "" {
					return false
				}
				id = nid
			}
		}
		if id == "" {
			return false
		}
		for _, l := range c.nodes {
			st := l.Status()
			if st.LeaderID != id || len(st.Voters) == 0 || st.Voters[0].DirectoryID == "" {
				return false
			}
		}
		return true
	})
	return id
}

// readN reads the first n data entries from l.
func readN(t *testing.T, l *Log, n int, timeout time.Duration) []Entry {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var out []Entry
	for e, err := range l.Read(ctx, 0) {
		if err != nil {
			t.Fatalf("%s: read after %d entries: %v", l.opts.NodeID, len(out), err)
		}
		out = append(out, e)
		if len(out) == n {
			break
		}
	}
	return out
}

func appendCtx(t *testing.T) (context.Context, context.CancelFunc) {
	t.Helper()
	return context.WithTimeout(context.Background(), 20*time.Second)
}

func TestSingleNodeWithOnlyDir(t *testing.T) {
	l, err := Open(Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := appendCtx(t)
	defer cancel()
	for i := range 5 {
		off, err := l.Append(ctx, fmt.Appendf(nil, "e%d", i))
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		// Offset 0 holds the voter set the node recorded when it
		// bootstrapped the cluster (R57); readers never see it.
		if off != uint64(i)+1 {
			t.Fatalf("append %d got offset %d", i, off)
		}
	}
	st := l.Status()
	if st.Role != "leader" || st.HighWatermark != 6 || st.LEO != 6 {
		t.Fatalf("status %+v, want leader with LEO=HW=6", st)
	}
	got := readN(t, l, 5, 10*time.Second)
	for i, e := range got {
		if want := fmt.Sprintf("e%d", i); string(e.Data) != want || e.Offset != uint64(i)+1 {
			t.Fatalf("entry %d = %d %q, want %d %q", i, e.Offset, e.Data, i+1, want)
		}
	}
}

func TestClusterAppendsThroughEveryNodeReadInOneOrder(t *testing.T) {
	c := newCluster(t, 3, nil)
	c.leader(15 * time.Second)

	const perNode = 20
	ctx, cancel := appendCtx(t)
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	acked := map[uint64]string{}
	for id, l := range c.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perNode {
				data := fmt.Sprintf("%s-%d", id, i)
				off, err := l.Append(ctx, []byte(data))
				if err != nil {
					t.Errorf("append via %s: %v", id, err)
					return
				}
				mu.Lock()
				if prev, dup := acked[off]; dup {
					t.Errorf("offset %d acked twice: %q and %q", off, prev, data)
				}
				acked[off] = data
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	want := 3 * perNode
	var first []Entry
	began := time.Now().Add(-time.Minute) // the leader's clock is this machine's
	for id, l := range c.nodes {
		got := readN(t, l, want, 20*time.Second)
		for _, e := range got {
			if a, ok := acked[e.Offset]; ok && a != string(e.Data) {
				t.Fatalf("%s: offset %d holds %q, acked as %q", id, e.Offset, e.Data, a)
			}
			// Every entry carries the leader's append time, on every node.
			if e.Time.Before(began) || e.Time.After(time.Now()) {
				t.Fatalf("%s: offset %d has time %v, want the time of its append", id, e.Offset, e.Time)
			}
		}
		if first == nil {
			first = got
			continue
		}
		if !slices.EqualFunc(first, got, func(a, b Entry) bool {
			return a.Offset == b.Offset && string(a.Data) == string(b.Data) && a.Time.Equal(b.Time)
		}) {
			t.Fatalf("%s reads another order than the first node", id)
		}
	}
	if len(first) != want {
		t.Fatalf("read %d entries, want %d", len(first), want)
	}
}

func TestLeaderCrashFailover(t *testing.T) {
	c := newCluster(t, 3, func(id string, o *Options) { o.NoSync = false })
	old := c.leader(15 * time.Second)
	ctx, cancel := appendCtx(t)
	defer cancel()
	var offsets []uint64
	for i := range 10 {
		off, err := c.nodes[old].Append(ctx, fmt.Appendf(nil, "before-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		offsets = append(offsets, off)
	}

	c.nodes[old].crash()
	delete(c.nodes, old)
	start := time.Now()
	var survivor *Log
	for _, l := range c.nodes {
		survivor = l
		break
	}
	// The survivor may have forwarded the first try to the dead leader:
	// that outcome is unknown, so try again (a duplicate is allowed).
	var off uint64
	var err error
	for tries := 0; ; tries++ {
		off, err = survivor.Append(ctx, []byte("after"))
		if err == nil {
			break
		}
		if !errors.Is(err, ErrUnknownOutcome) || tries == 20 {
			t.Fatalf("append after leader crash: %v", err)
		}
	}
	t.Logf("first append after the leader's crash committed %v later (offset %d)", time.Since(start), off)
	newLeader := c.leader(15 * time.Second)
	if newLeader == old {
		t.Fatalf("crashed node %s still leader", old)
	}
	for id, l := range c.nodes {
		var got []Entry
		for e, err := range l.ReadRange(ctx, 0, off+1) {
			if err != nil {
				t.Fatalf("%s: read: %v", id, err)
			}
			got = append(got, e)
		}
		for i := range 10 {
			if got[i].Offset != offsets[i] || string(got[i].Data) != fmt.Sprintf("before-%d", i) {
				t.Fatalf("%s: acknowledged entry %d lost or changed: %+v", id, i, got[i])
			}
		}
		if last := got[len(got)-1]; last.Offset != off || string(last.Data) != "after" {
			t.Fatalf("%s: entry at the acknowledged offset %d = %+v", id, off, last)
		}
	}
}

func TestRestartedNodeCatchesUpFromItsDirectory(t *testing.T) {
	c := newCluster(t, 3, nil)
	lead := c.leader(15 * time.Second)
	ctx, cancel := appendCtx(t)
	defer cancel()
	for i := range 5 {
		if _, err := c.nodes[lead].Append(ctx, fmt.Appendf(nil, "a%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	var follower string
	for id := range c.nodes {
		if id != lead {
			follower = id
			break
		}
	}
	f := c.nodes[follower]
	waitFor(t, "follower has the first 5", 10*time.Second, func() bool { return f.Status().HighWatermark >= 5 })
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	delete(c.nodes, follower)
	for i := range 5 {
		if _, err := c.nodes[lead].Append(ctx, fmt.Appendf(nil, "b%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	f = c.restart(follower)
	if st := f.Status(); st.LEO < 5 {
		t.Fatalf("restarted follower lost its log: %+v", st)
	}
	got := readN(t, f, 10, 20*time.Second)
	for i, e := range got {
		want := fmt.Sprintf("a%d", i)
		if i >= 5 {
			want = fmt.Sprintf("b%d", i-5)
		}
		if string(e.Data) != want {
			t.Fatalf("restarted follower entry %d = %q, want %q", i, e.Data, want)
		}
	}
}

func TestObserverCatchesUpAndNeverVotes(t *testing.T) {
	c := newCluster(t, 3, nil)
	lead := c.leader(15 * time.Second)
	ctx, cancel := appendCtx(t)
	defer cancel()
	for i := range 20 {
		if _, err := c.nodes[lead].Append(ctx, fmt.Appendf(nil, "x%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	o := testOptions(t.TempDir(), "obs", c.opts["n1"].Voters)
	obs := c.start("obs", o)
	got := readN(t, obs, 20, 20*time.Second)
	if string(got[19].Data) != "x19" {
		t.Fatalf("observer's entry 19 = %q", got[19].Data)
	}
	if st := obs.Status(); st.Role != "observer" {
		t.Fatalf("observer role = %q", st.Role)
	}
	leaderStatus := c.nodes[lead].Status()
	if _, counted := leaderStatus.RemoteLEO["obs"]; counted {
		t.Fatalf("leader counts the observer among voters: %v", leaderStatus.RemoteLEO)
	}
	// With one voter down the remaining two still commit; with two voters
	// down the observer must not make a majority.
	var down []string
	for id := range c.nodes {
		if id != lead && id != "obs" && len(down) < 2 {
			down = append(down, id)
		}
	}
	c.nodes[down[0]].crash()
	delete(c.nodes, down[0])
	if _, err := c.nodes[lead].Append(ctx, []byte("two-voters")); err != nil {
		t.Fatalf("append with 2 of 3 voters: %v", err)
	}
	c.nodes[down[1]].crash()
	delete(c.nodes, down[1])
	short, cancelShort := context.WithTimeout(ctx, 3*time.Second)
	defer cancelShort()
	if _, err := c.nodes[lead].Append(short, []byte("one-voter")); err == nil {
		t.Fatal("an append committed with one voter of three and an observer")
	}
}

// outsiderTest runs the cluster's refusal tests: the cluster's nodes know
// the outsider's RPC address statically (so answers could reach it), an
// outsider opened with bad options must replicate nothing, and the same
// node with good options must then catch up: the control that shows the
// refusal, not a missing route, kept the first one out.
type outsiderTest struct {
	c     *testCluster
	addr  string
	peers map[string]string
}

func newOutsiderTest(t *testing.T, mutate func(id string, o *Options)) *outsiderTest {
	t.Helper()
	addr := freeAddr(t)
	c := newCluster(t, 3, mutate)
	// The cluster is bootstrapped before its nodes list the outsider's
	// address: a fresh store asks every node it knows of, its static
	// peers too, whether a cluster exists, and bootstraps only once all
	// have answered (R60), which an outsider never does.
	c.leader(15 * time.Second)
	for _, id := range []string{"n1", "n2", "n3"} {
		if err := c.nodes[id].Close(); err != nil {
			t.Fatalf("close %s: %v", id, err)
		}
		o := c.opts[id]
		o.Peers = map[string]string{"outsider": addr}
		c.start(id, o)
	}
	lead := c.leader(15 * time.Second)
	ctx, cancel := appendCtx(t)
	defer cancel()
	if _, err := c.nodes[lead].Append(ctx, []byte("ours")); err != nil {
		t.Fatal(err)
	}
	peers := map[string]string{}
	for id, l := range c.nodes {
		peers[id] = l.Status().RPCAddr
	}
	return &outsiderTest{c: c, addr: addr, peers: peers}
}

// open starts the outsider (an observer) with mutate applied.
func (ot *outsiderTest) open(t *testing.T, dir string, mutate func(o *Options)) *Log {
	t.Helper()
	l, err := Open(ot.options(dir, mutate))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// options are the outsider's options: an observer that knows every node's
// RPC address statically and has the cluster's credentials, with mutate
// applied.
func (ot *outsiderTest) options(dir string, mutate func(o *Options)) Options {
	n1 := ot.c.opts["n1"]
	o := Options{
		Dir: dir, NodeID: "outsider", ClusterID: "test",
		Voters: n1.Voters, Peers: ot.peers, RPCAddr: ot.addr,
		FetchMaxWait: testnode.FetchMaxWait, FetchTimeout: testnode.FetchTimeout, ElectionTimeout: testnode.ElectionTimeout, NoSync: true,
		Logger: testnode.Logger(), Secret: n1.Secret, Insecure: n1.Insecure,
	}
	mutate(&o)
	return o
}

// refusedThenAdmitted checks bad gets nothing in 2 s and good catches up.
func (ot *outsiderTest) refusedThenAdmitted(t *testing.T, bad, good func(o *Options)) {
	t.Helper()
	dir := t.TempDir()
	l := ot.open(t, dir, bad)
	time.Sleep(2 * time.Second) // give it every chance to fetch
	st := l.Status()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if st.LEO != 0 || st.HighWatermark != 0 {
		t.Fatalf("refused node replicated from the cluster: %+v", st)
	}
	// A directory of its own: the bad options may name another cluster,
	// and a directory records the cluster it was created for.
	l = ot.open(t, t.TempDir(), good)
	defer l.Close()
	if got := readN(t, l, 1, 20*time.Second); string(got[0].Data) != "ours" {
		t.Fatalf("admitted node read %q", got[0].Data)
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func TestOtherClusterIsRefused(t *testing.T) {
	ot := newOutsiderTest(t, nil)
	ot.refusedThenAdmitted(t,
		func(o *Options) { o.ClusterID = "other" },
		func(o *Options) {})
}

func TestCloseFailsWaitingAppendsAndReaders(t *testing.T) {
	l, err := Open(Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := appendCtx(t)
	defer cancel()
	if _, err := l.Append(ctx, []byte("x")); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		var last error
		for _, err := range l.Read(ctx, 0) {
			last = err
		}
		done <- last
	}()
	time.Sleep(50 * time.Millisecond)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Fatalf("reader ended with %v, want ErrClosed", err)
	}
	if _, err := l.Append(ctx, []byte("y")); !errors.Is(err, ErrClosed) {
		t.Fatalf("append after close: %v, want ErrClosed", err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// A networked node with neither a secret, mutual TLS nor Insecure is
// refused at Open, before it creates its directory; the same node with the
// cluster's secret opens and catches up.
func TestOpenRefusesUnauthenticatedNetworkedNode(t *testing.T) {
	ot := newOutsiderTest(t, nil)
	dir := filepath.Join(t.TempDir(), "outsider")
	_, err := Open(ot.options(dir, func(o *Options) { o.Secret = nil }))
	if !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), "Secret") || !strings.Contains(err.Error(), "Insecure") {
		t.Fatalf("Open without credentials = %v, want ErrInvalidOptions naming Secret and Insecure", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("refused Open touched its directory: %v", err)
	}
	l := ot.open(t, dir, func(o *Options) {})
	defer l.Close()
	if got := readN(t, l, 1, 20*time.Second); string(got[0].Data) != "ours" {
		t.Fatalf("admitted node read %q", got[0].Data)
	}
}

// Insecure is an explicit opt-out: a cluster with no credentials at all
// replicates when every node says so.
func TestClusterRunsInsecureWhenAskedTo(t *testing.T) {
	c := newCluster(t, 3, func(id string, o *Options) { o.Secret, o.Insecure = nil, true })
	lead := c.leader(15 * time.Second)
	ctx, cancel := appendCtx(t)
	defer cancel()
	if _, err := c.nodes[lead].Append(ctx, []byte("plain")); err != nil {
		t.Fatal(err)
	}
	for id, l := range c.nodes {
		if got := readN(t, l, 1, 20*time.Second); string(got[0].Data) != "plain" {
			t.Fatalf("%s read %q", id, got[0].Data)
		}
	}
}

// An observer with another secret gets nothing, although every node knows
// its address; with the cluster's secret the same node catches up.
func TestOutsiderWithWrongSecretIsRefused(t *testing.T) {
	ot := newOutsiderTest(t, nil)
	ot.refusedThenAdmitted(t,
		func(o *Options) { o.Secret = []byte("not the cluster's secret, 32 B..") },
		func(o *Options) {})
}

// A voter with the wrong secret neither receives the log nor is followed
// by anyone, even though all addresses are known statically; restarted
// with the right secret it catches up.
func TestVoterWithWrongSecretIsNeitherFedNorFollowed(t *testing.T) {
	voters := []string{"n1", "n2", "n3"}
	peers := map[string]string{}
	for _, id := range voters {
		peers[id] = freeAddr(t)
	}
	// The directories first: their removal is then cleaned up after the
	// nodes close (cleanups run last first), not under a node still
	// writing (its commit journal's checkpoints make files).
	dirs := map[string]string{}
	for _, id := range voters {
		dirs[id] = t.TempDir()
	}
	c := &testCluster{t: t, opts: map[string]Options{}, nodes: map[string]*Log{}}
	t.Cleanup(c.closeAll)
	opts := func(id string) Options {
		o := testOptions(dirs[id], id, voters)
		o.GossipAddr, o.RPCAddr, o.Peers = "", peers[id], peers
		return o
	}
	c.start("n1", opts("n1"))
	c.start("n2", opts("n2"))
	good := opts("n3")
	// A brand-new cluster's first election needs every voter (R57), so n3
	// joins once with the right secret; then it restarts with a wrong one.
	first := c.start("n3", good)
	waitFor(t, "n3 holds the first voter set", 15*time.Second, func() bool {
		return first.Status().HighWatermark > 0
	})
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	delete(c.nodes, "n3")
	before := first.Status().LEO
	o3 := good
	o3.Secret = []byte("not the cluster's secret, 32 B..")
	bad := c.start("n3", o3)

	var lead string
	waitFor(t, "n1 and n2 agree on a leader", 15*time.Second, func() bool {
		l1, l2 := c.nodes["n1"].Status().LeaderID, c.nodes["n2"].Status().LeaderID
		lead = l1
		return l1 != "" && l1 == l2 && l1 != "n3"
	})
	ctx, cancel := appendCtx(t)
	defer cancel()
	for i := range 5 {
		if _, err := c.nodes[lead].Append(ctx, fmt.Appendf(nil, "s%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(2 * time.Second) // give n3 every chance to fetch or campaign
	for _, id := range []string{"n1", "n2"} {
		if st := c.nodes[id].Status(); st.LeaderID == "n3" || st.Role != "leader" && st.LeaderID != lead {
			t.Fatalf("%s follows %q, want %s: %+v", id, st.LeaderID, lead, st)
		}
	}
	st := bad.Status()
	if st.LEO != before {
		t.Fatalf("node with the wrong secret replicated: %+v, LEO %d before", st, before)
	}
	if err := bad.Close(); err != nil {
		t.Fatal(err)
	}
	delete(c.nodes, "n3")

	n3 := c.start("n3", good)
	got := readN(t, n3, 5, 20*time.Second)
	if string(got[4].Data) != "s4" {
		t.Fatalf("n3 with the right secret read %q at 4", got[4].Data)
	}
}

// Gossip is encrypted with a key derived from the secret: a memberlist
// without it cannot join, so it cannot advertise itself as leader or its
// RPC address; with the derived key the same join succeeds.
func TestGossipWithoutTheKeyCannotJoin(t *testing.T) {
	c := newCluster(t, 3, nil)
	lead := c.leader(15 * time.Second)
	seed := c.nodes["n1"].Status().GossipAddr
	rogueCfg := func(id string, key []byte) membership.Config {
		return membership.Config{
			NodeID: id, ClusterID: "test", BindAddr: "127.0.0.1:0", RPCAddr: freeAddr(t),
			Voter: true, Label: "test", SecretKey: key, Tuning: membership.FastForTests(),
		}
	}
	rogue, err := membership.New(rogueCfg("rogue", nil))
	if err != nil {
		t.Fatal(err)
	}
	defer rogue.Close()
	ctx, cancel := appendCtx(t)
	defer cancel()
	if n, err := rogue.Join(ctx, []string{seed}); err == nil {
		t.Fatalf("a memberlist without the key joined %d members", n)
	}
	_ = rogue.SetLeader("rogue", 1000)
	time.Sleep(time.Second)
	for id, l := range c.nodes {
		if addr, ok := l.ml.Resolve("rogue"); ok {
			t.Fatalf("%s learned the rogue's RPC address %s", id, addr)
		}
		if st := l.Status(); st.LeaderID != lead || st.Epoch >= 1000 {
			t.Fatalf("%s after the rogue's claim: %+v", id, st)
		}
	}

	// Control: the derived key is what kept it out.
	member, err := membership.New(rogueCfg("keyed", deriveGossipKey(testSecret)))
	if err != nil {
		t.Fatal(err)
	}
	defer member.Close()
	if _, err := member.Join(ctx, []string{seed}); err != nil {
		t.Fatalf("a memberlist with the derived key could not join: %v", err)
	}
	waitFor(t, "n1 resolves the keyed member", 10*time.Second, func() bool {
		_, ok := c.nodes["n1"].ml.Resolve("keyed")
		return ok
	})
}
