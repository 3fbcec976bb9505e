package replog

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/storage"
)

// recordingStore logs each write call and can fail one on purpose.
type recordingStore struct {
	storage.Store
	mu     sync.Mutex
	calls  []string
	failAt int // fail the call with this index (1-based); 0: never
}

func (s *recordingStore) record(call string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, call)
	if len(s.calls) == s.failAt {
		return errors.New("disk on fire")
	}
	return nil
}

func (s *recordingStore) Append(es []protocol.Entry) error {
	if err := s.record(fmt.Sprintf("append %d", len(es))); err != nil {
		return err
	}
	return s.Store.Append(es)
}

func (s *recordingStore) TruncateSuffix(from uint64) error {
	if err := s.record(fmt.Sprintf("truncate %d", from)); err != nil {
		return err
	}
	return s.Store.TruncateSuffix(from)
}

func (s *recordingStore) SetQuorumState(q protocol.QuorumState) error {
	if err := s.record(fmt.Sprintf("quorum %d", q.Epoch)); err != nil {
		return err
	}
	return s.Store.SetQuorumState(q)
}

func entries(from, n int) []protocol.Entry {
	var es []protocol.Entry
	for i := range n {
		es = append(es, protocol.Entry{Offset: uint64(from + i), Epoch: 1, Type: protocol.EntryData, Data: []byte("x")})
	}
	return es
}

// The writer merges each run of appends into one store call, keeps every
// other write in its place, and reports the last Seq it made durable.
func TestWriterMergesAppendRunsInOrder(t *testing.T) {
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
	})
	waitFor(t, "seq 5 persisted", 5*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(persisted) > 0 && persisted[len(persisted)-1] == 5
	})
	store.mu.Lock()
	calls := slices.Clone(store.calls)
	store.mu.Unlock()
	want := []string{"quorum 1", "append 5", "truncate 4", "append 1"}
	if !slices.Equal(calls, want) {
		t.Fatalf("store calls %q, want %q", calls, want)
	}
	if got := store.LEO(); got != 5 {
		t.Fatalf("LEO %d, want 5", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.IsSorted(persisted) || slices.Contains(persisted, 2) {
		t.Fatalf("persisted %v: must grow, and report a merged run only at its end (3)", persisted)
	}
}

// A failed write stops the writer: nothing after it is applied or reported
// durable.
func TestWriterStopsAtTheFirstFailedWrite(t *testing.T) {
	store := &recordingStore{Store: storage.NewMemory(), failAt: 2}
	failed := make(chan error, 1)
	var mu sync.Mutex
	var last uint64
	w := newWriter(store, hclog.NewNullLogger(), func(seq uint64) {
		mu.Lock()
		last = seq
		mu.Unlock()
	}, func(err error) { failed <- err })
	defer w.stop()
	w.enqueue([]protocol.Write{
		{Seq: 1, Kind: protocol.WriteAppend, Entries: entries(0, 1)},
		{Seq: 2, Kind: protocol.WriteQuorumState, Quorum: protocol.QuorumState{Epoch: 2}},
		{Seq: 3, Kind: protocol.WriteAppend, Entries: entries(1, 1)},
	})
	select {
	case err := <-failed:
		if err == nil {
			t.Fatal("nil failure")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("writer did not report the failure")
	}
	w.enqueue([]protocol.Write{{Seq: 4, Kind: protocol.WriteAppend, Entries: entries(1, 1)}})
	time.Sleep(50 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if last != 1 {
		t.Fatalf("last persisted %d, want 1 (writes after the failure must not count)", last)
	}
	if store.LEO() != 1 {
		t.Fatalf("LEO %d: a write after the failure was applied", store.LEO())
	}
}
