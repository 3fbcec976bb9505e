package storage_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/replog-io/replog/internal/storagetest"
	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/storage"
)

// rolledDir returns a closed data directory of several segments, with a
// vote, an HW checkpoint and a deleted prefix, and the model of its log.
func rolledDir(t *testing.T) (string, *storage.Memory) {
	t.Helper()
	l := newSegLog(t, tinySegment)
	l.appendN(30, 20, 1)
	l.apply(protocol.Write{Kind: protocol.WriteQuorumState, Quorum: protocol.QuorumState{Epoch: 2, VotedFor: "n1", LeaderID: "n1"}},
		protocol.Write{Kind: protocol.WriteHWCheckpoint, Offset: 400})
	l.appendN(30, 20, 2)
	l.apply(protocol.Write{Kind: protocol.WriteDeletePrefix, Offset: 150})
	if err := l.s.Close(); err != nil {
		t.Fatal(err)
	}
	return l.s.Dir(), l.model
}

// A read-only open reads what the store holds, refuses writes with
// ErrReadOnly, and changes no file, not even what a crash left (a roll's
// new file, an orphan segment), which the next read-write open removes.
func TestOpenDirReadOnly(t *testing.T) {
	dir, model := rolledDir(t)
	next := filepath.Join(dir, storage.DataFileName+".next")
	orphan := filepath.Join(dir, storage.SegmentFileName(1<<40))
	for _, p := range []string{next, orphan} {
		if err := os.WriteFile(p, []byte("left by a crash"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	before := snapshot(t, dir)
	s, id, err := storage.OpenDirReadOnly(dir, storage.DirOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if id.NodeID != idN1.NodeID || id.ClusterID != idN1.ClusterID || id.DirectoryID == "" {
		t.Fatalf("identity %+v", id)
	}
	if err := storagetest.Compare(s, model); err != nil {
		t.Fatalf("read-only store differs from what was written: %v", err)
	}
	err = s.Apply([]protocol.Write{{Kind: protocol.WriteAppend, Entries: storagetest.Batch(s.LEO(), 1, 2, 10)}})
	if !errors.Is(err, storage.ErrReadOnly) {
		t.Fatalf("Apply on a read-only store: %v; want ErrReadOnly", err)
	}
	// While it is open, a node cannot open the directory.
	if _, _, err := storage.OpenDir(dir, idN1, storage.DirOptions{Timeout: 50 * time.Millisecond}); !errors.Is(err, storage.ErrLocked) {
		t.Fatalf("OpenDir while a read-only store is open: %v; want ErrLocked", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	sameSnapshot(t, before, snapshot(t, dir))
	// The next read-write open cleans up.
	w := openSeg(t, dir, tinySegment)
	for _, p := range []string{next, orphan} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s after a read-write open: %v", p, err)
		}
	}
	// And while a node holds the directory, a read-only open is refused.
	if r, _, err := storage.OpenDirReadOnly(dir, storage.DirOptions{Timeout: 50 * time.Millisecond}); !errors.Is(err, storage.ErrLocked) {
		if err == nil {
			r.Close()
		}
		t.Fatalf("OpenDirReadOnly while a node holds the directory: %v; want ErrLocked", err)
	}
	w.Close()
}

// A read-only open of a directory without a data file, or with an empty
// one, is refused with ErrCorrupt naming it, and creates nothing.
func TestOpenDirReadOnlyNoData(t *testing.T) {
	for _, kind := range []string{"missing", "empty"} {
		dir := t.TempDir()
		data := filepath.Join(dir, storage.DataFileName)
		if kind == "empty" {
			if err := os.WriteFile(data, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		s, _, err := storage.OpenDirReadOnly(dir, storage.DirOptions{})
		if err == nil {
			s.Close()
			t.Fatalf("%s data file: opened", kind)
		}
		if !errors.Is(err, storage.ErrCorrupt) || !strings.Contains(err.Error(), data) || !strings.Contains(err.Error(), kind) {
			t.Fatalf("%s data file: %v; want ErrCorrupt naming %s", kind, err, data)
		}
		if ents, _ := os.ReadDir(dir); len(ents) != (map[string]int{"missing": 0, "empty": 1})[kind] {
			t.Fatalf("%s data file: the directory now holds %d files", kind, len(ents))
		}
	}
}

// VerifyDir reads every entry of every segment: a clean directory passes
// (and says how much it read), one entry's flipped byte in a sealed
// segment fails with ErrCorrupt naming the file and the offset, though the
// directory opens fine (the entry is read only by a read of it).
func TestVerifyDir(t *testing.T) {
	dir, model := rolledDir(t)
	r, err := storage.VerifyDir(dir, storage.DirOptions{})
	if err != nil {
		t.Fatalf("VerifyDir of a sound directory: %v", err)
	}
	segs := len(segFiles(t, dir)) + 1
	if r.Entries != model.LEO()-model.LogStart() || r.LogStart != 150 || r.LEO != model.LEO() || r.Segments != segs || r.Identity.NodeID != "n1" {
		t.Fatalf("report %+v; want %d entries from 150 in %d segments", r, model.LEO()-model.LogStart(), segs)
	}
	bases := segmentBases(t, dir)
	name := filepath.Join(dir, storage.SegmentFileName(bases[2]))
	off := bases[2] + 5
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	epoch := storagetest.EpochAt(model.EpochMap(), off)
	i := bytes.Index(b, storagetest.Payload(off, epoch, 100))
	if i < 0 {
		t.Fatalf("payload of offset %d not in %s", off, name)
	}
	b[i+10] ^= 0x40
	if err := os.WriteFile(name, b, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = storage.VerifyDir(dir, storage.DirOptions{})
	if !errors.Is(err, storage.ErrCorrupt) || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), fmt.Sprintf("offset %d", off)) {
		t.Fatalf("VerifyDir with entry %d damaged: %v; want ErrCorrupt naming %s and the offset", off, err, name)
	}
	s := openSeg(t, dir, tinySegment)
	s.Close()
}
