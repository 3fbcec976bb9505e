package replog_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/replog-io/replog"
)

// kvService is a state machine over the log: entries "key=value" set a
// key. Its state is rebuilt from its newest snapshot and the entries after
// it, never by replaying the whole log.
type kvService struct {
	l     *replog.Log
	state map[string]string
	next  uint64 // the offset the state is of: the next entry to apply
}

// restore loads the newest snapshot, if any (step 1 of the loop).
func (s *kvService) restore() error {
	s.state, s.next = map[string]string{}, 0
	info, r, err := s.l.OpenSnapshot()
	if errors.Is(err, replog.ErrNoSnapshot) {
		return nil // a new log: start from its beginning
	}
	if err != nil {
		return err
	}
	defer r.Close()
	// Streamed line by line, to the end: the reader checks the snapshot's
	// checksum as it goes, and only a whole, matching one ends cleanly.
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), "=")
		s.state[k] = v
	}
	if err := sc.Err(); err != nil {
		return err // ErrCorrupt: do not trust the state
	}
	s.next = info.Offset
	return nil
}

// catchUp applies the committed entries from s.next on (step 2).
func (s *kvService) catchUp(ctx context.Context) (int, error) {
	n, hw := 0, s.l.Status().ReadableHW
	for e, err := range s.l.ReadRange(ctx, s.next, hw) {
		if err != nil {
			return n, err // an *OutOfRangeError if retention passed s.next
		}
		k, v, _ := strings.Cut(string(e.Data), "=")
		s.state[k] = v
		s.next = e.Offset + 1
		n++
	}
	// The range ended: the state is of everything below hw (the offsets
	// after the last entry hold control entries, which readers never
	// see), so the next read, and a snapshot, may start there.
	s.next = max(s.next, hw)
	return n, nil
}

// snapshot saves the state as of s.next (step 3, now and then).
func (s *kvService) snapshot(ctx context.Context) error {
	_, err := s.l.SaveSnapshot(ctx, s.next, func(w io.Writer) error {
		bw := bufio.NewWriter(w)
		keys := make([]string, 0, len(s.state))
		for k := range s.state {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			fmt.Fprintf(bw, "%s=%s\n", k, s.state[k])
		}
		return bw.Flush()
	})
	return err
}

// runKV opens the log in dir, restores the service, appends sets, catches
// up, prints the state and snapshots it.
func runKV(ctx context.Context, dir string, sets ...string) {
	l, err := replog.Open(replog.Options{Dir: dir, RetainUntilSnapshot: true})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	// Until it has a leader, a node that just opened knows no HW, and
	// reads (and snapshots) stop below it.
	if err := l.WaitReady(ctx); err != nil {
		log.Fatal(err)
	}
	s := &kvService{l: l}
	if err := s.restore(); err != nil {
		log.Fatal(err)
	}
	restored := len(s.state)
	for _, set := range sets {
		if _, err := l.Append(ctx, []byte(set)); err != nil {
			log.Fatal(err)
		}
	}
	n, err := s.catchUp(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("restored %d keys, applied %d entries: %v\n", restored, n, s.state)
	if err := s.snapshot(ctx); err != nil {
		log.Fatal(err)
	}
}

// The snapshot loop of a state machine on the log: restore the newest
// snapshot, read from its offset on, snapshot now and then. Under
// Options.RetainUntilSnapshot retention may then delete everything below
// the newest snapshot and the state stays rebuildable on this node.
func ExampleLog_SaveSnapshot() {
	dir, err := os.MkdirTemp("", "replog-snapshot")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	runKV(ctx, dir, "apple=1", "pear=2") // no snapshot yet: from offset 0
	runKV(ctx, dir, "apple=3")           // the snapshot, then one entry
	runKV(ctx, dir)                      // the snapshot alone
	// Output:
	// restored 0 keys, applied 2 entries: map[apple:1 pear:2]
	// restored 2 keys, applied 1 entries: map[apple:3 pear:2]
	// restored 2 keys, applied 0 entries: map[apple:3 pear:2]
}
