package replog_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/replog-io/replog"
)

// Handing the leadership over: before maintenance on the leader's machine,
// move the leadership away (Close on a leader does this by itself, see
// Options.CloseTransferTimeout). Appends made meanwhile wait and go to the
// new leader.
func ExampleLog_TransferLeadership() {
	dir, err := os.MkdirTemp("", "replog-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	open := func(id string, join ...string) *replog.Log {
		l, err := replog.Open(replog.Options{
			Dir:        filepath.Join(dir, id),
			NodeID:     id,
			Voters:     []string{"n1", "n2", "n3"},
			RPCAddr:    "127.0.0.1:0",
			GossipAddr: "127.0.0.1:0",
			Join:       join,
			Insecure:   true, // loopback only; a real cluster sets Secret
		})
		if err != nil {
			log.Fatal(err)
		}
		return l
	}
	n1 := open("n1")
	defer n1.Close()
	nodes := map[string]*replog.Log{"n1": n1, "n2": open("n2", n1.Status().GossipAddr), "n3": open("n3", n1.Status().GossipAddr)}
	defer nodes["n2"].Close()
	defer nodes["n3"].Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := n1.WaitReady(ctx); err != nil {
		log.Fatal(err)
	}
	leader := nodes[n1.Status().LeaderID]
	var nl *replog.NotLeaderError
	for id, l := range nodes {
		if l != leader {
			// Only the leader hands over: the others name it.
			err := l.TransferLeadership(ctx, "")
			fmt.Println("on a follower:", errors.As(err, &nl) && nl.LeaderID == leader.Status().NodeID)
			to := id
			if err := leader.TransferLeadership(ctx, to); err != nil {
				log.Fatal(err)
			}
			fmt.Println("the successor leads:", leader.Status().LeaderID == to)
			break
		}
	}
	fmt.Println("the old leader is a", leader.Status().Role)
	// Output:
	// on a follower: true
	// the successor leads: true
	// the old leader is a follower
}
