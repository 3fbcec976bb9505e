package replog

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/memberlist"

	"github.com/replog-io/replog/internal/testwait"
)

// TestCleanClusterCloseLogsNoError: three nodes that replicate and then
// close log nothing at Error from the moment they start closing, at any
// level of detail (memberlist's goroutines used to log "use of closed
// network connection" as errors while the node closed). Closing races
// with gossip, so it is done a few times. What a loaded machine makes
// memberlist report while the cluster runs (a probe timing out) is not a
// close's doing and is not counted.
func TestCleanClusterCloseLogsNoError(t *testing.T) {
	var logs testwait.Buffer
	logger := hclog.New(&hclog.LoggerOptions{Level: hclog.Debug, Output: &logs})
	var closing []string // the logs from each round's close on
	for round := range 3 {
		c := newCluster(t, 3, func(id string, o *Options) { o.Logger = logger.Named(id) })
		c.leader(30 * time.Second)
		ctx, cancel := appendCtx(t)
		for _, l := range c.nodes {
			if _, err := l.Append(ctx, []byte("x")); err != nil {
				t.Fatal(err)
			}
		}
		cancel()
		time.Sleep(time.Duration(50*(round+1)) * time.Millisecond) // gossip in flight at Close
		mark := len(logs.String())
		c.closeAll()
		time.Sleep(100 * time.Millisecond) // memberlist goroutines that log late
		closing = append(closing, logs.String()[mark:])
	}
	var errs []string
	for _, line := range strings.Split(strings.Join(closing, ""), "\n") {
		if strings.Contains(line, "[ERROR]") {
			errs = append(errs, line)
		}
	}
	if len(errs) > 0 {
		t.Errorf("a clean close logged errors:\n%s", strings.Join(errs, "\n"))
	}
	if !strings.Contains(logs.String(), "[DEBUG]") {
		t.Fatal("nothing was logged: the capture is broken")
	}
}

// TestDuplicateNodeIDRefusedByOpen: a second Log with the node ID of a
// live one (its own directory, its own ports) is refused by Open with
// ErrDuplicateNodeID; the running node logs it at Error and counts it in
// Stats. The positive control: the same node restarted from its own
// directory on new ports starts, although the others still list its old
// addresses.
func TestDuplicateNodeIDRefusedByOpen(t *testing.T) {
	var logs testwait.Buffer
	logger := hclog.New(&hclog.LoggerOptions{Level: hclog.Info, Output: &logs})
	c := newCluster(t, 3, func(id string, o *Options) { o.Logger = logger.Named(id) })
	c.leader(30 * time.Second)

	o := testOptions(t.TempDir(), "n2", c.opts["n2"].Voters)
	o.Join = []string{c.nodes["n1"].Status().GossipAddr, c.nodes["n2"].Status().GossipAddr}
	o.Logger = logger.Named("duplicate")
	dup, err := Open(o)
	if err == nil {
		_ = dup.Close()
		t.Fatal("Open with the node ID of a live node succeeded")
	}
	if !errors.Is(err, ErrDuplicateNodeID) {
		t.Fatalf("Open: %v, want ErrDuplicateNodeID", err)
	}
	t.Logf("refused: %v", err)
	// A duplicate that stays up (a bare memberlist named n2, with the
	// cluster's gossip key) reaches the running n2: n2 logs it at Error
	// and counts it. (The refused newcomer may have been counted too, if
	// n2's check reached it before it gave up.)
	mc := memberlist.DefaultLANConfig()
	mc.Name, mc.BindAddr, mc.BindPort, mc.Label = "n2", "127.0.0.1", 0, "test"
	mc.SecretKey = deriveGossipKey(testSecret)
	mc.LogOutput = io.Discard
	bare, err := memberlist.Create(mc)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = bare.Shutdown() }()
	if _, err := bare.Join([]string{c.nodes["n2"].Status().GossipAddr}); err != nil {
		t.Fatalf("the bare duplicate could not join n2: %v", err)
	}
	waitFor(t, "n2 logs the duplicate at "+bare.LocalNode().Address(), 30*time.Second, func() bool {
		return strings.Contains(logs.String(), "[ERROR] n2.membership: another live process uses this node's ID") &&
			strings.Contains(logs.String(), bare.LocalNode().Address())
	})
	if n := c.nodes["n2"].Stats().Errors["node_id_conflict"]; n < 1 {
		t.Errorf("n2's Stats count %d node ID conflicts", n)
	}
	_ = bare.Shutdown()
	// The cluster works on, with the real n2.
	ctx, cancel := appendCtx(t)
	defer cancel()
	if _, err := c.nodes["n2"].Append(ctx, []byte("after")); err != nil {
		t.Fatalf("append through n2 after the refused duplicate: %v", err)
	}

	// Positive control: n3 crashes and comes back from its directory on
	// new ports while the others still list the old ones.
	c.nodes["n3"].crash()
	delete(c.nodes, "n3")
	o3 := c.opts["n3"]
	o3.RPCAddr, o3.GossipAddr = "127.0.0.1:0", "127.0.0.1:0"
	l3 := c.start("n3", o3)
	if n := l3.Stats().Errors["node_id_conflict"]; n != 0 {
		t.Fatalf("the restarted n3 counts %d conflicts", n)
	}
	waitFor(t, "the restarted n3 catches up", 30*time.Second, func() bool {
		return l3.Status().HighWatermark >= c.nodes["n2"].Status().HighWatermark && l3.Status().HighWatermark > 0
	})
}
