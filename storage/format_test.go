package storage_test

import (
	"archive/tar"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/storage"
)

// testdata/dir-30f352f.tar.gz is a data directory written by replog at
// commit 30f352f, before storage formats were recorded. It was made in a
// worktree of that commit (git worktree add /tmp/old 30f352f) by a
// throwaway program that called storage.OpenDir(dir, Identity{"old",
// "n1"}, BoltOptions{SegmentBytes: 8 << 10}), appended 12 batches of 10
// entries (offsets 0..119, epoch 1 for the first 6 batches and 2 after,
// Time 1700000000000+offset, Data fmt.Sprintf("old entry %d %0200d",
// off, off), offset 3 an EntryVoters entry of n1/d1, n2/d2, n3/d3), then
// SetQuorumState({2, "n1", "n1"}), SetHWCheckpoint(100), DeletePrefix(25)
// and Close; then: tar --sort=name --owner=0 --group=0 --numeric-owner
// --mtime=2026-01-01 -czf dir-30f352f.tar.gz -C dir .

// untar extracts the tar.gz at path into a new directory.
func untar(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "d")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return dir
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(h.Name)), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// checkOldDir checks that s holds what the 30f352f writer wrote.
func checkOldDir(t *testing.T, s storage.Store) {
	t.Helper()
	if s.LEO() != 120 || s.LogStart() != 25 {
		t.Fatalf("LEO %d, log start %d; want 120, 25", s.LEO(), s.LogStart())
	}
	if q, err := s.QuorumState(); err != nil || q != (protocol.QuorumState{Epoch: 2, VotedFor: "n1", LeaderID: "n1"}) {
		t.Fatalf("quorum state %+v, %v", q, err)
	}
	if hw, ok, err := s.HWCheckpoint(); err != nil || !ok || hw != 100 {
		t.Fatalf("HW checkpoint %d %v %v", hw, ok, err)
	}
	if rows := s.VoterSets(); len(rows) != 1 || rows[0].Offset != 3 || len(rows[0].Voters) != 3 {
		t.Fatalf("voter-set rows %+v", rows)
	}
	es, err := s.Entries(25, 0, 1<<30)
	if err != nil || len(es) != 95 {
		t.Fatalf("%d entries, %v", len(es), err)
	}
	for _, e := range es {
		want := fmt.Sprintf("old entry %d %0200d", e.Offset, e.Offset)
		if string(e.Data) != want || e.Epoch != 1+e.Offset/60 || e.Time != 1700000000000+int64(e.Offset) {
			t.Fatalf("entry %d: %+v", e.Offset, e)
		}
	}
}

// A directory written by 30f352f (before formats were recorded) opens as
// format 1, read-only without a change, read-write stamped; then with the
// journal as format 2.
func TestOpenDirFrom30f352f(t *testing.T) {
	dir := untar(t, filepath.Join("testdata", "dir-30f352f.tar.gz"))
	id := storage.Identity{ClusterID: "old", NodeID: "n1"}

	ro, _, err := storage.OpenDirReadOnly(dir, storage.DirOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkOldDir(t, ro)
	ro.Close()
	if _, err := os.Stat(filepath.Join(dir, storage.FormatFileName)); !os.IsNotExist(err) {
		t.Fatalf("read-only open stamped the format: %v", err)
	}

	s, _, err := storage.OpenDir(dir, id, storage.DirOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkOldDir(t, s)
	s.Close()
	if !strings.Contains(readFormatFile(t, dir), "format 1\n") {
		t.Fatalf("format file:\n%s", readFormatFile(t, dir))
	}

	jopts := storage.DirOptions{Journal: true, JournalBytes: 1 << 20}
	if s, _, err = storage.OpenDir(dir, id, jopts); err != nil {
		t.Fatal(err)
	}
	checkOldDir(t, s)
	more := []protocol.Write{{Kind: protocol.WriteAppend, Entries: []protocol.Entry{{Offset: 120, Epoch: 3, Type: protocol.EntryData, Data: []byte("new")}}}}
	if err := s.Apply(more); err != nil {
		t.Fatal(err)
	}
	if err := s.Abandon(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(readFormatFile(t, dir), "format 2\n") {
		t.Fatalf("format file with the journal:\n%s", readFormatFile(t, dir))
	}
	if s, _, err = storage.OpenDir(dir, id, jopts); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if es, err := s.Entries(119, 0, 1<<30); err != nil || len(es) != 2 || string(es[1].Data) != "new" {
		t.Fatalf("entries %+v, %v", es, err)
	}
}
