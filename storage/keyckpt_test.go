package storage_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/storage"
)

// TestKeyCheckpointFileDamage (docs/storage.md section 11): a key
// checkpoint file cut at any length (a crash on a file system that does
// not order the data before the rename), with a byte changed, or of
// another version, is no checkpoint (no error: the core replays the log);
// a temporary file left by a crash is not read; the whole file is (the
// positive control).
func TestKeyCheckpointFileDamage(t *testing.T) {
	dir := t.TempDir()
	s, _, err := storage.OpenDir(dir, storage.Identity{ClusterID: "c", NodeID: "n"}, storage.DirOptions{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	want := protocol.KeyCheckpoint{Offset: 1 << 40, Epoch: 7, Data: bytes.Repeat([]byte("table"), 20)}
	if err := s.SaveKeyCheckpoint(want); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, storage.KeyCheckpointFileName)
	whole, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	read := func() (protocol.KeyCheckpoint, bool) {
		t.Helper()
		cp, ok, err := s.KeyCheckpoint()
		if err != nil {
			t.Fatalf("KeyCheckpoint: %v", err)
		}
		return cp, ok
	}
	if cp, ok := read(); !ok || cp.Offset != want.Offset || cp.Epoch != want.Epoch || !bytes.Equal(cp.Data, want.Data) {
		t.Fatalf("the whole file: %d %d %q %v; want %+v", cp.Offset, cp.Epoch, cp.Data, ok, want)
	}
	write := func(b []byte) {
		t.Helper()
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for n := range len(whole) {
		write(whole[:n])
		if _, ok := read(); ok {
			t.Fatalf("a file cut at %d of %d bytes read as a checkpoint", n, len(whole))
		}
	}
	for _, i := range []int{0, 4, 5, 12, 20, 24, 30, len(whole) - 1} {
		b := bytes.Clone(whole)
		b[i] ^= 0x40
		write(b)
		if _, ok := read(); ok {
			t.Fatalf("a file with byte %d changed read as a checkpoint", i)
		}
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path+".tmp", whole, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, ok := read(); ok {
		t.Fatal("a temporary file read as the checkpoint")
	}
}
