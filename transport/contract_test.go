package transport

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/replog-io/replog/protocol"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// waitTimeout is generous: the machine is shared and may be loaded.
const waitTimeout = 30 * time.Second

// cluster is a set of transports under test, by node ID.
type cluster struct {
	ids   []string
	nodes map[string]Transport
	net   *Network // nil for TCP
}

// newClusterFunc builds n connected transports named n1..nN.
type newClusterFunc func(t *testing.T, n int) *cluster

// resolverMap is a concurrency-safe Resolver backed by a map.
type resolverMap struct {
	mu    sync.Mutex
	addrs map[string]string
}

func newResolverMap() *resolverMap { return &resolverMap{addrs: map[string]string{}} }

func (r *resolverMap) set(id, addr string) {
	r.mu.Lock()
	r.addrs[id] = addr
	r.mu.Unlock()
}

func (r *resolverMap) resolve(id string) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	a, ok := r.addrs[id]
	return a, ok
}

func newTCPCluster(t *testing.T, n int) *cluster { return newTCPClusterWith(t, n, nil) }

// newTCPSecretCluster is newTCPCluster with every connection
// authenticated by a shared secret.
func newTCPSecretCluster(t *testing.T, n int) *cluster { return newTCPClusterWith(t, n, testSecret) }

func newTCPClusterWith(t *testing.T, n int, secret []byte) *cluster {
	res := newResolverMap()
	c := &cluster{nodes: map[string]Transport{}}
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("n%d", i)
		tr, err := NewTCP(TCPConfig{NodeID: id, ClusterID: "test", ListenAddr: "127.0.0.1:0", Resolver: res.resolve, Logger: testLogger(t, id), Secret: secret})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		res.set(id, tr.Addr())
		c.ids = append(c.ids, id)
		c.nodes[id] = tr
	}
	return c
}

func newMemCluster(t *testing.T, n int) *cluster {
	net := NewNetwork()
	c := &cluster{nodes: map[string]Transport{}, net: net}
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("n%d", i)
		tr := net.Transport(id)
		t.Cleanup(func() { tr.Close() })
		c.ids = append(c.ids, id)
		c.nodes[id] = tr
	}
	return c
}

// recvOne waits for one message on tr.
func recvOne(t *testing.T, tr Transport) protocol.Message {
	t.Helper()
	select {
	case m, ok := <-tr.Receive():
		if !ok {
			t.Fatal("receive channel closed")
		}
		return m
	case <-time.After(waitTimeout):
		t.Fatal("timed out waiting for a message")
	}
	return protocol.Message{}
}

// warmUp sends probes from every node to every other until each pair has
// both its connections up, so later bursts are not lost to a first dial.
func warmUp(t *testing.T, c *cluster) {
	t.Helper()
	for _, from := range c.ids {
		for _, to := range c.ids {
			if from == to {
				continue
			}
			gotVote, gotFetch := false, false
			deadline := time.Now().Add(waitTimeout)
			for !gotVote || !gotFetch {
				if time.Now().After(deadline) {
					t.Fatalf("warm-up %s->%s timed out", from, to)
				}
				if !gotVote {
					mustSend(t, c.nodes[from], protocol.Message{From: from, To: to, Body: &protocol.BeginEpoch{Epoch: 0, LeaderID: "warmup"}})
				}
				if !gotFetch {
					mustSend(t, c.nodes[from], protocol.Message{From: from, To: to, Body: &protocol.FetchRequest{ReplicaID: "warmup"}})
				}
				timer := time.After(100 * time.Millisecond)
			drain:
				for {
					select {
					case m := <-c.nodes[to].Receive():
						switch m.Body.(type) {
						case *protocol.BeginEpoch:
							gotVote = gotVote || m.From == from
						case *protocol.FetchRequest:
							gotFetch = gotFetch || m.From == from
						}
					case <-timer:
						break drain
					}
					if gotVote && gotFetch {
						break drain
					}
				}
			}
		}
	}
}

// isWarmUp reports whether m is a leftover probe of warmUp.
func isWarmUp(m protocol.Message) bool {
	switch b := m.Body.(type) {
	case *protocol.BeginEpoch:
		return b.LeaderID == "warmup"
	case *protocol.FetchRequest:
		return b.ReplicaID == "warmup"
	}
	return false
}

func mustSend(t *testing.T, tr Transport, m protocol.Message) {
	t.Helper()
	if err := tr.Send(m); err != nil {
		t.Fatalf("Send %v: %v", m, err)
	}
}

func TestContractTCP(t *testing.T)       { runContract(t, newTCPCluster) }
func TestContractTCPSecret(t *testing.T) { runContract(t, newTCPSecretCluster) }
func TestContractMemory(t *testing.T)    { runContract(t, newMemCluster) }
func TestContractMemoryEncoded(t *testing.T) {
	runContract(t, func(t *testing.T, n int) *cluster {
		c := newMemCluster(t, n)
		c.net.SetEncoding(true)
		return c
	})
}

func runContract(t *testing.T, newCluster newClusterFunc) {
	t.Run("AllPairs", func(t *testing.T) {
		c := newCluster(t, 3)
		// Every node sends one vote to every node, itself included.
		for _, from := range c.ids {
			for _, to := range c.ids {
				mustSend(t, c.nodes[from], protocol.Message{From: from, To: to, Body: &protocol.VoteRequest{Epoch: 3, CandidateID: from, LEO: 7}})
			}
		}
		for _, to := range c.ids {
			seen := map[string]bool{}
			for len(seen) < len(c.ids) {
				m := recvOne(t, c.nodes[to])
				v, ok := m.Body.(*protocol.VoteRequest)
				if !ok || m.To != to || v.CandidateID != m.From || v.Epoch != 3 || v.LEO != 7 {
					t.Fatalf("%s got unexpected %v", to, m)
				}
				if seen[m.From] {
					t.Fatalf("%s got a duplicate from %s", to, m.From)
				}
				seen[m.From] = true
			}
		}
	})

	t.Run("EmptyFromIsFilledIn", func(t *testing.T) {
		c := newCluster(t, 2)
		mustSend(t, c.nodes["n1"], protocol.Message{To: "n2", Body: &protocol.BeginEpoch{Epoch: 1, LeaderID: "n1"}})
		if m := recvOne(t, c.nodes["n2"]); m.From != "n1" {
			t.Fatalf("From = %q, want n1", m.From)
		}
		if err := c.nodes["n1"].Send(protocol.Message{From: "n3", To: "n2", Body: &protocol.BeginEpoch{}}); err == nil {
			t.Fatal("sending as another node succeeded")
		}
	})

	t.Run("OrderPerPair", func(t *testing.T) {
		c := newCluster(t, 3)
		warmUp(t, c)
		// n1 and n3 both send a numbered burst of control messages and a
		// numbered burst of fetch messages to n2, interleaved. Each
		// sender's sequence of each class must arrive complete and in
		// order. (The bursts fit the default queues, so nothing drops.)
		const burst = 200
		for i := 1; i <= burst; i++ {
			for _, from := range []string{"n1", "n3"} {
				mustSend(t, c.nodes[from], protocol.Message{From: from, To: "n2", Body: &protocol.VoteRequest{Epoch: uint64(i), CandidateID: from}})
				mustSend(t, c.nodes[from], protocol.Message{From: from, To: "n2", Body: &protocol.FetchRequest{FetchID: uint64(i), ReplicaID: from}})
			}
		}
		last := map[string]uint64{}
		for got := 0; got < 4*burst; got++ {
			m := recvOne(t, c.nodes["n2"])
			if isWarmUp(m) {
				got--
				continue
			}
			var key string
			var seq uint64
			switch b := m.Body.(type) {
			case *protocol.VoteRequest:
				key, seq = m.From+"/vote", b.Epoch
			case *protocol.FetchRequest:
				key, seq = m.From+"/fetch", b.FetchID
			default:
				t.Fatalf("unexpected %v", m)
			}
			if seq != last[key]+1 {
				t.Fatalf("%s: got #%d after #%d", key, seq, last[key])
			}
			last[key] = seq
		}
	})

	t.Run("ReceiverOwnsMessage", func(t *testing.T) {
		c := newCluster(t, 3)
		// One body broadcast to two nodes: the receivers must not share it.
		body := &protocol.FetchResponse{FetchID: 1, LeaderID: "n1", Entries: nil}
		mustSend(t, c.nodes["n1"], protocol.Message{From: "n1", To: "n2", Body: body})
		mustSend(t, c.nodes["n1"], protocol.Message{From: "n1", To: "n3", Body: body})
		m2, m3 := recvOne(t, c.nodes["n2"]), recvOne(t, c.nodes["n3"])
		b2, b3 := m2.Body.(*protocol.FetchResponse), m3.Body.(*protocol.FetchResponse)
		if b2 == b3 || b2 == body || b3 == body {
			t.Fatal("receivers share the sender's body")
		}
		b2.FetchID = 99
		if b3.FetchID != 1 || body.FetchID != 1 {
			t.Fatal("a receiver's change is visible to others")
		}
	})

	t.Run("UnknownPeer", func(t *testing.T) {
		c := newCluster(t, 2)
		err := c.nodes["n1"].Send(protocol.Message{From: "n1", To: "nobody", Body: &protocol.BeginEpoch{}})
		if !errors.Is(err, ErrUnknownPeer) {
			t.Fatalf("Send to unknown peer: %v, want ErrUnknownPeer", err)
		}
	})

	t.Run("Close", func(t *testing.T) {
		c := newCluster(t, 2)
		n1, n2 := c.nodes["n1"], c.nodes["n2"]
		mustSend(t, n2, protocol.Message{From: "n2", To: "n1", Body: &protocol.BeginEpoch{Epoch: 1}})
		recvOne(t, n1)
		if err := n1.Close(); err != nil {
			t.Fatal(err)
		}
		if err := n1.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		if err := n1.Send(protocol.Message{From: "n1", To: "n2", Body: &protocol.BeginEpoch{}}); !errors.Is(err, ErrClosed) {
			t.Fatalf("Send after Close: %v, want ErrClosed", err)
		}
		if err := n1.Send(protocol.Message{From: "n1", To: "nobody", Body: &protocol.BeginEpoch{}}); !errors.Is(err, ErrClosed) {
			t.Fatalf("Send to unknown after Close: %v, want ErrClosed", err)
		}
		select {
		case _, ok := <-n1.Receive():
			if ok {
				// Drain: whatever was queued may still be read once.
				for range n1.Receive() {
				}
			}
		case <-time.After(waitTimeout):
			t.Fatal("Receive not closed after Close")
		}
		// The other node still works and sending to the closed one is not
		// an error (it is dropped).
		if err := n2.Send(protocol.Message{From: "n2", To: "n1", Body: &protocol.BeginEpoch{Epoch: 2}}); err != nil {
			t.Fatalf("Send to a closed peer: %v", err)
		}
		mustSend(t, n2, protocol.Message{From: "n2", To: "n2", Body: &protocol.BeginEpoch{Epoch: 3}})
		if m := recvOne(t, n2); m.Body.(*protocol.BeginEpoch).Epoch != 3 {
			t.Fatalf("got %v", m)
		}
	})
}

// testLogger logs to the test output when REPLOG_TEST_LOG is set, and
// nowhere otherwise.
func testLogger(t *testing.T, name string) hclogLogger {
	if os.Getenv("REPLOG_TEST_LOG") == "" {
		return nil
	}
	return newTestLogger(t, name)
}
