package simulation

import (
	"errors"
	"testing"

	"github.com/replog-io/replog/storage"
)

func ent(o, e uint64, d string) storage.Entry {
	return storage.Entry{Offset: o, Epoch: e, Type: storage.EntryData, Data: []byte(d)}
}

// TestMemStore checks the simulation's store against the parts of the
// storage.Store contract the simulation relies on.
func TestMemStore(t *testing.T) {
	s := newMemStore()
	if e, end := s.EndOffsetForEpoch(3); e != 0 || end != 0 {
		t.Fatalf("empty EndOffsetForEpoch = (%d,%d)", e, end)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.Append([]storage.Entry{ent(0, 1, "a"), ent(1, 1, "b"), ent(2, 3, "c")}))
	must(s.Append([]storage.Entry{ent(3, 3, "d"), ent(4, 5, "e")}))
	if got := s.EpochMap(); len(got) != 3 || got[1] != (storage.EpochStart{Epoch: 3, StartOffset: 2}) {
		t.Fatalf("epoch map %v", got)
	}
	for _, c := range []struct{ ask, e, end uint64 }{{0, 0, 0}, {1, 1, 2}, {2, 1, 2}, {3, 3, 4}, {4, 3, 4}, {9, 5, 5}} {
		if e, end := s.EndOffsetForEpoch(c.ask); e != c.e || end != c.end {
			t.Errorf("EndOffsetForEpoch(%d) = (%d,%d), want (%d,%d)", c.ask, e, end, c.e, c.end)
		}
	}
	if err := s.Append([]storage.Entry{ent(5, 4, "x")}); !errors.Is(err, storage.ErrInvalidAppend) {
		t.Fatalf("epoch going back: %v", err)
	}
	if err := s.Append([]storage.Entry{ent(6, 5, "x")}); !errors.Is(err, storage.ErrInvalidAppend) {
		t.Fatalf("gap: %v", err)
	}
	if err := s.SetHWCheckpoint(6); !errors.Is(err, storage.ErrOutOfRange) {
		t.Fatalf("checkpoint above LEO: %v", err)
	}
	must(s.SetHWCheckpoint(4))
	must(s.TruncateSuffix(3))
	if s.LEO() != 3 || s.LastEpoch() != 3 {
		t.Fatalf("after truncate: LEO %d last epoch %d", s.LEO(), s.LastEpoch())
	}
	must(s.TruncateSuffix(2))
	if s.LastEpoch() != 1 {
		t.Fatalf("truncation at an epoch start keeps its row: %v", s.EpochMap())
	}
	es, err := s.Entries(0, 10, 0)
	if err != nil || len(es) != 1 || string(es[0].Data) != "a" {
		t.Fatalf("Entries with maxBytes 0 returns the first entry whole: %v %v", es, err)
	}
	must(s.Append([]storage.Entry{ent(2, 3, "b"), ent(3, 3, "")}))
	if es, _ := s.Entries(0, 0, 2*(storage.EntryOverhead+1)); len(es) != 2 {
		t.Fatalf("maxBytes counts EntryOverhead per entry: got %d entries, want 2", len(es))
	}
	if es, _ := s.Entries(0, 0, 1<<20); len(es) != 4 {
		t.Fatalf("maxCount 0 means no limit: got %d entries, want 4", len(es))
	}
	must(s.TruncateSuffix(2))
	es[0].Data[0] = 'z'
	if es, _ := s.Entries(0, 1, 10); string(es[0].Data) != "a" {
		t.Fatal("Entries must return copies")
	}
	if _, err := s.Entries(5, 1, 10); !errors.Is(err, storage.ErrOutOfRange) {
		t.Fatalf("read past LEO: %v", err)
	}
	must(s.SetQuorumState(storage.QuorumState{Epoch: 7, VotedFor: "v1"}))
	r := s.reopen()
	if q, _ := r.QuorumState(); q.Epoch != 7 || r.LEO() != 2 {
		t.Fatalf("reopen lost state: %+v LEO %d", q, r.LEO())
	}
	if err := s.Append(nil); !errors.Is(err, storage.ErrClosed) {
		t.Fatalf("old handle after reopen: %v", err)
	}
}
