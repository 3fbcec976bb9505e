package replog_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
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
