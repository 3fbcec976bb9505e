package storage_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/replog-io/replog/storage"
)

// TestCreateDir: CreateDir makes a whole data directory on a shared
// journal, which OpenDir then opens as one that exists (its identity,
// format 3 and journal reference), with no temporary directory left; it
// refuses a directory that exists, and replaces the temporary directory
// a crash left behind.
func TestCreateDir(t *testing.T) {
	root := t.TempDir()
	j, err := storage.OpenJournal(filepath.Join(root, "replog.journal"), storage.JournalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	id := storage.Identity{ClusterID: "c1", NodeID: "n1"}
	opts := storage.DirOptions{SharedJournal: j, JournalLogID: 9}
	dir := filepath.Join(root, "logs", "orders-5")
	// What a crash in the middle of a creation leaves: a half-built
	// temporary directory.
	tmp := filepath.Join(root, "logs", storage.CreatingDirPrefix+"orders-5")
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tmp, storage.DataFileName), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := storage.CreateDir(dir, id, opts); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(tmp); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the temporary directory is still there (%v)", err)
	}
	if f, err := storage.DirFormat(dir); err != nil || f != storage.StorageFormatShared {
		t.Fatalf("format %d (%v), want %d", f, err, storage.StorageFormatShared)
	}
	if got, ok, err := storage.JournalLogIDOf(dir); err != nil || !ok || got != 9 {
		t.Fatalf("journal log ID %d %t (%v), want 9", got, ok, err)
	}
	// The snapshot directory is made with the rest, so that opening
	// the snapshots creates (and syncs) nothing.
	if fi, err := os.Stat(filepath.Join(dir, storage.SnapshotDirName)); err != nil || !fi.IsDir() {
		t.Fatalf("no snapshot directory in the created directory (%v)", err)
	}
	s, got, err := storage.OpenDir(dir, id, opts)
	if err != nil {
		t.Fatal(err)
	}
	if got.ClusterID != id.ClusterID || got.NodeID != id.NodeID || got.DirectoryID == "" {
		t.Fatalf("identity %+v, want cluster c1, node n1 and a directory ID", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// The same directory ID on every open: it was recorded, not made up
	// at the open.
	s, again, err := storage.OpenDir(dir, id, opts)
	if err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	if again != got {
		t.Fatalf("identity %+v on the second open, %+v on the first", again, got)
	}
	if err := storage.CreateDir(dir, id, opts); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("CreateDir of an existing directory: %v, want fs.ErrExist", err)
	}
	if name, ok := storage.IsCreatingDir(filepath.Base(tmp)); !ok || name != "orders-5" {
		t.Fatalf("IsCreatingDir(%q) = %q, %t", filepath.Base(tmp), name, ok)
	}
}
