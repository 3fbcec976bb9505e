package replog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/storage"
)

// stallingStore holds every Apply that writes an append while stalled,
// until released: a disk that stopped completing writes, so that the
// leader's HW stands still.
type stallingStore struct {
	storage.Store
	stalled atomic.Bool
	release chan struct{}
}

func (s *stallingStore) Apply(ws []protocol.Write) error {
	if s.stalled.Load() {
		for _, w := range ws {
			if w.Kind == protocol.WriteAppend {
				<-s.release
				break
			}
		}
	}
	return s.Store.Apply(ws)
}

// TestAppendsWaitOutAFullBacklog: R74 through the root. A single node
// whose disk stalls (its HW stands still) takes appends until its
// uncommitted backlog reaches MaxUncommittedBytes; the next append waits,
// and, when its context ends, returns an error wrapping ErrBacklogFull and
// context.DeadlineExceeded, not an unknown outcome: it was not appended.
// Another append waits too; once the disk comes back every waiting and
// accepted append commits, each record exactly once, and the one whose
// context ended is not in the log.
func TestAppendsWaitOutAFullBacklog(t *testing.T) {
	orig := openStore
	t.Cleanup(func() { openStore = orig })
	st := &stallingStore{release: make(chan struct{})}
	openStore = func(dir string, id storage.Identity, o storage.DirOptions) (storage.Store, storage.Identity, error) {
		s, id, err := storage.OpenDir(dir, id, o)
		st.Store = s
		return st, id, err
	}
	const limit = 64 << 10
	l, err := Open(Options{Dir: t.TempDir(), NoSync: true, MaxUncommittedBytes: limit})
	if err != nil {
		t.Fatal(err)
	}
	released := false
	t.Cleanup(func() {
		if !released {
			close(st.release)
		}
		l.Close()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	record := func(i int) []byte { return bytes.Repeat([]byte{byte(i)}, 8<<10) }
	if _, err := l.Append(ctx, record(0)); err != nil {
		t.Fatal(err)
	}

	st.stalled.Store(true)
	perRecord := 8<<10 + protocol.EntryOverhead
	fit := limit / perRecord
	var wg sync.WaitGroup
	errs := make([]error, fit+3)
	appendAsync := func(i int) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = l.Append(ctx, record(i))
		}()
	}
	for i := 1; i <= fit; i++ {
		appendAsync(i)
	}
	for l.Stats().UncommittedBytes < uint64(fit*perRecord) {
		if ctx.Err() != nil {
			t.Fatalf("the backlog never reached %d bytes: %+v", fit*perRecord, l.Stats())
		}
		time.Sleep(time.Millisecond)
	}

	short, cancelShort := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err = l.Append(short, record(fit+1))
	cancelShort()
	if !errors.Is(err, ErrBacklogFull) || !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrUnknownOutcome) {
		t.Fatalf("an append over the bound ended with %v; want ErrBacklogFull and context.DeadlineExceeded, outcome known", err)
	}
	s := l.Stats()
	if s.BacklogRefusals == 0 || s.Errors["append_backlog_full"] == 0 || s.UncommittedBytes != uint64(fit*perRecord) {
		t.Fatalf("stats while full: refusals %d, errors %v, uncommitted %d (want %d)", s.BacklogRefusals, s.Errors, s.UncommittedBytes, fit*perRecord)
	}
	// One more waits, retrying, until the disk comes back.
	late := fit + 2
	appendAsync(late)
	for l.Stats().BacklogRefusals <= s.BacklogRefusals {
		if ctx.Err() != nil {
			t.Fatal("the late append was never refused")
		}
		time.Sleep(time.Millisecond)
	}

	released = true
	close(st.release)
	wg.Wait()
	for i := 1; i <= late; i++ {
		if i != fit+1 && errs[i] != nil {
			t.Fatalf("append %d: %v", i, errs[i])
		}
	}
	if u := l.Stats().UncommittedBytes; u != 0 {
		t.Fatalf("%d bytes uncommitted after everything committed", u)
	}

	seen := make(map[byte]int)
	end := l.Status().HighWatermark
	for e, err := range l.Read(ctx, 0) {
		if err != nil {
			t.Fatal(err)
		}
		seen[e.Data[0]]++
		if e.Offset+1 >= end {
			break
		}
	}
	for i := 0; i <= late; i++ {
		want := 1
		if i == fit+1 {
			want = 0 // its context ended while it waited: never appended
		}
		if seen[byte(i)] != want {
			t.Errorf("record %d is in the log %d times, want %d", i, seen[byte(i)], want)
		}
	}
	if t.Failed() {
		t.Log(fmt.Sprint(seen))
	}
}

// TestForwardedAppendsWaitOutAFullBacklog: R74 through a follower. With a
// backlog bound of a few records, many appends forwarded at once by a
// follower find the leader's backlog full: the leader refuses them
// (counted), nothing appended, and the follower's appends try again until
// each commits, every record exactly once.
func TestForwardedAppendsWaitOutAFullBacklog(t *testing.T) {
	const size = 4 << 10
	c := newCluster(t, 3, func(_ string, o *Options) { o.MaxUncommittedBytes = 3 * (size + protocol.EntryOverhead) })
	lid := c.leader(10 * time.Second)
	var fid string
	for id := range c.nodes {
		if id != lid {
			fid = id
			break
		}
	}
	f := c.nodes[fid]
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const appenders, each = 16, 8
	next := 0
	var last atomic.Uint64 // the highest offset an append returned
	for round := 0; c.nodes[lid].Stats().BacklogRefusals == 0; round++ {
		if ctx.Err() != nil || round == 20 {
			t.Fatalf("the leader never refused an append for its backlog in %d rounds of %d concurrent appends", round, appenders*each)
		}
		var wg sync.WaitGroup
		errs := make(chan error, appenders)
		for range appenders {
			first := next
			next += each
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := first; i < first+each; i++ {
					rec := make([]byte, size)
					copy(rec, fmt.Sprintf("rec-%06d", i))
					off, err := f.Append(ctx, rec)
					if err != nil {
						errs <- fmt.Errorf("append %d: %w", i, err)
						return
					}
					for {
						if l := last.Load(); off <= l || last.CompareAndSwap(l, off) {
							break
						}
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	seen := make(map[string]int)
	for e, err := range f.Read(ctx, 0) {
		if err != nil {
			t.Fatal(err)
		}
		if len(e.Data) == size {
			seen[string(e.Data[:10])]++
		}
		if e.Offset >= last.Load() {
			break
		}
	}
	for i := range next {
		if k := fmt.Sprintf("rec-%06d", i); seen[k] != 1 {
			t.Errorf("%s is in the log %d times, want once", k, seen[k])
		}
	}
	if s := f.Stats(); s.Errors["append_not_leader"] == 0 {
		t.Errorf("the follower counted no not-leader answer: %v", s.Errors)
	}
}
