package transport

import (
	"errors"
	"testing"

	"github.com/replog-io/replog/protocol"
)

// delivered sends one vote from→to and reports whether it arrived.
func delivered(t *testing.T, n *Network, from, to string) bool {
	t.Helper()
	mustSend(t, n.Transport(from), protocol.Message{From: from, To: to, Body: &protocol.VoteRequest{Epoch: 1, CandidateID: from}})
	select {
	case m := <-n.Transport(to).Receive():
		if m.From != from {
			t.Fatalf("got %v, want a message from %s", m, from)
		}
		return true
	default:
		return false
	}
}

func TestNetworkFaults(t *testing.T) {
	n := NewNetwork()
	for _, id := range []string{"a", "b", "c"} {
		defer n.Transport(id).Close()
	}
	type link struct{ from, to string }
	all := []link{{"a", "b"}, {"b", "a"}, {"a", "c"}, {"c", "a"}, {"b", "c"}, {"c", "b"}}
	check := func(step string, cut ...link) {
		t.Helper()
		isCut := map[link]bool{}
		for _, l := range cut {
			isCut[l] = true
		}
		for _, l := range all {
			if got := delivered(t, n, l.from, l.to); got == isCut[l] {
				t.Fatalf("%s: %s->%s delivered=%t", step, l.from, l.to, got)
			}
		}
	}
	check("initially")
	n.Partition("a", "b")
	check("partition a|b", link{"a", "b"}, link{"b", "a"})
	n.Heal("b", "a")
	check("heal")
	n.Block("a", "c")
	check("block a->c", link{"a", "c"})
	n.Unblock("a", "c")
	check("unblock")
	n.Isolate("c")
	check("isolate c", link{"a", "c"}, link{"c", "a"}, link{"b", "c"}, link{"c", "b"})
	if !delivered(t, n, "c", "c") {
		t.Fatal("an isolated node cannot reach itself")
	}
	n.Rejoin("c")
	check("rejoin c")
	n.Isolate("a")
	n.Block("b", "c")
	n.Partition("c", "a")
	n.HealAll()
	check("heal all")
	if n.Dropped() == 0 {
		t.Fatal("Dropped() = 0 after faults")
	}
}

func TestNetworkRestartAndQueue(t *testing.T) {
	n := NewNetwork()
	a, b := n.Transport("a"), n.Transport("b")
	defer a.Close()
	if n.Transport("a") != a {
		t.Fatal("Transport returned a different transport for a live node")
	}
	b.Close()
	before := n.Dropped()
	mustSend(t, a, protocol.Message{To: "b", Body: &protocol.BeginEpoch{}})
	if n.Dropped() != before+1 {
		t.Fatal("message to a closed node not dropped")
	}
	b2 := n.Transport("b")
	defer b2.Close()
	if b2 == b {
		t.Fatal("Transport returned the closed transport")
	}
	if !delivered(t, n, "a", "b") {
		t.Fatal("restarted node unreachable")
	}
	// A full receive channel drops instead of blocking.
	for range DefaultNetworkQueueSize + 10 {
		mustSend(t, a, protocol.Message{To: "b", Body: &protocol.BeginEpoch{}})
	}
	if got := len(b2.Receive()); got != DefaultNetworkQueueSize {
		t.Fatalf("queue holds %d, want %d", got, DefaultNetworkQueueSize)
	}
	if err := a.Send(protocol.Message{To: "b"}); err == nil {
		t.Fatal("Send without body succeeded")
	}
	if err := a.Send(protocol.Message{To: "zz", Body: &protocol.BeginEpoch{}}); !errors.Is(err, ErrUnknownPeer) {
		t.Fatalf("err = %v", err)
	}
}

// TestNetworkHandOff: the receiver gets its own entries slice; the bytes
// are shared read-only (documented).
func TestNetworkHandOff(t *testing.T) {
	n := NewNetwork()
	a, b := n.Transport("a"), n.Transport("b")
	defer a.Close()
	defer b.Close()
	entries := []protocol.Entry{{Offset: 0, Epoch: 1, Type: protocol.EntryData, Data: []byte("x")}}
	recs := [][]byte{[]byte("r")}
	mustSend(t, a, protocol.Message{To: "b", Body: &protocol.FetchResponse{Entries: entries}})
	mustSend(t, a, protocol.Message{To: "b", Body: &protocol.AppendRequest{Records: recs}})
	got := (<-b.Receive()).Body.(*protocol.FetchResponse)
	got.Entries[0].Offset = 99
	if entries[0].Offset != 0 {
		t.Fatal("receiver shares the sender's entries slice")
	}
	gotRecs := (<-b.Receive()).Body.(*protocol.AppendRequest)
	gotRecs.Records[0] = nil
	if recs[0] == nil {
		t.Fatal("receiver shares the sender's records slice")
	}
}

func TestStaticResolver(t *testing.T) {
	addrs := map[string]string{"a": "127.0.0.1:1"}
	r := StaticResolver(addrs)
	addrs["a"] = "changed"
	if a, ok := r("a"); !ok || a != "127.0.0.1:1" {
		t.Fatalf("r(a) = %q, %t", a, ok)
	}
	if _, ok := r("b"); ok {
		t.Fatal("r(b) found")
	}
}

func TestNetworkEncoding(t *testing.T) {
	n := NewNetwork()
	n.SetEncoding(true)
	a, b := n.Transport("a"), n.Transport("b")
	defer a.Close()
	defer b.Close()
	data := []byte("x")
	mustSend(t, a, protocol.Message{To: "b", Body: &protocol.FetchResponse{Entries: []protocol.Entry{{Data: data}}}})
	got := (<-b.Receive()).Body.(*protocol.FetchResponse)
	got.Entries[0].Data[0] = 'y'
	if data[0] != 'x' {
		t.Fatal("encoded network shares entry data")
	}
}
