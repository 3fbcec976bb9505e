package membership

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/memberlist"

	"github.com/replog-io/replog/internal/testwait"
)

// captureLogger logs everything, from Trace up, to buf.
func captureLogger(name string, buf io.Writer) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Name: name, Level: hclog.Trace, Output: buf})
}

// lines returns buf's log lines at level (e.g. "[ERROR]").
func linesAt(buf *testwait.Buffer, level string) []string {
	var out []string
	for _, l := range strings.Split(buf.String(), "\n") {
		if strings.Contains(l, level) {
			out = append(out, l)
		}
	}
	return out
}

// TestDuplicateNodeIDRefused: a second process claiming a live member's
// node ID, at another gossip address, is refused by New; a node that
// restarted on another address, whose old address is still listed, is
// not.
func TestDuplicateNodeIDRefused(t *testing.T) {
	a := start(t, fastConfig("a"))
	b := start(t, fastConfig("b", a.GossipAddr()))
	waitFor(t, "b sees a and b", func() bool { return allAlive(b, "a", "b") })

	dup := fastConfig("a", b.GossipAddr())
	dup.RPCAddr = "127.0.0.1:29999"
	var dupLogs testwait.Buffer
	dup.Logger = captureLogger("dup", &dupLogs)
	m, err := New(dup)
	if err == nil {
		_ = m.Close()
		t.Fatal("New with the node ID of a live member succeeded")
	}
	if !errors.Is(err, ErrDuplicateNodeID) || !strings.Contains(err.Error(), a.GossipAddr()) {
		t.Fatalf("New: %v; want ErrDuplicateNodeID naming %s", err, a.GossipAddr())
	}
	if errs := linesAt(&dupLogs, "[ERROR]"); len(errs) != 1 || !strings.Contains(errs[0], "another live process uses this node's ID") {
		t.Errorf("the refused node logged %q at Error, want one line naming the duplicate", errs)
	}
	// The cluster still knows a at its own address.
	if addr, ok := b.Resolve("a"); !ok || addr != a.cfg.RPCAddr {
		t.Errorf("b resolves a to %q, %v after the refused duplicate; want %q", addr, ok, a.cfg.RPCAddr)
	}

	// Positive control: a restarts on another port (no leave) while b
	// still lists the old address: nothing answers there, so it starts.
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	restarted := fastConfig("a", b.GossipAddr())
	var logs testwait.Buffer
	restarted.Logger = captureLogger("a2", &logs)
	a2 := start(t, restarted)
	if a2.GossipAddr() == a.GossipAddr() {
		t.Fatalf("the restart reused the gossip address %s; the test needs another", a.GossipAddr())
	}
	if !strings.Contains(logs.String(), "does not answer: a leftover of an earlier run") {
		t.Errorf("the restarted node never checked the old address it conflicted with:\n%s", logs.String())
	}
	if a2.Conflicts() != 0 || len(linesAt(&logs, "[ERROR]")) != 0 {
		t.Errorf("the restart counted %d conflicts and logged errors:\n%s", a2.Conflicts(), logs.String())
	}
	waitFor(t, "b resolves a at its new RPC address", func() bool {
		mem, ok := member(b, "a")
		return ok && mem.Alive && mem.GossipAddr == a2.GossipAddr()
	})
}

// TestRunningNodeReportsDuplicate: when another live process with this
// node's ID reaches a running node, the running node logs it at Error
// and counts it.
func TestRunningNodeReportsDuplicate(t *testing.T) {
	cfg := fastConfig("a")
	var logs testwait.Buffer
	cfg.Logger = captureLogger("a", &logs)
	a := start(t, cfg)

	// The duplicate: a bare memberlist named "a", which stays up.
	tu := FastForTests()
	mc := memberlist.DefaultLANConfig()
	mc.Name, mc.BindAddr, mc.BindPort, mc.Label = "a", "127.0.0.1", 0, a.cfg.ClusterID
	mc.LogOutput = io.Discard
	mc.ProbeInterval, mc.ProbeTimeout, mc.GossipInterval = tu.ProbeInterval, tu.ProbeTimeout, tu.GossipInterval
	dup, err := memberlist.Create(mc)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = dup.Shutdown() }()
	if _, err := dup.Join([]string{a.GossipAddr()}); err != nil {
		t.Fatalf("the duplicate could not reach a: %v", err)
	}
	waitFor(t, "a counts the duplicate", func() bool { return a.Conflicts() == 1 })
	errs := linesAt(&logs, "[ERROR]")
	if len(errs) != 1 || !strings.Contains(errs[0], "another live process uses this node's ID") ||
		!strings.Contains(errs[0], dup.LocalNode().Address()) {
		t.Fatalf("a logged %q at Error; want one line naming the duplicate at %s", errs, dup.LocalNode().Address())
	}
	// memberlist's own "Conflicting address" line is not an error of its
	// own: the check above says what it meant.
	if strings.Contains(strings.Join(errs, "\n"), "Conflicting address") {
		t.Errorf("memberlist's conflict line is still logged at Error: %q", errs)
	}
}

// TestCleanCloseLogsNoError: members that leave and close log nothing at
// Error, although memberlist's goroutines may still try to send
// on the sockets Close shut ("use of closed network connection"). The
// race is timing-dependent, so a few clusters are closed.
func TestCleanCloseLogsNoError(t *testing.T) {
	var logs testwait.Buffer
	for round := range 4 {
		var ms []*Membership
		for _, id := range []string{"a", "b", "c"} {
			var seeds []string
			for _, m := range ms {
				seeds = append(seeds, m.GossipAddr())
			}
			cfg := fastConfig(id, seeds...)
			cfg.Logger = captureLogger(id, &logs)
			m, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			ms = append(ms, m)
		}
		for _, m := range ms {
			waitFor(t, m.cfg.NodeID+" sees a, b, c", func() bool { return allAlive(m, "a", "b", "c") })
		}
		// Let the probes and gossip run, so that some are in flight at
		// Close.
		time.Sleep(time.Duration(50*(round+1)) * time.Millisecond)
		for _, m := range ms {
			// As the root's Close: a bounded leave, whose timeout is no
			// error (the last member has nobody left to tell).
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_ = m.Leave(ctx)
			cancel()
			if err := m.Close(); err != nil {
				t.Errorf("Close(%s): %v", m.cfg.NodeID, err)
			}
		}
	}
	time.Sleep(100 * time.Millisecond) // memberlist goroutines that log late
	// (Warnings may come from a loaded machine, e.g. probes that time
	// out; errors must not.)
	if l := linesAt(&logs, "[ERROR]"); len(l) > 0 {
		t.Errorf("a clean close logged at Error:\n%s", strings.Join(l, "\n"))
	}
	if !strings.Contains(logs.String(), "[DEBUG]") {
		t.Fatal("nothing was logged at all: the capture is broken")
	}
}

func TestMemberlistLogLevels(t *testing.T) {
	var buf testwait.Buffer
	m := &Membership{}
	w := &memberlistLog{m: m, log: captureLogger("ml", &buf)}
	closedErr := "[ERR] memberlist: Failed to send UDP ping: write udp 127.0.0.1:1->127.0.0.1:2: use of closed network connection\n"
	for _, line := range []string{
		"[WARN] memberlist: Got ping for unexpected node x\n",
		closedErr, // before Close: a real error
		"[ERR] memberlist: Conflicting address for a. Mine: 127.0.0.1:1 Theirs: 127.0.0.1:2 Old state: 0\n",
		"memberlist: no level\n",
	} {
		_, _ = w.Write([]byte(line))
	}
	m.closing.Store(true)
	_, _ = w.Write([]byte(closedErr)) // after: expected
	got := strings.Split(strings.TrimSpace(buf.String()), "\n")
	want := []string{
		"[WARN]  ml: Got ping for unexpected node x",
		"[ERROR] ml: Failed to send UDP ping",
		"[DEBUG] ml: Conflicting address for a.",
		"[INFO]  ml: no level",
		"[DEBUG] ml: Failed to send UDP ping",
	}
	if len(got) != len(want) {
		t.Fatalf("got %d lines, want %d:\n%s", len(got), len(want), buf.String())
	}
	for i := range want {
		if !strings.Contains(got[i], want[i]) {
			t.Errorf("line %d: %q, want it to contain %q", i, got[i], want[i])
		}
	}
}

// TestFirstNodeLogsOneLine: the first node of a cluster, whose seeds are
// not up yet, says so in one line at Info, not in a multi-line warning.
func TestFirstNodeLogsOneLine(t *testing.T) {
	cfg := fastConfig("a", "127.0.0.1:1", "127.0.0.1:2")
	var logs testwait.Buffer
	cfg.Logger = hclog.New(&hclog.LoggerOptions{Name: "a", Level: hclog.Info, Output: &logs})
	start(t, cfg)
	out := strings.TrimSpace(logs.String())
	if strings.Count(out, "\n") != 0 || !strings.Contains(out, "[INFO]") || !strings.Contains(out, "no gossip seed answered yet") ||
		!strings.Contains(out, "127.0.0.1:1") || !strings.Contains(out, "127.0.0.1:2") {
		t.Fatalf("the first node logged:\n%s\nwant one Info line naming both seeds", out)
	}
}
