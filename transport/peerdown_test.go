package transport

import (
	"testing"
	"time"

	"github.com/replog-io/replog/protocol"
)

// TestTCPPeerDown: a peer that closes its transport is reported on
// PeerDown by the node connected to it (both its outbound connection's
// watcher and the inbound connection see the end); the side that closes
// reports nothing of its own doing; Close closes the channel.
func TestTCPPeerDown(t *testing.T) {
	res := newResolverMap()
	a := newTestTCP(t, TCPConfig{NodeID: "a", ClusterID: "c", Resolver: res.resolve})
	b := newTestTCP(t, TCPConfig{NodeID: "b", ClusterID: "c", Resolver: res.resolve})
	res.set("a", a.Addr())
	res.set("b", b.Addr())
	// Connections both ways.
	mustSend(t, a, protocol.Message{To: "b", Body: &protocol.BeginEpoch{Epoch: 1}})
	recvOne(t, b)
	mustSend(t, b, protocol.Message{To: "a", Body: &protocol.BeginEpoch{Epoch: 1}})
	recvOne(t, a)
	select {
	case id := <-a.PeerDown():
		t.Fatalf("PeerDown(%s) with every connection up", id)
	default:
	}
	b.Close()
	select {
	case id := <-a.PeerDown():
		if id != "b" {
			t.Fatalf("PeerDown(%s), want b", id)
		}
	case <-time.After(waitTimeout):
		t.Fatal("no PeerDown after the peer closed its transport")
	}
	for id := range b.PeerDown() { // closed by Close: the loop ends
		t.Fatalf("the closing side reported PeerDown(%s)", id)
	}
}

// TestTCPInboundKicksBackoff: a peer that dials us ends the backoff of our
// lanes to it, so a node that starts after its peers gave up dialling it
// for a while is reached at once, not after BackoffMax.
func TestTCPInboundKicksBackoff(t *testing.T) {
	res := newResolverMap()
	a := newTestTCP(t, TCPConfig{NodeID: "a", ClusterID: "c", Resolver: res.resolve, BackoffMin: time.Hour, BackoffMax: time.Hour})
	res.set("a", a.Addr())
	res.set("b", "127.0.0.1:1") // nobody listens: a's lanes to b back off for an hour
	mustSend(t, a, protocol.Message{To: "b", Body: &protocol.BeginEpoch{Epoch: 1}})
	eventually(t, "a failed connect", func() bool { return a.Stats().DroppedNoConn >= 1 })
	b := newTestTCP(t, TCPConfig{NodeID: "b", ClusterID: "c", Resolver: res.resolve})
	res.set("b", b.Addr())
	mustSend(t, a, protocol.Message{To: "b", Body: &protocol.BeginEpoch{Epoch: 2}}) // waits out the hour
	mustSend(t, b, protocol.Message{To: "a", Body: &protocol.BeginEpoch{Epoch: 1}}) // b dials a
	recvOne(t, a)
	if m := recvOne(t, b); m.Body.(*protocol.BeginEpoch).Epoch != 2 {
		t.Fatalf("got %v", m)
	}
}
