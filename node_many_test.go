package replog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/replog-io/replog/storage"
)

// TestNodeConcurrentCreates (R85): many CreateLogs at once on one node
// all succeed, each name once (a name asked for twice at once: one
// creation, the other ErrLogExists), and placement counts the creations
// under way: with 5 nodes and factor 3, 20 logs created at once give
// every node 12±1 replicas and 4±1 preferred leaderships, as 20 one after
// another do (in some orders the greedy placement ends one off). Fails if placement counts only the committed catalog (every
// creation would count the same one and place alike).
func TestNodeConcurrentCreates(t *testing.T) {
	c := newNodeCluster(t, 5)
	c.ready()
	ctx := nodeCtx(t)
	const logs = 20
	n := c.nodes["n2"]
	var wg sync.WaitGroup
	errs := make([]error, logs+1)
	for i := range logs + 1 {
		name := fmt.Sprintf("c%d", i%logs) // c0 asked for twice
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = n.CreateLog(ctx, name, LogOptions{})
		}()
	}
	wg.Wait()
	exists := 0
	for i, err := range errs {
		switch {
		case errors.Is(err, ErrLogExists) && i%logs == 0:
			exists++
		case err != nil:
			t.Fatalf("create %d: %v", i, err)
		}
	}
	if exists != 1 {
		t.Fatalf("c0 asked for twice at once: %d ErrLogExists, want 1", exists)
	}
	infos := n.Logs()
	if len(infos) != logs {
		t.Fatalf("n2 lists %d logs, want %d", len(infos), logs)
	}
	held, preferred := map[string]int{}, map[string]int{}
	for _, li := range infos {
		if len(li.Replicas) != 3 {
			t.Fatalf("%s has replicas %v, want 3", li.Name, li.Replicas)
		}
		for _, r := range li.Replicas {
			held[r]++
		}
		preferred[li.PreferredLeader]++
	}
	for id := range c.nodes {
		if held[id] < 11 || held[id] > 13 || preferred[id] < 3 || preferred[id] > 5 {
			t.Fatalf("placement of %d logs created at once: replicas %v, preferred leaders %v; want 12±1 and 4±1 on each node", logs, held, preferred)
		}
	}
	for _, li := range infos {
		for _, r := range li.Replicas {
			logOn(t, c.nodes[r], li.Name)
		}
	}
}

// TestNodeRestartOpensEveryLog: a node restarted with many logs opens
// every one (side by side); a log whose open fails is reported and does
// not stop the others, and is opened once it can be; a log created while
// the node is opening the others is opened too.
func TestNodeRestartOpensEveryLog(t *testing.T) {
	c := newNodeCluster(t, 3)
	c.ready()
	ctx := nodeCtx(t)
	const logs = 24
	for i := range logs {
		if _, err := c.nodes["n1"].CreateLog(ctx, fmt.Sprintf("r%02d", i), LogOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range logs {
		logOn(t, c.nodes["n3"], fmt.Sprintf("r%02d", i))
	}
	c.stop("n3")
	// One log's store refuses to open, as a damaged directory would.
	broken := "r07"
	var mu sync.Mutex
	refused := 0
	prev := openStore
	openStore = func(dir string, id storage.Identity, opts storage.DirOptions) (storage.Store, storage.Identity, error) {
		if strings.HasPrefix(filepath.Base(dir), broken+"-") {
			mu.Lock()
			refused++
			mu.Unlock()
			return nil, storage.Identity{}, fmt.Errorf("%w: injected", storage.ErrCorrupt)
		}
		return prev(dir, id, opts)
	}
	restore := sync.OnceFunc(func() { openStore = prev })
	defer restore()
	n3 := c.start("n3", c.opts["n3"])
	// Created while n3 opens the others.
	if _, err := c.nodes["n1"].CreateLog(ctx, "late", LogOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range logs {
		if name := fmt.Sprintf("r%02d", i); name != broken {
			logOn(t, n3, name)
		}
	}
	logOn(t, n3, "late")
	mu.Lock()
	tried := refused
	mu.Unlock()
	if tried == 0 {
		t.Fatal("the broken log's open was never tried")
	}
	if _, err := n3.Log(broken); err == nil {
		t.Fatal("the log whose store refused to open is open")
	}
	restore()
	logOn(t, n3, broken) // the reconciler tries again every second
	if got := n3.Stats().OpenLogs; got != logs+1 {
		t.Fatalf("n3 has %d logs open, want %d", got, logs+1)
	}
}

// TestRemoveStaleUnfinishedCreation: a temporary directory that
// storage.CreateDir left when a crash stopped a log's creation is
// removed, but not while a log is being opened (its opener may be
// building it), nor a spare's (the spare maker's own).
func TestRemoveStaleUnfinishedCreation(t *testing.T) {
	dir := t.TempDir()
	n := &Node{opts: Options{Dir: dir, NodeID: "n1"}.withDefaults(), logger: hclog.NewNullLogger(), opening: map[string]uint64{}}
	tmp := filepath.Join(dir, logsDirName, storage.CreatingDirPrefix+"orders-5")
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	c := &catalog{hw: 10, logs: map[string]catalogEntry{}}
	n.opening["orders"] = 5
	n.removeStale(c)
	if _, err := os.Stat(tmp); err != nil {
		t.Fatalf("removed while a log was opening: %v", err)
	}
	// A spare in the making is the spare maker's.
	spare := filepath.Join(dir, logsDirName, storage.CreatingDirPrefix+spareDirPrefix+"1-1")
	if err := os.MkdirAll(spare, 0o755); err != nil {
		t.Fatal(err)
	}
	delete(n.opening, "orders")
	n.removeStale(c)
	if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the unfinished creation's directory is still there (%v)", err)
	}
	if _, err := os.Stat(spare); err != nil {
		t.Fatalf("a spare directory in the making was removed: %v", err)
	}
}

// TestNodeSpareDirectories (R101): a node that holds named logs keeps
// spareDirs empty directories made ahead, and a new log's directory is
// one of them renamed (the creation waits for a rename, not a
// directory's fsyncs); the maker makes another. Spares a previous run
// left are removed, not taken.
func TestNodeSpareDirectories(t *testing.T) {
	c := newNodeCluster(t, 3)
	c.ready()
	ctx := nodeCtx(t)
	n1 := c.nodes["n1"]
	spares := func(n *Node) []string {
		n.mu.Lock()
		defer n.mu.Unlock()
		return append([]string(nil), n.spares...)
	}
	if _, err := n1.CreateLog(ctx, "s1", LogOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "n1's spare directories made", 20*time.Second, func() bool { return len(spares(n1)) == spareDirs })
	before := spares(n1)
	l, err := n1.CreateLog(ctx, "s2", LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(before[0]); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the first spare %s is still there after a creation (%v): not taken", before[0], err)
	}
	if _, err := os.Stat(l.opts.Dir); err != nil {
		t.Fatalf("the new log's directory: %v", err)
	}
	waitFor(t, "n1 makes a spare again", 20*time.Second, func() bool {
		s := spares(n1)
		return len(s) == spareDirs && s[len(s)-1] != before[len(before)-1]
	})
	left := spares(n1)
	o := c.opts["n1"]
	c.stop("n1")
	n1 = c.start("n1", o)
	logOn(t, n1, "s2")
	if _, err := n1.CreateLog(ctx, "s3", LogOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the spares of the previous run removed", 20*time.Second, func() bool {
		for _, p := range left {
			if _, err := os.Stat(p); err == nil {
				return false
			}
		}
		return true
	})
}
