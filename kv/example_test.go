package kv_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/replog-io/replog"
	"github.com/replog-io/replog/kv"
)

// A KV on a single-node log: writes, a conditional update that loses, a
// linearizable read and a key's history.
func Example() {
	dir, err := os.MkdirTemp("", "replog-kv")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	l, err := replog.Open(replog.Options{Dir: dir, RetainUntilSnapshot: true})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	store, err := kv.Open(ctx, l, kv.Options{SnapshotEveryEntries: 1000})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	rev, err := store.Create(ctx, "config/mode", []byte("blue"))
	if err != nil {
		log.Fatal(err)
	}
	if _, err := store.Create(ctx, "config/mode", []byte("red")); errors.Is(err, kv.ErrExists) {
		fmt.Println("create again:", "exists")
	}
	if _, err := store.Update(ctx, "config/mode", []byte("green"), rev); err != nil {
		log.Fatal(err)
	}
	var mismatch *kv.RevisionMismatchError
	if _, err := store.Update(ctx, "config/mode", []byte("red"), rev); errors.As(err, &mismatch) {
		fmt.Println("update at the old revision:", mismatch.Current > mismatch.Expected)
	}
	e, err := store.GetLinearizable(ctx, "config/mode")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s = %s\n", e.Key, e.Value)
	h, err := store.History(ctx, "config/mode")
	if err != nil {
		log.Fatal(err)
	}
	for _, c := range h {
		fmt.Printf("history: %s\n", c.Value)
	}
	fmt.Println(store.Keys("config/"))
	// Output:
	// create again: exists
	// update at the old revision: true
	// config/mode = green
	// history: blue
	// history: green
	// [config/mode]
}
