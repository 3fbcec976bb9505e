package replog_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"

	"github.com/replog-io/replog"
)

// Route a node's logs into a service's slog handler. A healthy node is
// quiet: nothing at Warn or above from opening, appending and closing.
func ExampleSlogLogger() {
	dir, err := os.MkdirTemp("", "replog-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{Level: slog.LevelWarn}))
	l, err := replog.Open(replog.Options{Dir: dir, Logger: replog.SlogLogger(logger)})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := l.Append(context.Background(), []byte("hello")); err != nil {
		log.Fatal(err)
	}
	if err := l.Close(); err != nil {
		log.Fatal(err)
	}
	fmt.Println("closed")
	// Output:
	// closed
}

// Read a node's counters, e.g. for a metrics exporter (package
// replogprom exports them to Prometheus).
func ExampleLog_Stats() {
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
	for _, r := range []string{"first", "second"} {
		if _, err := l.Append(context.Background(), []byte(r)); err != nil {
			log.Fatal(err)
		}
	}
	s := l.Stats()
	fmt.Printf("%s: %d appends, %d bytes, %d commit latencies, %d errors appending\n",
		s.Role, s.Appends, s.AppendBytes, s.CommitLatency.Count, s.Errors["append_unknown_outcome"]+s.Errors["append_not_leader"])
	// Output:
	// leader: 2 appends, 11 bytes, 2 commit latencies, 0 errors appending
}
