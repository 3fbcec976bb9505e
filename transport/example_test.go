package transport_test

import (
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/transport"
)

// addrBook is a Resolver both transports share: each listens on a free
// port, so an address is known only once its transport has started.
type addrBook struct {
	mu    sync.Mutex
	addrs map[string]string
}

func (b *addrBook) set(id, addr string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.addrs[id] = addr
}

func (b *addrBook) resolve(id string) (string, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	addr, ok := b.addrs[id]
	return addr, ok
}

// receive waits for t's next message. Delivery is best effort, so a real
// consumer never counts on one message; on loopback it arrives.
func receive(t transport.Transport) protocol.Message {
	select {
	case m := <-t.Receive():
		return m
	case <-time.After(10 * time.Second):
		log.Fatal("no message")
		return protocol.Message{}
	}
}

// Two nodes on loopback, authenticated by a shared secret: n1 sends a vote
// request, n2 receives it with From set to the node ID n1's connection
// proved, n2 answers over its own connection to n1.
func ExampleNewTCP() {
	secret := []byte("0123456789abcdef0123456789abcdef") // use 32 random bytes
	book := &addrBook{addrs: map[string]string{}}
	start := func(id string) *transport.TCP {
		t, err := transport.NewTCP(transport.TCPConfig{
			NodeID:     id,
			ClusterID:  "demo",
			ListenAddr: "127.0.0.1:0", // any free port; Addr tells which
			Resolver:   book.resolve,
			Secret:     secret,
		})
		if err != nil {
			log.Fatal(err)
		}
		book.set(id, t.Addr())
		return t
	}
	n1, n2 := start("n1"), start("n2")
	// Close waits for the transport's goroutines and closes Receive.
	defer n1.Close()
	defer n2.Close()

	// Send queues and returns; the first message to a peer dials it and
	// runs the handshake.
	err := n1.Send(protocol.Message{To: "n2", Body: &protocol.VoteRequest{
		Epoch: 4, CandidateID: "n1", LastEpoch: 3, LEO: 10, PreVote: true, Round: 1,
	}})
	if err != nil {
		log.Fatal(err)
	}
	m := receive(n2)
	fmt.Println("n2 got:", m)

	req := m.Body.(*protocol.VoteRequest)
	err = n2.Send(protocol.Message{To: m.From, Body: &protocol.VoteResponse{
		Epoch: 3, VoterID: "n2", Granted: true, PreVote: true, RequestEpoch: req.Epoch, Round: req.Round,
	}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("n1 got:", receive(n1))

	// A node the Resolver does not know is refused at once.
	err = n1.Send(protocol.Message{To: "n9", Body: &protocol.BeginEpoch{Epoch: 4, LeaderID: "n1"}})
	fmt.Println(err)
	// Output:
	// n2 got: n1->n2 Vote{epoch=4 cand=n1 last=(3,10) pre=true round=1}
	// n1 got: n2->n1 VoteResp{epoch=3 voter=n2 granted=true pre=true req=(4,1) leader=}
	// replog: unknown peer: n9
}
