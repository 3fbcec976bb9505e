package transport

import (
	"net"
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

// TestTCPHangUpOfALivePeerIsNotReported: a connection that ends while its
// peer lives on (here b closes its inbound connection from a under a's
// feet, as a middlebox's reset would) is not reported on PeerDown: a's
// probe finds b's address taking connections (HangUpsLive), and b counts
// the probe as an empty connection, not a bad one. The positive control:
// b then closes its transport, and a reports it.
func TestTCPHangUpOfALivePeerIsNotReported(t *testing.T) {
	res := newResolverMap()
	a := newTestTCP(t, TCPConfig{NodeID: "a", ClusterID: "c", Resolver: res.resolve})
	b := newTestTCP(t, TCPConfig{NodeID: "b", ClusterID: "c", Resolver: res.resolve})
	res.set("a", a.Addr())
	res.set("b", b.Addr())
	mustSend(t, a, protocol.Message{To: "b", Body: &protocol.BeginEpoch{Epoch: 1}})
	recvOne(t, b)
	b.mu.Lock()
	var cut []net.Conn
	for k, c := range b.lanesIn {
		if k.node == "a" {
			cut = append(cut, c)
		}
	}
	b.mu.Unlock()
	if len(cut) == 0 {
		t.Fatal("b has no inbound connection from a")
	}
	for _, c := range cut {
		_ = c.Close()
	}
	eventually(t, "a's probe of b", func() bool { return a.Stats().HangUpsLive >= 1 })
	select {
	case id := <-a.PeerDown():
		t.Fatalf("PeerDown(%s) though b lives on", id)
	default:
	}
	if st := b.Stats(); st.EmptyConns < 1 || st.BadConns != 0 {
		t.Fatalf("b counted the probe as EmptyConns %d, BadConns %d; want at least 1 and 0", st.EmptyConns, st.BadConns)
	}
	mustSend(t, a, protocol.Message{To: "b", Body: &protocol.BeginEpoch{Epoch: 2}}) // a redials
	recvOne(t, b)
	b.Close()
	select {
	case id := <-a.PeerDown():
		if id != "b" {
			t.Fatalf("PeerDown(%s), want b", id)
		}
	case <-time.After(waitTimeout):
		t.Fatal("no PeerDown after b closed its transport")
	}
}
