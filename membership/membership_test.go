package membership

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.uber.org/goleak"

	"github.com/replog-io/replog/internal/testwait"
	"github.com/replog-io/replog/transport"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// Generous: the machine is shared and tests run under -race.
const pollDeadline = 30 * time.Second

var _ transport.Resolver = (*Membership)(nil).Resolve

// testLogger logs to stderr when REPLOG_TEST_LOG is set (e.g. "debug").
// t.Log is not used: memberlist goroutines may log after a test ends.
func testLogger(name string) hclog.Logger {
	lvl := os.Getenv("REPLOG_TEST_LOG")
	if lvl == "" {
		return hclog.NewNullLogger()
	}
	return hclog.New(&hclog.LoggerOptions{Name: name, Level: hclog.LevelFromString(lvl), Output: os.Stderr})
}

func fastConfig(id string, seeds ...string) Config {
	return Config{
		NodeID:    id,
		ClusterID: "c1",
		BindAddr:  "127.0.0.1:0",
		RPCAddr:   fmt.Sprintf("127.0.0.1:%d", 20000+int(id[0])), // advertised only, never dialled
		Voter:     id != "c",
		Join:      seeds,
		Tuning:    FastForTests(),
		Logger:    testLogger(id),
	}
}

func start(t *testing.T, cfg Config) *Membership {
	t.Helper()
	m, err := New(cfg)
	if err != nil {
		t.Fatalf("New(%s): %v", cfg.NodeID, err)
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Errorf("Close(%s): %v", cfg.NodeID, err)
		}
	})
	return m
}

// waitFor polls cond until it holds, for at most pollDeadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testwait.WaitFor(t, what, pollDeadline, cond)
}

// waitHint reads m's hints until one equal to want arrives (others, such
// as spurious failure hints on a loaded machine, are skipped).
func waitHint(t *testing.T, m *Membership, want Hint) {
	t.Helper()
	timer := time.NewTimer(pollDeadline)
	defer timer.Stop()
	for {
		select {
		case h, ok := <-m.Hints():
			if !ok {
				t.Fatalf("%s: hints closed while waiting for %+v", m.cfg.NodeID, want)
			}
			if h == want {
				return
			}
		case <-timer.C:
			t.Fatalf("%s: no hint %+v within %v", m.cfg.NodeID, want, pollDeadline)
		}
	}
}

func member(m *Membership, id string) (Member, bool) {
	for _, mem := range m.Members() {
		if mem.ID == id {
			return mem, true
		}
	}
	return Member{}, false
}

func allAlive(m *Membership, ids ...string) bool {
	for _, id := range ids {
		if mem, ok := member(m, id); !ok || !mem.Alive {
			return false
		}
	}
	return true
}

func TestThreeNodeCluster(t *testing.T) {
	a := start(t, fastConfig("a"))
	b := start(t, fastConfig("b", a.GossipAddr()))
	c := start(t, fastConfig("c", b.GossipAddr()))
	nodes := []*Membership{a, b, c}

	if strings.HasSuffix(a.GossipAddr(), ":0") {
		t.Fatalf("GossipAddr %q does not carry the bound port", a.GossipAddr())
	}
	for _, m := range nodes {
		waitFor(t, m.cfg.NodeID+" sees a, b, c", func() bool { return allAlive(m, "a", "b", "c") })
	}

	// Everyone resolves everyone's RPC address and sees the voter flags.
	for _, m := range nodes {
		for _, other := range nodes {
			addr, ok := m.Resolve(other.cfg.NodeID)
			if !ok || addr != other.cfg.RPCAddr {
				t.Fatalf("%s.Resolve(%s) = %q, %v; want %q", m.cfg.NodeID, other.cfg.NodeID, addr, ok, other.cfg.RPCAddr)
			}
			mem, _ := member(m, other.cfg.NodeID)
			if mem.Voter != other.cfg.Voter || mem.GossipAddr != other.GossipAddr() {
				t.Fatalf("%s sees %+v", m.cfg.NodeID, mem)
			}
		}
		if _, ok := m.Resolve("nobody"); ok {
			t.Fatal("unknown node resolves")
		}
	}

	// a claims leadership of epoch 7: b and c see it and get a hint.
	if err := a.SetLeader("a", 7); err != nil {
		t.Fatalf("SetLeader: %v", err)
	}
	for _, m := range []*Membership{b, c} {
		waitFor(t, m.cfg.NodeID+" sees a lead epoch 7", func() bool {
			mem, ok := member(m, "a")
			return ok && mem.LeaderID == "a" && mem.Epoch == 7
		})
		waitHint(t, m, Hint{Kind: LeaderClaim, Node: "a", Epoch: 7})
	}

	// b advertises that it follows a: visible, but not a leadership claim.
	if err := b.SetLeader("a", 7); err != nil {
		t.Fatalf("SetLeader: %v", err)
	}
	waitFor(t, "c sees b follow a", func() bool {
		mem, ok := member(c, "b")
		return ok && mem.LeaderID == "a" && mem.Epoch == 7
	})
	// The member table and the hint are updated under one lock, so any
	// hint for b's update is already queued.
	for _, h := range drain(c) {
		if h.Kind == LeaderClaim && h.Node == "b" {
			t.Fatalf("follower's metadata produced %+v", h)
		}
	}

	// c crashes (no leave): a and b get HintNodeFailed.
	if err := c.Close(); err != nil {
		t.Fatalf("Close(c): %v", err)
	}
	for _, m := range []*Membership{a, b} {
		waitHint(t, m, Hint{Kind: NodeFailed, Node: "c"})
		waitFor(t, m.cfg.NodeID+" marks c dead", func() bool {
			mem, ok := member(m, "c")
			return ok && !mem.Alive
		})
		if addr, ok := m.Resolve("c"); !ok || addr != c.cfg.RPCAddr {
			t.Fatalf("dead c no longer resolves: %q, %v", addr, ok)
		}
	}

	// b leaves gracefully: a gets HintNodeFailed while b is still running,
	// so it came from the leave message, not from failure detection.
	ctx, cancel := context.WithTimeout(context.Background(), pollDeadline)
	defer cancel()
	if err := b.Leave(ctx); err != nil {
		t.Fatalf("Leave(b): %v", err)
	}
	waitHint(t, a, Hint{Kind: NodeFailed, Node: "b", Epoch: 7})
	if err := b.SetLeader("b", 8); !errors.Is(err, ErrClosed) {
		t.Fatalf("SetLeader after Leave: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("Close(b): %v", err)
	}
}

func TestCloseEndsEverything(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	m, err := New(fastConfig("solo"))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.SetLeader("solo", 1); err != nil {
		t.Fatalf("SetLeader alone: %v", err)
	}
	if mem, ok := member(m, "solo"); !ok || mem.LeaderID != "solo" || mem.Epoch != 1 || !mem.Alive {
		t.Fatalf("self %+v, %v", mem, ok)
	}
	ctx := context.Background()
	if err := m.Leave(ctx); err != nil {
		t.Fatalf("Leave alone: %v", err)
	}
	if err := m.Leave(ctx); err != nil {
		t.Fatalf("second Leave: %v", err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, ok := <-m.Hints(); ok {
		t.Fatal("Hints not closed")
	}
	if err := m.SetLeader("solo", 2); !errors.Is(err, ErrClosed) {
		t.Fatalf("SetLeader after Close: %v", err)
	}
	if err := m.Leave(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("Leave after Close: %v", err)
	}
	if _, err := m.Join(ctx, []string{"127.0.0.1:1"}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Join after Close: %v", err)
	}
}

func TestSetLeaderTooLarge(t *testing.T) {
	m := start(t, fastConfig("a"))
	err := m.SetLeader(strings.Repeat("L", MaxMetaSize), 1)
	if !errors.Is(err, ErrMetaTooLarge) {
		t.Fatalf("want ErrMetaTooLarge, got %v", err)
	}
	if mem, _ := member(m, "a"); mem.LeaderID != "" || mem.Epoch != 0 {
		t.Fatalf("refused update changed the metadata: %+v", mem)
	}
}

func TestFirstNodeWithUnreachableSeed(t *testing.T) {
	// A closed port: nobody to join is not fatal.
	dead := start(t, fastConfig("dead"))
	addr := dead.GossipAddr()
	if err := dead.Close(); err != nil {
		t.Fatal(err)
	}
	m := start(t, fastConfig("a", addr))
	if mem := m.Members(); len(mem) != 1 || mem[0].ID != "a" {
		t.Fatalf("members %+v", mem)
	}
	_, err := m.Join(context.Background(), []string{addr})
	if !errors.Is(err, ErrJoin) {
		t.Fatalf("explicit Join to a closed port: %v", err)
	}
}

// TestRefusedGossip: a member with another label or key cannot join, and
// neither side ever lists the other. One with the same label but another
// cluster ID joins at the gossip level but is ignored.
func TestRefusedGossip(t *testing.T) {
	key1 := []byte("0123456789abcdef")
	key2 := []byte("fedcba9876543210")
	cases := []struct {
		name     string
		good     func(*Config)
		intruder func(*Config)
	}{
		{"label", func(*Config) {}, func(c *Config) { c.Label = "other" }},
		{"key", func(c *Config) { c.SecretKey = key1 }, func(c *Config) { c.SecretKey = key2 }},
		{"no key", func(c *Config) { c.SecretKey = key1 }, func(c *Config) {}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ca := fastConfig("a")
			tc.good(&ca)
			a := start(t, ca)
			cx := fastConfig("x", a.GossipAddr()) // refused at New: logged, not fatal
			tc.intruder(&cx)
			x := start(t, cx)
			if n, err := x.Join(context.Background(), []string{a.GossipAddr()}); !errors.Is(err, ErrJoin) || n != 0 {
				t.Fatalf("Join with another %s: %d, %v", tc.name, n, err)
			}
			// A legitimate member joins; by the time a sees it, a has had
			// plenty of gossip rounds in which x could have slipped in.
			cb := fastConfig("b", a.GossipAddr())
			tc.good(&cb)
			b := start(t, cb)
			waitFor(t, "a sees b", func() bool { return allAlive(a, "a", "b") })
			waitFor(t, "b sees a", func() bool { return allAlive(b, "a", "b") })
			for _, m := range []*Membership{a, b} {
				if _, ok := m.Resolve("x"); ok {
					t.Fatalf("%s lists the intruder: %+v", m.cfg.NodeID, m.Members())
				}
			}
			if mem := x.Members(); len(mem) != 1 || mem[0].ID != "x" {
				t.Fatalf("intruder sees %+v", mem)
			}
		})
	}

	t.Run("cluster ID", func(t *testing.T) {
		ca := fastConfig("a")
		ca.Label = "shared"
		a := start(t, ca)
		cx := fastConfig("x", a.GossipAddr())
		cx.Label = "shared"
		cx.ClusterID = "c2"
		x := start(t, cx)
		cb := fastConfig("b", a.GossipAddr())
		cb.Label = "shared"
		b := start(t, cb)
		waitFor(t, "a sees b", func() bool { return allAlive(a, "a", "b") })
		waitFor(t, "b sees a", func() bool { return allAlive(b, "a", "b") })
		// x reached memberlist (same label) and, by the time b is in,
		// its metadata has been seen by a; it is still ignored.
		if a.list.NumMembers() < 3 {
			waitFor(t, "memberlist of a lists x", func() bool { return a.list.NumMembers() == 3 })
		}
		for _, m := range []*Membership{a, b} {
			if _, ok := m.Resolve("x"); ok {
				t.Fatalf("%s lists a member of another cluster", m.cfg.NodeID)
			}
		}
		if _, ok := x.Resolve("a"); ok {
			t.Fatal("x lists a member of another cluster")
		}
	})
}

// TestRestartOnNewAddress: a node that crashed and restarts with the same
// ID on a new gossip port and RPC address is taken back, with its new
// addresses, and its leadership claim is hinted again.
func TestRestartOnNewAddress(t *testing.T) {
	a := start(t, fastConfig("a"))
	b1 := start(t, fastConfig("b", a.GossipAddr()))
	waitFor(t, "a sees b", func() bool { return allAlive(a, "a", "b") })
	if err := b1.SetLeader("b", 3); err != nil {
		t.Fatal(err)
	}
	waitHint(t, a, Hint{Kind: LeaderClaim, Node: "b", Epoch: 3})
	if err := b1.Close(); err != nil {
		t.Fatal(err)
	}
	waitHint(t, a, Hint{Kind: NodeFailed, Node: "b", Epoch: 3})

	cfg := fastConfig("b", a.GossipAddr())
	cfg.RPCAddr = "127.0.0.1:29999"
	b2 := start(t, cfg)
	if b2.GossipAddr() == b1.GossipAddr() {
		t.Fatalf("restart reused gossip address %s; the test needs a new one", b2.GossipAddr())
	}
	// The broadcast may time out while a still refuses the new address
	// (DeadNodeReclaimTime); the metadata spreads regardless.
	if err := b2.SetLeader("b", 4); err != nil {
		if !errors.Is(err, ErrBroadcastTimeout) {
			t.Fatal(err)
		}
		t.Logf("SetLeader: %v", err)
	}
	waitFor(t, "a takes b back at its new addresses", func() bool {
		mem, ok := member(a, "b")
		return ok && mem.Alive && mem.RPCAddr == cfg.RPCAddr && mem.GossipAddr == b2.GossipAddr()
	})
	waitHint(t, a, Hint{Kind: LeaderClaim, Node: "b", Epoch: 4})
	if addr, _ := a.Resolve("b"); addr != cfg.RPCAddr {
		t.Fatalf("Resolve(b) = %q, want the new %q", addr, cfg.RPCAddr)
	}
}
