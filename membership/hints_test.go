package membership

import (
	"net"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/memberlist"
)

// offline builds a Membership without memberlist, to drive its event
// handling directly.
func offline(t *testing.T, buf int) *Membership {
	t.Helper()
	return &Membership{
		cfg:     Config{NodeID: "self", ClusterID: "c1"},
		logger:  hclog.NewNullLogger(),
		members: make(map[string]Member),
		hints:   make(chan Hint, buf),
	}
}

func node(t *testing.T, name string, m nodeMeta) *memberlist.Node {
	t.Helper()
	b, err := m.encode()
	if err != nil {
		t.Fatal(err)
	}
	return &memberlist.Node{Name: name, Addr: net.IPv4(127, 0, 0, 1), Port: 7946, Meta: b}
}

func drain(m *Membership) []Hint {
	var out []Hint
	for {
		select {
		case h := <-m.hints:
			out = append(out, h)
		default:
			return out
		}
	}
}

func TestHintDropsOldestWhenFull(t *testing.T) {
	m := offline(t, 2)
	m.mu.Lock()
	for i := uint64(1); i <= 5; i++ {
		m.pushLocked(Hint{Kind: LeaderClaim, Node: "x", Epoch: i})
	}
	m.mu.Unlock()
	got := drain(m)
	if len(got) != 2 || got[0].Epoch != 4 || got[1].Epoch != 5 {
		t.Fatalf("want epochs 4,5 kept, got %+v", got)
	}
	if m.Dropped() != 3 {
		t.Fatalf("dropped %d, want 3", m.Dropped())
	}
}

func TestEventsToHints(t *testing.T) {
	m := offline(t, 16)
	d := (*delegate)(m)

	// Self: recorded, no hints about itself.
	d.NotifyJoin(node(t, "self", nodeMeta{NodeID: "self", ClusterID: "c1", RPCAddr: "h:0", LeaderID: "self", Epoch: 1}))
	// A follower repeating whom it follows: no leader hint, only that it
	// joined (R60: a fresh store asks every member before bootstrapping).
	d.NotifyJoin(node(t, "b", nodeMeta{NodeID: "b", ClusterID: "c1", RPCAddr: "h:2", Voter: true, LeaderID: "a", Epoch: 3}))
	if got, want := drain(m), []Hint{{Kind: MemberJoined, Node: "b"}}; !equalHints(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	d.NotifyUpdate(node(t, "b", nodeMeta{NodeID: "b", ClusterID: "c1", RPCAddr: "h:2", Voter: true, LeaderID: "a", Epoch: 3}))
	// Another cluster, garbage, and a name/ID mismatch: ignored entirely.
	d.NotifyJoin(node(t, "x", nodeMeta{NodeID: "x", ClusterID: "c2", RPCAddr: "h:9", LeaderID: "x", Epoch: 9}))
	d.NotifyJoin(&memberlist.Node{Name: "g", Meta: []byte("garbage")})
	d.NotifyJoin(node(t, "y", nodeMeta{NodeID: "z", ClusterID: "c1", RPCAddr: "h:8", LeaderID: "z", Epoch: 9}))
	d.NotifyLeave(&memberlist.Node{Name: "x"})
	d.NotifyLeave(&memberlist.Node{Name: "g"})
	if got := drain(m); len(got) != 0 {
		t.Fatalf("unexpected hints %+v", got)
	}
	for _, id := range []string{"x", "g", "y", "z"} {
		if _, ok := m.Resolve(id); ok {
			t.Fatalf("ignored member %s resolves", id)
		}
	}

	// A leader claim: one hint, not repeated for the same epoch.
	a := nodeMeta{NodeID: "a", ClusterID: "c1", RPCAddr: "h:1", Voter: true, LeaderID: "a", Epoch: 3}
	d.NotifyJoin(node(t, "a", a))
	d.NotifyUpdate(node(t, "a", a))
	a.Epoch = 4
	d.NotifyUpdate(node(t, "a", a))
	want := []Hint{
		{Kind: MemberJoined, Node: "a"},
		{Kind: LeaderClaim, Node: "a", Epoch: 3},
		{Kind: LeaderClaim, Node: "a", Epoch: 4},
	}
	if got := drain(m); !equalHints(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}

	// Failure: one hint carrying the last advertised epoch; a second leave
	// of an already dead node is not repeated; Resolve still answers.
	d.NotifyLeave(node(t, "a", a))
	d.NotifyLeave(node(t, "a", a))
	want = []Hint{{Kind: NodeFailed, Node: "a", Epoch: 4}}
	if got := drain(m); !equalHints(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if addr, ok := m.Resolve("a"); !ok || addr != "h:1" {
		t.Fatalf("Resolve(a) = %q, %v after failure", addr, ok)
	}
	// Coming back still claiming epoch 4: it joined again, and the claim
	// is news again.
	d.NotifyJoin(node(t, "a", a))
	want = []Hint{{Kind: MemberJoined, Node: "a"}, {Kind: LeaderClaim, Node: "a", Epoch: 4}}
	if got := drain(m); !equalHints(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}

	// A member switching to another cluster's metadata is forgotten.
	a.ClusterID = "c2"
	d.NotifyUpdate(node(t, "a", a))
	if _, ok := m.Resolve("a"); ok {
		t.Fatal("member with foreign cluster ID still resolves")
	}

	mem := m.Members()
	if len(mem) != 2 || mem[0].ID != "b" || mem[1].ID != "self" {
		t.Fatalf("members %+v", mem)
	}
	if b := mem[0]; !b.Alive || !b.Voter || b.LeaderID != "a" || b.Epoch != 3 || b.RPCAddr != "h:2" || b.GossipAddr != "127.0.0.1:7946" {
		t.Fatalf("member b %+v", b)
	}

	// After close, events are absorbed without panicking on the closed
	// channel.
	m.mu.Lock()
	m.closed = true
	close(m.hints)
	m.mu.Unlock()
	d.NotifyLeave(node(t, "b", nodeMeta{NodeID: "b", ClusterID: "c1", RPCAddr: "h:2"}))
}

func equalHints(a, b []Hint) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestHintKindString(t *testing.T) {
	for k, want := range map[HintKind]string{NodeFailed: "node-failed", LeaderClaim: "leader-claim", 0: "hint(0)", 9: "hint(9)"} {
		if got := k.String(); got != want {
			t.Errorf("HintKind(%d).String() = %q, want %q", uint8(k), got, want)
		}
	}
}
