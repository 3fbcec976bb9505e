package replog

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// lockedBuffer is a log sink safe for the loop's and the test's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (w *lockedBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *lockedBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// TestCloseDoesNotWaitForTheDead: Close on the last live node of a cluster,
// its leader, hands over to no one (R59, R69): both followers fetched
// within FetchTimeout, but their connections closed since, so the core
// names no successor and Close closes at once instead of waiting out
// CloseTransferTimeout. Asserted on the log (no transfer started, the
// close names ErrNoSuccessor), not on timing. Static peers, no gossip:
// gossip's view of live members plays no part.
func TestCloseDoesNotWaitForTheDead(t *testing.T) {
	voters := []string{"n1", "n2", "n3"}
	peers := map[string]string{}
	for _, id := range voters {
		peers[id] = freeAddr(t)
	}
	logs := map[string]*lockedBuffer{}
	// The directories come first: cleanups run last first, so the nodes
	// close before their directories are removed.
	dirs := map[string]string{}
	for _, id := range voters {
		dirs[id] = t.TempDir()
	}
	c := &testCluster{t: t, opts: map[string]Options{}, nodes: map[string]*Log{}}
	t.Cleanup(c.closeAll)
	for _, id := range voters {
		o := testOptions(dirs[id], id, voters)
		o.GossipAddr, o.RPCAddr, o.Peers = "", peers[id], peers
		// Every follower's last fetch stays within FetchTimeout while
		// the test runs: without R69 the leader would pick one.
		o.FetchTimeout = 20 * time.Second
		o.CloseTransferTimeout = 20 * time.Second
		logs[id] = &lockedBuffer{}
		o.Logger = hclog.New(&hclog.LoggerOptions{Level: hclog.Info, Output: logs[id]})
		c.start(id, o)
	}
	lead := c.leader(15 * time.Second)
	l := c.nodes[lead]
	delete(c.nodes, lead)
	defer l.Close()
	for id, f := range c.nodes {
		if err := f.Close(); err != nil {
			t.Fatalf("close %s: %v", id, err)
		}
		delete(c.nodes, id)
	}
	// Each follower's outbound connections from the leader saw it hang up.
	waitFor(t, "the leader's transport saw both followers hang up", 10*time.Second, func() bool {
		return l.tcp.Stats().PeerClosed >= 2
	})
	time.Sleep(100 * time.Millisecond) // the loop feeds the reports to the core
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	out := logs[lead].String()
	if strings.Contains(out, "transferring leadership") {
		t.Fatalf("the leader tried to hand over to a voter whose connection had closed:\n%s", out)
	}
	if !strings.Contains(out, "closing without handing the leadership over") || !strings.Contains(out, ErrNoSuccessor.Error()) {
		t.Fatalf("want Close to find no successor (ErrNoSuccessor); log:\n%s", out)
	}
}
