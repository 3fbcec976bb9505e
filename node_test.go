package replog

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/replica"
	"github.com/replog-io/replog/storage"
)

// nodeCluster runs Nodes in this process over loopback TCP and
// memberlist, as testCluster runs Logs.
type nodeCluster struct {
	t     *testing.T
	opts  map[string]Options
	nodes map[string]*Node
}

func newNodeCluster(t *testing.T, n int) *nodeCluster {
	t.Helper()
	c := &nodeCluster{t: t, opts: map[string]Options{}, nodes: map[string]*Node{}}
	var voters []string
	for i := 1; i <= n; i++ {
		voters = append(voters, fmt.Sprintf("n%d", i))
	}
	for _, id := range voters {
		c.start(id, testOptions(t.TempDir(), id, voters))
	}
	t.Cleanup(c.closeAll)
	return c
}

// start opens node id with o, joining the running nodes' gossip.
func (c *nodeCluster) start(id string, o Options) *Node {
	c.t.Helper()
	o.Join = nil
	for nid, n := range c.nodes {
		if nid != id {
			o.Join = append(o.Join, n.Default().Status().GossipAddr)
		}
	}
	n, err := OpenNode(o)
	if err != nil {
		c.t.Fatalf("open node %s: %v", id, err)
	}
	// Restarts reuse the bound ports, so that peers' cached addresses
	// stay right.
	o.RPCAddr = n.Default().Status().RPCAddr
	o.GossipAddr = n.Default().Status().GossipAddr
	c.opts[id], c.nodes[id] = o, n
	return n
}

func (c *nodeCluster) stop(id string) {
	c.t.Helper()
	if err := c.nodes[id].Close(); err != nil {
		c.t.Errorf("close %s: %v", id, err)
	}
	delete(c.nodes, id)
}

func (c *nodeCluster) closeAll() {
	for id := range c.nodes {
		c.stop(id)
	}
}

// ready waits until every node runs the default log at the feature level
// named logs need, and returns a node's ID.
func (c *nodeCluster) ready() {
	c.t.Helper()
	waitFor(c.t, "every node at the named logs' feature level", 20*time.Second, func() bool {
		for _, n := range c.nodes {
			if n.Default().Status().FeatureLevel < protocol.FeatureLevelNamedLogs {
				return false
			}
		}
		return true
	})
}

// leaders counts the named logs each node leads, as the nodes say.
func (c *nodeCluster) leaders() map[string]int {
	out := map[string]int{}
	for id, n := range c.nodes {
		n.mu.Lock()
		for _, ll := range n.logs {
			if ll.log.Status().Role == RoleLeader {
				out[id]++
			}
		}
		n.mu.Unlock()
	}
	return out
}

// preferredLeading reports whether every named log is led by its
// preferred leader.
func (c *nodeCluster) preferredLeading() bool {
	for id, n := range c.nodes {
		for _, li := range n.Logs() {
			if li.PreferredLeader != id {
				continue
			}
			l, err := n.Log(li.Name)
			if err != nil || l.Status().Role != RoleLeader {
				return false
			}
		}
	}
	return true
}

// logOn waits for node n to have log name open (a replica opens a log
// shortly after its creation commits) and returns it.
func logOn(t *testing.T, n *Node, name string) *Log {
	t.Helper()
	var l *Log
	waitFor(t, name+" open on "+n.opts.NodeID, 20*time.Second, func() bool {
		var err error
		l, err = n.Log(name)
		return err == nil
	})
	return l
}

func nodeCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestNodeLogsCreateAppendRead: 8 named logs on 3 nodes, created from
// every node, each written and read back on every replica, with their
// leaders spread over the nodes (the balancer moves each to its
// preferred leader).
func TestNodeLogsCreateAppendRead(t *testing.T) {
	c := newNodeCluster(t, 3)
	c.ready()
	ctx := nodeCtx(t)
	ids := []string{"n1", "n2", "n3"}
	var names []string
	for i := range 8 {
		name := fmt.Sprintf("log-%d", i)
		names = append(names, name)
		l, err := c.nodes[ids[i%3]].CreateLog(ctx, name, LogOptions{})
		if err != nil {
			t.Fatalf("create %s on %s: %v", name, ids[i%3], err)
		}
		if l == nil || l.Name() != name {
			t.Fatalf("create %s: got log %v, want it open here (every node is a replica)", name, l)
		}
	}
	if _, err := c.nodes["n2"].CreateLog(ctx, "log-3", LogOptions{}); !errors.Is(err, ErrLogExists) {
		t.Fatalf("creating a taken name: %v, want ErrLogExists", err)
	}
	for i, name := range names {
		l := logOn(t, c.nodes[ids[(i+1)%3]], name)
		for j := range 3 {
			if _, err := l.Append(ctx, fmt.Appendf(nil, "%s/%d", name, j)); err != nil {
				t.Fatalf("append to %s: %v", name, err)
			}
		}
	}
	for _, id := range ids {
		for _, name := range names {
			got := readN(t, logOn(t, c.nodes[id], name), 3, 20*time.Second)
			for j, e := range got {
				if want := fmt.Sprintf("%s/%d", name, j); string(e.Data) != want {
					t.Fatalf("%s: %s entry %d is %q, want %q", id, name, j, e.Data, want)
				}
			}
		}
		// The default log's readers see none of the catalog.
		if st := c.nodes[id].Default().Status(); st.ReadableHW == 0 {
			t.Fatalf("%s: default log has no committed entries", id)
		}
	}
	waitFor(t, "every log led by its preferred leader", 20*time.Second, c.preferredLeading)
	for id, n := range c.leaders() {
		if n < 2 || n > 3 {
			t.Fatalf("leaders %v: %s leads %d of 8 logs, want 2 or 3", c.leaders(), id, n)
		}
	}
	if st := c.nodes["n1"].Stats(); st.OpenLogs != 8 {
		t.Fatalf("n1 stats %+v, want 8 open logs", st)
	}
	infos := c.nodes["n1"].Logs()
	if len(infos) != 8 || infos[0].Name != "log-0" || !infos[0].Local || len(infos[0].Replicas) != 3 {
		t.Fatalf("Logs() = %+v", infos)
	}
}

// TestNodeDeleteLog: a deleted log's files go on every replica, its name
// is free again, and the new log of that name is another one.
func TestNodeDeleteLog(t *testing.T) {
	c := newNodeCluster(t, 3)
	c.ready()
	ctx := nodeCtx(t)
	l, err := c.nodes["n1"].CreateLog(ctx, "orders", LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(ctx, []byte("first")); err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, n := range c.nodes {
		dirs = append(dirs, logOn(t, n, "orders").opts.Dir)
	}
	if err := c.nodes["n2"].DeleteLog(ctx, "orders"); err != nil {
		t.Fatal(err)
	}
	if err := c.nodes["n2"].DeleteLog(ctx, "orders"); !errors.Is(err, ErrUnknownLog) {
		t.Fatalf("deleting a deleted log: %v, want ErrUnknownLog", err)
	}
	for _, d := range dirs {
		waitFor(t, "the deleted log's directory gone: "+d, 10*time.Second, func() bool {
			_, err := os.Stat(d)
			return errors.Is(err, os.ErrNotExist)
		})
	}
	for id, n := range c.nodes {
		if _, err := n.Log("orders"); !errors.Is(err, ErrUnknownLog) {
			t.Fatalf("%s: Log of a deleted log: %v, want ErrUnknownLog", id, err)
		}
	}
	l2, err := c.nodes["n3"].CreateLog(ctx, "orders", LogOptions{})
	if err != nil {
		t.Fatalf("creating a deleted log's name again: %v", err)
	}
	if slices.Contains(dirs, l2.opts.Dir) {
		t.Fatalf("the new log reuses the deleted one's directory %s", l2.opts.Dir)
	}
	if _, err := l2.Append(ctx, []byte("second")); err != nil {
		t.Fatal(err)
	}
	if got := readN(t, l2, 1, 10*time.Second); string(got[0].Data) != "second" {
		t.Fatalf("the new log starts with %q, want second (nothing of the deleted one)", got[0].Data)
	}
}

// TestNodeRestart: a restarted node comes back with the same logs and
// their entries, and a log deleted while it was down is removed from its
// disk when it comes back.
func TestNodeRestart(t *testing.T) {
	c := newNodeCluster(t, 3)
	c.ready()
	ctx := nodeCtx(t)
	for _, name := range []string{"a", "b", "c", "gone"} {
		l, err := c.nodes["n1"].CreateLog(ctx, name, LogOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Append(ctx, []byte(name+"-entry")); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"a", "b", "c", "gone"} {
		waitFor(t, name+" on n2", 10*time.Second, func() bool {
			l, err := c.nodes["n2"].Log(name)
			return err == nil && l.Status().ReadableHW >= 2
		})
	}
	gl, _ := c.nodes["n2"].Log("gone")
	goneDir := gl.opts.Dir
	c.stop("n2")
	if err := c.nodes["n1"].DeleteLog(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	n2 := c.start("n2", c.opts["n2"])
	for _, name := range []string{"a", "b", "c"} {
		l := logOn(t, n2, name)
		if got := readN(t, l, 1, 20*time.Second); string(got[0].Data) != name+"-entry" {
			t.Fatalf("%s after restart: %q", name, got[0].Data)
		}
	}
	waitFor(t, "the log deleted while n2 was down removed from its disk", 20*time.Second, func() bool {
		_, err := os.Stat(goneDir)
		return errors.Is(err, os.ErrNotExist)
	})
	if got := len(n2.Logs()); got != 3 {
		t.Fatalf("n2 lists %d logs after restart, want 3", got)
	}
}

// TestNodePlacementFiveNodes: with 5 nodes and a replication factor of
// 3, replicas and preferred leaders spread evenly, and leaders are within
// ±1 of even again after a node restarts.
func TestNodePlacementFiveNodes(t *testing.T) {
	c := newNodeCluster(t, 5)
	c.ready()
	ctx := nodeCtx(t)
	for i := range 10 {
		if _, err := c.nodes[fmt.Sprintf("n%d", i%5+1)].CreateLog(ctx, fmt.Sprintf("p%d", i), LogOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// n1 may not have read of the last creation yet.
	waitFor(t, "n1 lists the 10 logs", 10*time.Second, func() bool { return len(c.nodes["n1"].Logs()) == 10 })
	held, preferred := map[string]int{}, map[string]int{}
	for _, li := range c.nodes["n1"].Logs() {
		if len(li.Replicas) != 3 {
			t.Fatalf("%s has replicas %v, want 3", li.Name, li.Replicas)
		}
		for _, r := range li.Replicas {
			held[r]++
		}
		preferred[li.PreferredLeader]++
	}
	for id := range c.nodes {
		if held[id] != 6 || preferred[id] != 2 {
			t.Fatalf("replicas per node %v, preferred leaders %v: want 6 and 2 each", held, preferred)
		}
	}
	even := func() bool {
		if !c.preferredLeading() {
			return false
		}
		for _, n := range c.leaders() {
			if n < 1 || n > 3 {
				return false
			}
		}
		return true
	}
	waitFor(t, "leaders spread", 30*time.Second, even)
	// A node that holds none of a log's replicas: CreateLog returns no
	// Log, and Log says it is not a replica.
	for _, li := range c.nodes["n1"].Logs() {
		if li.Local {
			continue
		}
		if _, err := c.nodes["n1"].Log(li.Name); !errors.Is(err, ErrNotReplica) {
			t.Fatalf("n1: Log(%s) of a log on %v: %v, want ErrNotReplica", li.Name, li.Replicas, err)
		}
	}
	l, err := c.nodes["n1"].CreateLog(ctx, "p10", LogOptions{Replicas: 1})
	if err != nil {
		t.Fatal(err)
	}
	var infoP10 LogInfo
	for _, li := range c.nodes["n1"].Logs() {
		if li.Name == "p10" {
			infoP10 = li
		}
	}
	if (l != nil) != infoP10.Local || len(infoP10.Replicas) != 1 {
		t.Fatalf("p10 on %v: CreateLog on n1 returned %v", infoP10.Replicas, l)
	}
	// A crashed node (no hand-over, no gossip leave) comes back with its
	// logs, and the leaders spread again.
	c.nodes["n3"].crash()
	delete(c.nodes, "n3")
	c.start("n3", c.opts["n3"])
	waitFor(t, "leaders spread again after n3 restarted", 30*time.Second, even)
}

// TestNodeDefaultIsOpen: OpenNode on Open's directory is the same log,
// and Open opens a Node's directory while it holds no named logs.
func TestNodeDefaultIsOpen(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	ctx := nodeCtx(t)
	if _, err := l.Append(ctx, []byte("before")); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	n, err := OpenNode(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if got := readN(t, n.Default(), 1, 10*time.Second); string(got[0].Data) != "before" {
		t.Fatalf("default log reads %q", got[0].Data)
	}
	if n.Default().Name() != "" {
		t.Fatalf("default log's name %q", n.Default().Name())
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, logsDirName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a node without named logs made %s: %v", logsDirName, err)
	}
}

// TestNodeSingle: a single node creates, writes and deletes a named log
// (its only replica), and leaves no goroutine behind when it closes.
func TestNodeSingle(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	n, err := OpenNode(Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := nodeCtx(t)
	waitFor(t, "the named logs' feature level", 10*time.Second, func() bool {
		return n.Default().Status().FeatureLevel >= protocol.FeatureLevelNamedLogs
	})
	l, err := n.CreateLog(ctx, "one", LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(ctx, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if got := readN(t, l, 1, 10*time.Second); string(got[0].Data) != "x" {
		t.Fatalf("read %q", got[0].Data)
	}
	if _, err := n.Log("other"); !errors.Is(err, ErrUnknownLog) {
		t.Fatalf("Log of an unknown name: %v", err)
	}
	if _, err := n.CreateLog(ctx, "Bad/Name", LogOptions{}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("an invalid name: %v, want ErrInvalidArgument", err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Log("one"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Log after Close: %v, want ErrClosed", err)
	}
}

// TestNodeUndecodedSpecKeepsLog (R83): a catalog whose entry for an open
// log does not decode here (a newer release's spec, say) still holds the
// log: the reconciler neither closes it nor removes its files.
func TestNodeUndecodedSpecKeepsLog(t *testing.T) {
	n, err := OpenNode(Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	ctx := nodeCtx(t)
	waitFor(t, "the named logs' feature level", 10*time.Second, func() bool {
		return n.Default().Status().FeatureLevel >= protocol.FeatureLevelNamedLogs
	})
	l, err := n.CreateLog(ctx, "one", LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.mu.Lock()
	inc := n.logs["one"].entry.incarnation
	n.mu.Unlock()
	c := n.cat.Load()
	n.catalogChanged([]replica.LogRecord{{Name: "one", Spec: []byte(`{"replicas": 7}`), Offset: inc}}, c.hw, true)
	n.reconcile()
	if got, err := n.Log("one"); err != nil || got != l {
		t.Fatalf("Log after an undecodable spec: %v, %v", got, err)
	}
	if _, err := os.Stat(l.opts.Dir); err != nil {
		t.Fatalf("the log's directory: %v", err)
	}
	if _, err := l.Append(ctx, []byte("x")); err != nil {
		t.Fatalf("Append: %v", err)
	}
}

// TestNodeJournalLogIDsDoNotCollide: two logs of the catalog whose
// incarnations fold into the same 32 bits both open on one node's shared
// journal, each on its own ID, and each keeps its own entries.
//
// The crafted catalog is above the default log's HW, so that a restarted
// node keeps their directories until it is published again.
func TestNodeJournalLogIDsDoNotCollide(t *testing.T) {
	dir := t.TempDir()
	ctx := nodeCtx(t)
	inc := uint64(1000)
	if journalLogID(inc) != journalLogID(inc+1<<32-1) {
		t.Fatal("the incarnations do not fold alike")
	}
	var ids [2]uint32
	for run := range 2 {
		n, err := OpenNode(Options{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the catalog", 10*time.Second, func() bool { return n.cat.Load() != nil })
		self := n.opts.NodeID
		spec := logSpec{Replicas: []string{self}, Leader: self}.encode()
		n.catalogChanged([]replica.LogRecord{
			{Name: "a", Spec: spec, Offset: inc},
			{Name: "b", Spec: spec, Offset: inc + 1<<32 - 1},
		}, n.cat.Load().hw, true)
		for i, name := range []string{"a", "b"} {
			l := logOn(t, n, name)
			id, ok, err := storage.JournalLogIDOf(l.opts.Dir)
			if err != nil || !ok {
				t.Fatalf("run %d: %s's journal log ID: %v %v", run, name, ok, err)
			}
			if run == 1 && id != ids[i] {
				t.Fatalf("%s's journal log ID was %d, is %d after a restart", name, ids[i], id)
			}
			ids[i] = id
			if _, err := l.Append(ctx, []byte(name)); err != nil {
				t.Fatalf("run %d: %s: Append: %v", run, name, err)
			}
			got := readN(t, l, run+1, 10*time.Second)
			for _, e := range got {
				if string(e.Data) != name {
					t.Fatalf("run %d: %s read %q", run, name, e.Data)
				}
			}
		}
		if ids[0] == ids[1] {
			t.Fatalf("run %d: both logs have journal log ID %d", run, ids[0])
		}
		if err := n.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestLogOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		lo    LogOptions
		field string
	}{
		{LogOptions{Replicas: -1}, "Replicas"},
		{LogOptions{RetentionBytes: -1}, "RetentionBytes"},
		{LogOptions{MaxRecordSize: 1 << 30}, "MaxRecordSize"},
		{LogOptions{FetchMaxBytes: -5}, "FetchMaxBytes"},
	} {
		err := tc.lo.Validate()
		if !errors.Is(err, ErrInvalidOptions) || !containsWord(err.Error(), tc.field) {
			t.Errorf("%+v: %v, want ErrInvalidOptions naming %s", tc.lo, err, tc.field)
		}
	}
	if err := (LogOptions{}).Validate(); err != nil {
		t.Fatalf("zero LogOptions: %v", err)
	}
}

func containsWord(s, w string) bool { return len(w) > 0 && slices.Contains(splitWords(s), w) }

func splitWords(s string) []string {
	var out []string
	word := []byte{}
	for i := 0; i < len(s); i++ {
		ch := s[i]
		if ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' {
			word = append(word, ch)
			continue
		}
		if len(word) > 0 {
			out = append(out, string(word))
			word = word[:0]
		}
	}
	if len(word) > 0 {
		out = append(out, string(word))
	}
	return out
}

// TestPlace: placement spreads replicas and preferred leaders evenly,
// the same way on every node.
func TestPlace(t *testing.T) {
	voters := []string{"a", "b", "c", "d", "e"}
	c := &catalog{logs: map[string]catalogEntry{}}
	for i := range 20 {
		name := fmt.Sprintf("l%d", i)
		reps, lead := place(name, voters, c, 3)
		again, lead2 := place(name, voters, c, 3)
		if !slices.Equal(reps, again) || lead != lead2 {
			t.Fatalf("placement of %s not deterministic", name)
		}
		if len(reps) != 3 || !slices.Contains(reps, lead) {
			t.Fatalf("%s: replicas %v, leader %s", name, reps, lead)
		}
		c.logs[name] = catalogEntry{name: name, spec: logSpec{Replicas: reps, Leader: lead}, incarnation: uint64(i + 1)}
	}
	held, leads := map[string]int{}, map[string]int{}
	for _, e := range c.logs {
		for _, r := range e.spec.Replicas {
			held[r]++
		}
		leads[e.spec.Leader]++
	}
	for _, v := range voters {
		if held[v] != 12 || leads[v] != 4 {
			t.Fatalf("held %v leads %v: want 12 and 4 each", held, leads)
		}
	}
	if reps, _ := place("x", []string{"a", "b"}, c, 3); len(reps) != 2 {
		t.Fatalf("3 replicas among 2 voters: %v", reps)
	}
}

// TestNodeWipedNode: a node whose whole directory was wiped comes back
// with its named logs, each refilled from its other replicas and made a
// voter again at its new directory (R56, R58, R60 per log).
func TestNodeWipedNode(t *testing.T) {
	c := newNodeCluster(t, 3)
	c.ready()
	ctx := nodeCtx(t)
	names := []string{"w1", "w2"}
	oldDir := map[string]string{}
	for _, name := range names {
		l, err := c.nodes["n1"].CreateLog(ctx, name, LogOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Append(ctx, []byte(name+"-data")); err != nil {
			t.Fatal(err)
		}
		waitFor(t, name+" on n2", 10*time.Second, func() bool {
			l, err := c.nodes["n2"].Log(name)
			if err == nil {
				oldDir[name] = l.Status().DirectoryID
			}
			return err == nil && l.Status().ReadableHW >= 2
		})
	}
	c.stop("n2")
	dir := c.opts["n2"].Dir
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	n2 := c.start("n2", c.opts["n2"])
	for _, name := range names {
		l := logOn(t, n2, name)
		if got := readN(t, l, 1, 20*time.Second); string(got[0].Data) != name+"-data" {
			t.Fatalf("%s on the wiped n2: %q", name, got[0].Data)
		}
		waitFor(t, name+": n2 a voter again at its new directory", 30*time.Second, func() bool {
			st := l.Status()
			for _, v := range st.Voters {
				if v.ID == "n2" {
					return v.DirectoryID == st.DirectoryID && v.DirectoryID != oldDir[name]
				}
			}
			return false
		})
	}
}
