package replog_test

import (
	"context"
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
