package membership_test

import (
	"context"
	"fmt"
	"log"

	"github.com/replog-io/replog/membership"
)

// A single node on loopback: it resolves itself, advertises that it leads
// epoch 1, then leaves. Further nodes would list its GossipAddr in Join.
func ExampleNew() {
	m, err := membership.New(membership.Config{
		NodeID:    "n1",
		ClusterID: "demo",
		BindAddr:  "127.0.0.1:0", // any free port; GossipAddr tells which
		RPCAddr:   "127.0.0.1:7001",
		Voter:     true,
		Tuning:    membership.FastForTests(),
	})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()

	addr, ok := m.Resolve("n1")
	fmt.Println("n1 replicates at", addr, ok)

	if err := m.SetLeader("n1", 1); err != nil {
		log.Fatal(err)
	}
	for _, mem := range m.Members() {
		fmt.Printf("member %s voter=%v alive=%v leader=%s epoch=%d\n",
			mem.ID, mem.Voter, mem.Alive, mem.LeaderID, mem.Epoch)
	}

	go func() {
		// Hints are about other nodes; a real shell passes each to the
		// core (advisory: they never decide an election).
		for h := range m.Hints() {
			_ = h
		}
	}()

	if err := m.Leave(context.Background()); err != nil {
		log.Fatal(err)
	}
	// Output:
	// n1 replicates at 127.0.0.1:7001 true
	// member n1 voter=true alive=true leader=n1 epoch=1
}
