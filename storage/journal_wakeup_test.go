package storage_test

import (
	"fmt"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/storage"
)

// applyAll runs one Apply per store at once, ws[i] on stores[i], and
// returns once each is queued for a round (queued more than already
// were) and a function that waits for them all.
func applyAll(t *testing.T, j *storage.Journal, stores []*storage.DirStore, ws [][]protocol.Write, queued int) (wait func()) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, len(stores))
	for i := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = stores[i].Apply(ws[i])
		}()
	}
	for storage.QueuedRequests(j) < queued+len(stores) {
		runtime.Gosched()
	}
	return func() {
		t.Helper()
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("store %d: %v", i, err)
			}
		}
	}
}

// A round's end wakes only the commits it completed and the one it hands
// the next round to, once each: N stores' Applies queued behind a round
// cost one more round (one record, one fdatasync) and N wake-ups, not a
// wake-up of every waiter at every round's end (a herd: with a shared
// condition variable, the first round's end woke all N, the second's the
// N-1 left, and so on).
func TestJournalRoundWakesOnlyItsCommits(t *testing.T) {
	const n = 16
	root := t.TempDir()
	j := openJournalFile(t, filepath.Join(root, "shared.journal"), storage.JournalOptions{Bytes: 4 << 20})
	defer j.Close()
	stores := make([]*storage.DirStore, n)
	for i := range stores {
		stores[i] = openShared(t, filepath.Join(root, fmt.Sprint(i)), j, uint32(i+1))
		defer stores[i].Close()
	}
	batches := func() [][]protocol.Write {
		ws := make([][]protocol.Write, n)
		for i, s := range stores {
			ws[i] = appendBatch(s, 1, 2, 200)
		}
		return ws
	}

	// n Applies queued while no round may run, then let go: the first
	// queued leads one round for all of them.
	before := j.Stats()
	release := storage.HoldRounds(j)
	wait := applyAll(t, j, stores, batches(), 0)
	release()
	wait()
	after := j.Stats()
	if rec, b, f := after.Records-before.Records, after.Batches-before.Batches, after.Fsyncs-before.Fsyncs; rec != 1 || b != n || f != 1 {
		t.Fatalf("%d Applies queued together: %d records, %d batches, %d fsyncs; want 1, %d, 1", n, rec, b, f, n)
	}
	if w := after.Wakeups - before.Wakeups; w != n {
		t.Fatalf("%d Applies queued together were woken %d times, want %d (each once: the first handed the round, the others when it wrote them)", n, w, n)
	}

	// A round under way (held inside its write, before its sync) while
	// n-1 more Applies queue: its end hands the next round to the
	// oldest of them (one wake-up) and that round takes them all (n-2
	// more); the store of the round under way does not wait at all.
	before = j.Stats()
	inRound, letGo := make(chan struct{}), make(chan struct{})
	var once sync.Once
	storage.SetJournalHook(func(stage string) {
		if stage == "append" {
			once.Do(func() {
				close(inRound)
				<-letGo
			})
		}
	})
	defer storage.SetJournalHook(nil)
	ws := batches()
	firstDone := make(chan error, 1)
	go func() { firstDone <- stores[0].Apply(ws[0]) }()
	<-inRound
	wait = applyAll(t, j, stores[1:], ws[1:], 0)
	close(letGo)
	if err := <-firstDone; err != nil {
		t.Fatal(err)
	}
	wait()
	after = j.Stats()
	if rec, b := after.Records-before.Records, after.Batches-before.Batches; rec != 2 || b != n {
		t.Fatalf("one Apply in a round while %d queued: %d records holding %d batches; want 2 holding %d", n-1, rec, b, n)
	}
	if w := after.Wakeups - before.Wakeups; w != n-1 {
		t.Fatalf("%d Applies queued behind a round were woken %d times, want %d", n-1, w, n-1)
	}
}
