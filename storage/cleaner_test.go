package storage_test

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/storage"
)

// TestCleanerCheckpointFile (docs/storage.md 13): the cleaner checkpoint
// reads back as saved, after a reopen too (the positive control); none
// before one is saved; a file cut at any length, with any byte changed,
// or of another version, is none (no error: the next pass is a full one),
// never another checkpoint; the memory store keeps it across a crash.
func TestCleanerCheckpointFile(t *testing.T) {
	dir := t.TempDir()
	id := storage.Identity{ClusterID: "c", NodeID: "n"}
	s, _, err := storage.OpenDir(dir, id, storage.DirOptions{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	read := func(s storage.CleanerCheckpointStore) (protocol.CleanerCheckpoint, bool) {
		t.Helper()
		ck, ok, err := s.CleanerCheckpoint()
		if err != nil {
			t.Fatalf("CleanerCheckpoint: %v", err)
		}
		return ck, ok
	}
	if _, ok := read(s); ok {
		t.Fatal("a checkpoint before any was saved")
	}
	want := protocol.CleanerCheckpoint{Point: 1 << 33, Segments: []protocol.SegmentSummary{
		{Base: 0, End: 1000, Keys: []uint64{1, 1 << 63, 1<<64 - 1}, Tombstone: 1_700_000_000_000},
		{Base: 1000, End: 1 << 33, Keys: []uint64{}},
	}}
	if err := s.SaveCleanerCheckpoint(want); err != nil {
		t.Fatal(err)
	}
	if got, ok := read(s); !ok || !reflect.DeepEqual(got, want) {
		t.Fatalf("read back %+v, %v; want %+v", got, ok, want)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, _, err = storage.OpenDir(dir, id, storage.DirOptions{NoSync: true}); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, ok := read(s); !ok || !reflect.DeepEqual(got, want) {
		t.Fatalf("after a reopen %+v, %v; want %+v", got, ok, want)
	}
	path := filepath.Join(dir, storage.CleanerCheckpointFileName)
	whole, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for n := range len(whole) {
		if err := os.WriteFile(path, whole[:n], 0o600); err != nil {
			t.Fatal(err)
		}
		if got, ok := read(s); ok {
			t.Fatalf("a file cut at %d of %d bytes reads as %+v", n, len(whole), got)
		}
	}
	for i := range whole {
		b := append([]byte(nil), whole...)
		b[i] ^= 0x10
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if got, ok := read(s); ok {
			t.Fatalf("a file with byte %d changed reads as %+v", i, got)
		}
	}

	m := storage.NewMemoryDeferred()
	if err := m.SaveCleanerCheckpoint(want); err != nil {
		t.Fatal(err)
	}
	want.Segments[0].Keys[0] = 99 // the store's copy is its own
	m = m.Crash()
	if got, ok := read(m); !ok || got.Point != want.Point || got.Segments[0].Keys[0] != 1 {
		t.Fatalf("memory store after a crash: %+v, %v", got, ok)
	}
}

// A side file beyond its bound (here a sparse 2 GiB file) is damage: both
// checkpoints read as none, without reading it in; a saved one then reads
// back (the positive control).
func TestSideFileBeyondItsBoundReadsAsNone(t *testing.T) {
	dir := t.TempDir()
	s, _, err := storage.OpenDir(dir, storage.Identity{ClusterID: "c", NodeID: "n"}, storage.DirOptions{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, name := range []string{storage.CleanerCheckpointFileName, storage.KeyCheckpointFileName} {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(2 << 30); err != nil {
			t.Fatal(err)
		}
		_ = f.Close()
	}
	if _, ok, err := s.CleanerCheckpoint(); ok || err != nil {
		t.Fatalf("an oversized cleaner checkpoint: ok %v, err %v; want none", ok, err)
	}
	if _, ok, err := s.KeyCheckpoint(); ok || err != nil {
		t.Fatalf("an oversized key checkpoint: ok %v, err %v; want none", ok, err)
	}
	if err := s.SaveCleanerCheckpoint(protocol.CleanerCheckpoint{Point: 7}); err != nil {
		t.Fatal(err)
	}
	if ck, ok, err := s.CleanerCheckpoint(); !ok || err != nil || ck.Point != 7 {
		t.Fatalf("after a save: %+v, %v, %v", ck, ok, err)
	}
	if err := s.SaveKeyCheckpoint(protocol.KeyCheckpoint{Offset: 9, Epoch: 1, Data: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if cp, ok, err := s.KeyCheckpoint(); !ok || err != nil || cp.Offset != 9 {
		t.Fatalf("after a save: %+v, %v, %v", cp, ok, err)
	}
}
