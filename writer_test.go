package replog

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/storage"
)

// recordingStore logs each Apply call (its writes, in order) and can fail
// one on purpose.
type recordingStore struct {
	storage.Store
	mu     sync.Mutex
	calls  []string
	failAt int // fail the call with this index (1-based), applying nothing; 0: never
}

func (s *recordingStore) Apply(ws []protocol.Write) error {
	var parts []string
	for _, w := range ws {
		switch w.Kind {
		case protocol.WriteAppend:
			parts = append(parts, fmt.Sprintf("append %d", len(w.Entries)))
		case protocol.WriteQuorumState:
			parts = append(parts, fmt.Sprintf("quorum %d", w.Quorum.Epoch))
		default:
			parts = append(parts, fmt.Sprintf("%v %d", w.Kind, w.Offset))
		}
	}
	s.mu.Lock()
	s.calls = append(s.calls, strings.Join(parts, ", "))
	fail := len(s.calls) == s.failAt
	s.mu.Unlock()
	if fail {
		return errors.New("disk on fire")
	}
	return s.Store.Apply(ws)
}

func entries(from, n int) []protocol.Entry {
	var es []protocol.Entry
	for i := range n {
		es = append(es, protocol.Entry{Offset: uint64(from + i), Epoch: 1, Type: protocol.EntryData, Data: []byte("x")})
	}
	return es
}

// The writer hands the store everything queued since its last pass in one
// Apply, in Seq order (nothing merged or reordered), and reports the last
// Seq once.
func TestWriterAppliesAPassInOneCall(t *testing.T) {
	store := &recordingStore{Store: storage.NewMemory()}
	var mu sync.Mutex
	var persisted []uint64
	w := newWriter(store, hclog.NewNullLogger(), func(seq uint64) {
		mu.Lock()
		persisted = append(persisted, seq)
		mu.Unlock()
	}, func(err error) { t.Errorf("unexpected failure: %v", err) })
	defer w.stop()

	w.enqueue([]protocol.Write{
		{Seq: 1, Kind: protocol.WriteQuorumState, Quorum: protocol.QuorumState{Epoch: 1}},
		{Seq: 2, Kind: protocol.WriteAppend, Entries: entries(0, 2)},
		{Seq: 3, Kind: protocol.WriteAppend, Entries: entries(2, 3)},
		{Seq: 4, Kind: protocol.WriteTruncate, Offset: 4},
		{Seq: 5, Kind: protocol.WriteAppend, Entries: entries(4, 1)},
		{Seq: 6, Kind: protocol.WriteHWCheckpoint, Offset: 3},
	})
	waitFor(t, "seq 6 persisted", 5*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(persisted) > 0 && persisted[len(persisted)-1] == 6
	})
	store.mu.Lock()
	calls := slices.Clone(store.calls)
	store.mu.Unlock()
	want := []string{"quorum 1, append 2, append 3, truncate 4, append 1, hw-checkpoint 3"}
	if !slices.Equal(calls, want) {
		t.Fatalf("store calls %q, want %q", calls, want)
	}
	if got := store.LEO(); got != 5 {
		t.Fatalf("LEO %d, want 5", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(persisted, []uint64{6}) {
		t.Fatalf("persisted %v, want [6]: one report for the pass", persisted)
	}
}

// Through the writer, a pass of mixed writes (the vote, entries, the HW
// checkpoint) costs one bbolt commit: counted by the store's own stats.
func TestWriterMixedBatchIsOneBoltCommit(t *testing.T) {
	store, _, err := storage.OpenDir(t.TempDir(), storage.Identity{ClusterID: "c", NodeID: "n1"}, storage.DirOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	persisted := make(chan uint64, 10)
	w := newWriter(store, hclog.NewNullLogger(), func(seq uint64) { persisted <- seq },
		func(err error) { t.Errorf("unexpected failure: %v", err) })
	defer w.stop()
	before := store.Stats()
	w.enqueue([]protocol.Write{
		{Seq: 1, Kind: protocol.WriteQuorumState, Quorum: protocol.QuorumState{Epoch: 1, VotedFor: "n1"}},
		{Seq: 2, Kind: protocol.WriteAppend, Entries: entries(0, 3)},
		{Seq: 3, Kind: protocol.WriteQuorumState, Quorum: protocol.QuorumState{Epoch: 1, VotedFor: "n1", LeaderID: "n1"}},
		{Seq: 4, Kind: protocol.WriteAppend, Entries: entries(3, 2)},
		{Seq: 5, Kind: protocol.WriteHWCheckpoint, Offset: 5},
	})
	for seq := uint64(0); seq != 5; {
		select {
		case seq = <-persisted:
		case <-time.After(10 * time.Second):
			t.Fatal("seq 5 not persisted")
		}
	}
	after := store.Stats()
	if a, c := after.Applies-before.Applies, after.Commits-before.Commits; a != 1 || c != 1 || after.Writes-before.Writes != 5 {
		t.Fatalf("5 mixed writes took %d Applies and %d commits (stats %+v), want 1 and 1", a, c, after)
	}
	if hw, ok, _ := store.HWCheckpoint(); store.LEO() != 5 || !ok || hw != 5 {
		t.Fatalf("LEO %d, HW checkpoint %d %v", store.LEO(), hw, ok)
	}
}

// A failed Apply stops the writer: nothing of that pass or after it is
// applied or reported durable.
func TestWriterStopsAtTheFirstFailedWrite(t *testing.T) {
	store := &recordingStore{Store: storage.NewMemory(), failAt: 2}
	failed := make(chan error, 1)
	persisted := make(chan uint64, 10)
	w := newWriter(store, hclog.NewNullLogger(), func(seq uint64) { persisted <- seq },
		func(err error) { failed <- err })
	defer w.stop()
	w.enqueue([]protocol.Write{{Seq: 1, Kind: protocol.WriteAppend, Entries: entries(0, 1)}})
	select {
	case seq := <-persisted:
		if seq != 1 {
			t.Fatalf("persisted %d, want 1", seq)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("first pass not persisted")
	}
	w.enqueue([]protocol.Write{
		{Seq: 2, Kind: protocol.WriteQuorumState, Quorum: protocol.QuorumState{Epoch: 2}},
		{Seq: 3, Kind: protocol.WriteAppend, Entries: entries(1, 1)},
	})
	select {
	case err := <-failed:
		if err == nil || !strings.Contains(err.Error(), "2..3") {
			t.Fatalf("failure %v, want one naming writes 2..3", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("writer did not report the failure")
	}
	w.enqueue([]protocol.Write{{Seq: 4, Kind: protocol.WriteAppend, Entries: entries(1, 1)}})
	w.stop() // waits for the goroutine: it has returned after the failure
	select {
	case seq := <-persisted:
		t.Fatalf("persisted %d after the failure", seq)
	default:
	}
	if store.LEO() != 1 {
		t.Fatalf("LEO %d: a write of or after the failed pass was applied", store.LEO())
	}
	if q, _ := store.QuorumState(); q.Epoch != 0 {
		t.Fatalf("quorum state %+v applied from the failed pass", q)
	}
	store.mu.Lock()
	defer store.mu.Unlock()
	if len(store.calls) != 2 {
		t.Fatalf("store calls %q: nothing may reach the store after the failure", store.calls)
	}
}
