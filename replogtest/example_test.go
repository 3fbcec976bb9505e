package replogtest_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/replog-io/replog/replogtest"
)

// A service's test starts a cluster, writes through the leader, kills it
// and checks that what was acknowledged survives, then restarts the dead
// node on its directory. In a test, pass the *testing.T to NewCluster;
// this example runs outside one, with exampleT standing in.
func ExampleNewCluster() {
	t := &exampleT{}
	defer t.cleanup()
	ctx := context.Background()

	c := replogtest.NewCluster(t, 3)
	off, err := c.Leader().Append(ctx, []byte("order-1"))
	if err != nil {
		log.Fatal(err)
	}

	old := c.WaitLeader()
	c.Kill(old)
	lead := c.WaitLeader()
	fmt.Println("another leader:", lead != old)
	for e, err := range c.Node(lead).ReadRange(ctx, off, off+1) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s has %s\n", "the new leader", e.Data)
	}

	back := c.Restart(old)
	for e, err := range back.ReadRange(ctx, off, off+1) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s has %s\n", "the restarted node", e.Data)
	}
	// Output:
	// another leader: true
	// the new leader has order-1
	// the restarted node has order-1
}

// A test of code that serves many named logs starts one Node with the logs
// and records it needs.
func ExampleNewNode() {
	t := &exampleT{}
	defer t.cleanup()

	n := replogtest.NewNode(t, "n1", map[string][][]byte{
		"orders":   {[]byte("order-1"), []byte("order-2")},
		"payments": {[]byte("payment-1")},
	})
	for _, name := range []string{"orders", "payments"} {
		l, err := n.Log(name)
		if err != nil {
			log.Fatal(err)
		}
		for e, err := range l.ReadRange(context.Background(), 0, l.Status().ReadableHW) {
			if err != nil {
				log.Fatal(err)
			}
			fmt.Printf("%s: %s\n", name, e.Data)
		}
	}
	// Output:
	// orders: order-1
	// orders: order-2
	// payments: payment-1
}

// exampleT is what the examples have instead of a *testing.T.
type exampleT struct{ cleanups []func() }

func (t *exampleT) Helper()                        {}
func (t *exampleT) Cleanup(f func())               { t.cleanups = append(t.cleanups, f) }
func (t *exampleT) Errorf(format string, a ...any) { log.Printf(format, a...) }
func (t *exampleT) Fatalf(format string, a ...any) { log.Fatalf(format, a...) }

func (t *exampleT) TempDir() string {
	dir, err := os.MkdirTemp("", "replogtest-example")
	if err != nil {
		log.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// cleanup runs the cleanups, the last registered first, as testing does.
func (t *exampleT) cleanup() {
	for i := len(t.cleanups) - 1; i >= 0; i-- {
		t.cleanups[i]()
	}
}
