package storage_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/replog-io/replog/internal/storagetest"
	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/storage"
)

// groupStores opens n stores on one shared journal of the given size,
// each with a Memory model.
func groupStores(t *testing.T, n int, bytes int64) (*storage.Journal, []*storage.DirStore, []*storage.Memory) {
	t.Helper()
	root := t.TempDir()
	j := openJournalFile(t, filepath.Join(root, "shared.journal"), storage.JournalOptions{Bytes: bytes})
	t.Cleanup(func() { _ = j.Close() })
	stores := make([]*storage.DirStore, n)
	models := make([]*storage.Memory, n)
	for i := range stores {
		stores[i] = openShared(t, filepath.Join(root, fmt.Sprint(i)), j, uint32(10+i))
		models[i] = storage.NewMemory()
		t.Cleanup(func() { _ = stores[i].Close() })
	}
	return j, stores, models
}

// ApplyGroup commits every store's writes in one round: one record, one
// fdatasync. One store's invalid writes fail that store alone, nothing
// of them applied; a store given nothing that changes it writes nothing.
// Each store then holds exactly what its model does, also after it is
// abandoned and reopened on the reopened journal (the record holds
// every store's batch).
func TestApplyGroupOneRoundForEveryStore(t *testing.T) {
	j, stores, models := groupStores(t, 5, 1<<20)
	for round := range 3 {
		gs := make([]storage.GroupApply, len(stores))
		for i, s := range stores {
			gs[i] = storage.GroupApply{Store: s, Writes: appendBatch(models[i], 1, 1+i, 100+50*i)}
		}
		bad := round % len(stores)
		// Not contiguous with the LEO: ErrInvalidAppend.
		gs[bad].Writes = []protocol.Write{{Kind: protocol.WriteAppend, Entries: storagetest.Batch(models[bad].LEO()+5, 1, 1, 10)}}
		idle := (round + 1) % len(stores)
		gs[idle].Writes = []protocol.Write{{Kind: protocol.WriteTruncate, Offset: models[idle].LEO()}} // a no-op
		before := j.Stats()
		j.ApplyGroup(gs)
		after := j.Stats()
		for i, g := range gs {
			switch {
			case i == bad:
				if !errors.Is(g.Err, storage.ErrInvalidAppend) || g.Deferred {
					t.Fatalf("round %d: store %d's invalid writes: Err %v, Deferred %t; want ErrInvalidAppend", round, i, g.Err, g.Deferred)
				}
			case g.Err != nil || g.Deferred:
				t.Fatalf("round %d: store %d: Err %v, Deferred %t", round, i, g.Err, g.Deferred)
			default:
				if err := models[i].Apply(g.Writes); err != nil {
					t.Fatal(err)
				}
			}
		}
		if rec, b, f := after.Records-before.Records, after.Batches-before.Batches, after.Fsyncs-before.Fsyncs; rec != 1 || b != uint64(len(stores)-2) || f != 1 {
			t.Fatalf("round %d: %d records, %d batches, %d fsyncs; want 1, %d, 1", round, rec, b, f, len(stores)-2)
		}
		for i, s := range stores {
			if err := storagetest.Compare(s, models[i]); err != nil {
				t.Fatalf("round %d: store %d: %v", round, i, err)
			}
		}
	}
	// A store of the group is still a store: its own Apply works beside.
	ws := appendBatch(models[0], 1, 3, 10)
	if err := stores[0].Apply(ws); err != nil {
		t.Fatal(err)
	}
	_ = models[0].Apply(ws)

	dirs := make([]string, len(stores))
	for i, s := range stores {
		dirs[i] = s.Dir()
		if err := s.Abandon(); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(filepath.Dir(dirs[0]), "shared.journal")
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j2 := openJournalFile(t, path, storage.JournalOptions{})
	defer j2.Close()
	for i := range stores {
		s := openShared(t, dirs[i], j2, uint32(10+i))
		if err := storagetest.Compare(s, models[i]); err != nil {
			t.Fatalf("store %d reopened: %v", i, err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// ApplyGroup never waits: writes too large for the journal, or for the
// room left in a full one, come back Deferred with nothing applied, and
// the other stores' writes are committed. The store's own Apply then
// applies them (waiting as it does).
func TestApplyGroupDefersWhatMustWait(t *testing.T) {
	j, stores, models := groupStores(t, 3, 256<<10)
	// Too large: more than half the journal.
	gs := []storage.GroupApply{
		{Store: stores[0], Writes: appendBatch(models[0], 1, 10, 16<<10)},
		{Store: stores[1], Writes: appendBatch(models[1], 1, 2, 100)},
	}
	j.ApplyGroup(gs)
	if gs[0].Err != nil || !gs[0].Deferred {
		t.Fatalf("a batch larger than half the journal: Err %v, Deferred %t; want Deferred", gs[0].Err, gs[0].Deferred)
	}
	if gs[1].Err != nil || gs[1].Deferred {
		t.Fatalf("the other store: Err %v, Deferred %t", gs[1].Err, gs[1].Deferred)
	}
	if stores[0].LEO() != models[0].LEO() {
		t.Fatalf("a deferred batch was applied: LEO %d, want %d", stores[0].LEO(), models[0].LEO())
	}
	_ = models[1].Apply(gs[1].Writes)
	if err := stores[0].Apply(gs[0].Writes); err != nil {
		t.Fatal(err)
	}
	_ = models[0].Apply(gs[0].Writes)
	if d := stores[0].Stats().DirectApplies; d != 1 {
		t.Fatalf("%d direct applies, want 1", d)
	}

	// Full: store 0, abandoned with 150 KiB in the journal, holds the
	// ring until the journal forgets it. A 110 KiB batch (under half
	// the journal, over the room left) is deferred, a small one beside
	// it committed.
	stores[0].StopCheckpoints()
	for range 5 {
		ws := appendBatch(models[0], 1, 3, 10<<10)
		if err := stores[0].Apply(ws); err != nil {
			t.Fatal(err)
		}
		_ = models[0].Apply(ws)
	}
	if err := stores[0].Abandon(); err != nil {
		t.Fatal(err)
	}
	gs = []storage.GroupApply{
		{Store: stores[1], Writes: appendBatch(models[1], 1, 11, 10<<10)},
		{Store: stores[2], Writes: appendBatch(models[2], 1, 1, 100)},
	}
	j.ApplyGroup(gs)
	if gs[0].Err != nil || !gs[0].Deferred || stores[1].LEO() != models[1].LEO() {
		t.Fatalf("a batch over the room left: Err %v, Deferred %t, LEO %d (want %d)", gs[0].Err, gs[0].Deferred, stores[1].LEO(), models[1].LEO())
	}
	if gs[1].Err != nil || gs[1].Deferred {
		t.Fatalf("a small batch beside it: Err %v, Deferred %t", gs[1].Err, gs[1].Deferred)
	}
	_ = models[2].Apply(gs[1].Writes)
	if err := j.Forget(10); err != nil {
		t.Fatal(err)
	}
	if err := stores[1].Apply(gs[0].Writes); err != nil {
		t.Fatal(err)
	}
	_ = models[1].Apply(gs[0].Writes)
	for i, s := range stores[1:] {
		if err := storagetest.Compare(s, models[i+1]); err != nil {
			t.Fatalf("store %d: %v", i+1, err)
		}
	}

	// A store twice: the second is refused, the first applied.
	gs = []storage.GroupApply{
		{Store: stores[1], Writes: appendBatch(models[1], 1, 1, 10)},
		{Store: stores[1], Writes: appendBatch(models[1], 1, 1, 10)},
	}
	j.ApplyGroup(gs)
	if gs[0].Err != nil || !errors.Is(gs[1].Err, storage.ErrInvalidOptions) {
		t.Fatalf("a store twice: %v, %v; want nil, ErrInvalidOptions", gs[0].Err, gs[1].Err)
	}
}

// A store's Apply waiting for room in a full journal holds neither the
// journal nor the other stores: ApplyGroup commits their batches (which
// fit in the room left) while it waits, and it goes on once the ring is
// cut.
func TestApplyGroupWhileAnApplyWaitsForRoom(t *testing.T) {
	j, stores, models := groupStores(t, 3, 256<<10)
	// Store 0, abandoned with 150 KiB in the journal, holds the ring.
	stores[0].StopCheckpoints()
	for range 5 {
		ws := appendBatch(models[0], 1, 3, 10<<10)
		if err := stores[0].Apply(ws); err != nil {
			t.Fatal(err)
		}
		_ = models[0].Apply(ws)
	}
	if err := stores[0].Abandon(); err != nil {
		t.Fatal(err)
	}
	// 110 KiB: under half the journal, over the room left.
	big := appendBatch(models[1], 1, 11, 10<<10)
	done := make(chan error, 1)
	go func() { done <- stores[1].Apply(big) }()
	for stores[1].Stats().JournalWaits == 0 {
		select {
		case err := <-done:
			t.Fatalf("the big Apply returned (%v) without waiting for room", err)
		default:
		}
		runtime.Gosched()
	}
	for range 10 {
		gs := []storage.GroupApply{{Store: stores[2], Writes: appendBatch(models[2], 1, 1, 100)}}
		j.ApplyGroup(gs)
		if gs[0].Err != nil || gs[0].Deferred {
			t.Fatalf("beside a waiting Apply: Err %v, Deferred %t", gs[0].Err, gs[0].Deferred)
		}
		_ = models[2].Apply(gs[0].Writes)
	}
	select {
	case err := <-done:
		t.Fatalf("the big Apply returned (%v) before the journal had room for it", err)
	default:
	}
	if err := j.Forget(10); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	_ = models[1].Apply(big)
	for i, s := range stores[1:] {
		if err := storagetest.Compare(s, models[i+1]); err != nil {
			t.Fatalf("store %d: %v", i+1, err)
		}
	}
}
