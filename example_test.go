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

// A single-node log: open it with a directory, append, read back what is
// committed.
func Example() {
	dir, err := os.MkdirTemp("", "replog-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	l, err := replog.Open(replog.Options{Dir: dir})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, s := range []string{"first", "second", "third"} {
		if _, err := l.Append(ctx, []byte(s)); err != nil {
			log.Fatal(err)
		}
	}

	// Read follows the log until its context ends; stop after three.
	readCtx, stop := context.WithCancel(ctx)
	defer stop()
	n := 0
	for e, err := range l.Read(readCtx, 0) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s\n", e.Data)
		if n++; n == 3 {
			break
		}
	}
	// Output:
	// first
	// second
	// third
}

// A node of a three-voter cluster, authenticated by a secret that every
// node reads from a file only the service may read. (Not run: it needs
// the other two nodes.)
func ExampleOpen_cluster() {
	secret, err := os.ReadFile("/etc/orders/replog.secret") // e.g. head -c 32 /dev/urandom
	if err != nil {
		log.Fatal(err)
	}
	l, err := replog.Open(replog.Options{
		Dir:        "/var/lib/orders/log",
		NodeID:     "n1",
		Voters:     []string{"n1", "n2", "n3"},
		RPCAddr:    "10.0.0.1:7400",
		GossipAddr: "10.0.0.1:7401",
		Join:       []string{"10.0.0.2:7401", "10.0.0.3:7401"},
		Secret:     secret, // authenticates the transport, keys gossip
	})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
}

// A node that talks to others must authenticate them: without Secret (or
// mutual TLS, or Insecure) its options are refused.
func ExampleOptions_Validate() {
	o := replog.Options{
		Dir:    "/var/lib/orders/log",
		NodeID: "n1",
		Voters: []string{"n1", "n2", "n3"},
		Peers:  map[string]string{"n2": "10.0.0.2:7400", "n3": "10.0.0.3:7400"},
	}
	err := o.Validate()
	fmt.Println(errors.Is(err, replog.ErrInvalidOptions))
	o.Secret = []byte("32 random bytes in a real cluster")
	fmt.Println(o.Validate())
	// Output:
	// true
	// <nil>
}

// WaitReady is the call to make after Open, before serving reads: it
// returns once the node knows a leader and has caught up with it.
func ExampleLog_WaitReady() {
	dir, err := os.MkdirTemp("", "replog-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	l, err := replog.Open(replog.Options{Dir: dir, NodeID: "n1"})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := l.WaitReady(ctx); err != nil {
		if errors.Is(err, replog.ErrNoLeader) {
			log.Fatal("no leader within 10s: is a majority of the voters up?")
		}
		log.Fatal(err)
	}
	st := l.Status()
	fmt.Println(st.Role, st.LeaderID)
	// Output:
	// leader n1
}

// Watch follows the node's view of its cluster (role, leader, epoch,
// voters) without polling Status; it ends with ErrClosed when the Log
// closes.
func ExampleLog_Watch() {
	dir, err := os.MkdirTemp("", "replog-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	l, err := replog.Open(replog.Options{Dir: dir, NodeID: "n1"})
	if err != nil {
		log.Fatal(err)
	}

	seen := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev, err := range l.Watch(context.Background()) {
			if err != nil {
				fmt.Println("watch ended:", err)
				return
			}
			fmt.Printf("%s, leader %s, epoch %d, voters %v\n", ev.Role, ev.LeaderID, ev.Epoch, ev.Voters)
			if ev.Role == replog.RoleLeader {
				close(seen)
			}
		}
	}()
	<-seen
	l.Close()
	<-done
	fmt.Println(l.Status().Role)
	// Output:
	// leader, leader n1, epoch 1, voters [n1]
	// watch ended: replog: log closed
	// closed
}

// Barrier makes a read on this node see every append acknowledged before
// it, on any node (read-your-writes across nodes). The barrier takes an
// offset of its own, which readers never see: offsets have gaps.
func ExampleLog_Barrier() {
	dir, err := os.MkdirTemp("", "replog-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	l, err := replog.Open(replog.Options{Dir: dir})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := l.Append(ctx, []byte("a")); err != nil {
		log.Fatal(err)
	}
	// On a follower, this is what makes the next read see "a".
	if err := l.Barrier(ctx); err != nil {
		log.Fatal(err)
	}
	if _, err := l.Append(ctx, []byte("b")); err != nil {
		log.Fatal(err)
	}
	for e, err := range l.ReadRange(ctx, 0, l.Status().ReadableHW) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%d: %s\n", e.Offset, e.Data)
	}
	// Output:
	// 1: a
	// 3: b
}

// AppendAsync lets one goroutine keep many appends in flight; a window of
// handles bounds them.
func ExampleLog_AppendAsync() {
	dir, err := os.MkdirTemp("", "replog-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	l, err := replog.Open(replog.Options{Dir: dir})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const window = 64
	var inFlight []*replog.AppendResult
	committed := 0
	wait := func(r *replog.AppendResult) {
		if _, err := r.Wait(ctx); err != nil {
			log.Fatal(err) // what Append would have returned
		}
		committed++
	}
	for i := range 1000 {
		if len(inFlight) == window {
			wait(inFlight[0])
			inFlight = inFlight[1:]
		}
		inFlight = append(inFlight, l.AppendAsync(ctx, fmt.Appendf(nil, "record %d", i)))
	}
	for _, r := range inFlight {
		wait(r)
	}
	fmt.Println(committed, "appends committed")
	// Output:
	// 1000 appends committed
}

// A consumer that must not wait silently on a node cut off from its
// leader reads with WithRequireLeader. (Not run: it needs a cluster.)
func ExampleWithRequireLeader() {
	var l *replog.Log // a node of a cluster
	ctx := replog.WithRequireLeader(context.Background(), 2*time.Second)
	for e, err := range l.Read(ctx, 0) {
		if errors.Is(err, replog.ErrNoLeader) {
			log.Printf("cut off from the leader: %v; reading elsewhere", err)
			return
		}
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%d: %s\n", e.Offset, e.Data)
	}
}

// A third node joins a running two-voter log: it opens as an observer
// (its ID is not among the voters), and AddVoter, called on any node,
// makes it a voter once it has caught up. Status.Voters is the voter set
// in force, each voter with the data directory it votes from.
func ExampleLog_AddVoter() {
	dir, err := os.MkdirTemp("", "replog-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	open := func(id string, join ...string) *replog.Log {
		l, err := replog.Open(replog.Options{
			Dir:        filepath.Join(dir, id),
			NodeID:     id,
			Voters:     []string{"n1", "n2"}, // the bootstrap set
			RPCAddr:    "127.0.0.1:0",
			GossipAddr: "127.0.0.1:0", // the nodes find each other by gossip
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
	n2 := open("n2", n1.Status().GossipAddr)
	defer n2.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := n1.Append(ctx, []byte("before n3")); err != nil {
		log.Fatal(err)
	}

	n3 := open("n3", n1.Status().GossipAddr)
	defer n3.Close()
	fmt.Println("n3 is", n3.Status().Role)
	if err := n3.AddVoter(ctx, "n3"); err != nil {
		log.Fatal(err)
	}
	// The change committed; a barrier makes n3 hold it too.
	if err := n3.Barrier(ctx); err != nil {
		log.Fatal(err)
	}
	for _, v := range n3.Status().Voters {
		fmt.Println("voter", v.ID, "at its directory:", v.DirectoryID != "")
	}
	// Output:
	// n3 is observer
	// voter n1 at its directory: true
	// voter n2 at its directory: true
	// voter n3 at its directory: true
}

// A single node hosting two named logs besides its default log: each is a
// Log of its own, with its own offsets.
func ExampleOpenNode() {
	dir, err := os.MkdirTemp("", "replog-node-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	node, err := replog.OpenNode(replog.Options{Dir: dir, NoSync: true})
	if err != nil {
		panic(err)
	}
	defer node.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, name := range []string{"orders", "payments"} {
		l, err := node.CreateLog(ctx, name, replog.LogOptions{})
		if err != nil {
			panic(err)
		}
		if _, err := l.Append(ctx, []byte(name+" #1")); err != nil {
			panic(err)
		}
	}
	if _, err := node.CreateLog(ctx, "orders", replog.LogOptions{}); errors.Is(err, replog.ErrLogExists) {
		fmt.Println("orders exists")
	}
	for _, info := range node.Logs() {
		l, err := node.Log(info.Name)
		if err != nil {
			panic(err)
		}
		for e, err := range l.Read(ctx, 0) {
			if err != nil {
				panic(err)
			}
			fmt.Println(l.Name(), string(e.Data), info.Replicas)
			break
		}
	}
	// Output:
	// orders exists
	// orders orders #1 [node1]
	// payments payments #1 [node1]
}
