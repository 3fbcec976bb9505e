package storage_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/replog-io/replog/internal/storagetest"
	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/storage"
)

var (
	idN1 = storage.Identity{ClusterID: "c1", NodeID: "n1"}
	idN2 = storage.Identity{ClusterID: "c1", NodeID: "n2"}
	idC2 = storage.Identity{ClusterID: "c2", NodeID: "n1"}
)

func mustOpenDir(t *testing.T, dir string, id storage.Identity) (*storage.DirStore, storage.Identity) {
	t.Helper()
	b, got, err := storage.OpenDir(dir, id, storage.DirOptions{})
	if err != nil {
		t.Fatalf("OpenDir(%s, %+v): %v", dir, id, err)
	}
	return b, got
}

// newDir creates a directory for idN1 holding 20 entries; it returns the
// directory ID.
func newDir(t *testing.T, dir string) storage.Identity {
	t.Helper()
	b, got := mustOpenDir(t, dir, idN1)
	if err := b.Append(storagetest.Batch(0, 20, 1, 50)); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	return got
}

// snapshot returns the contents of every file in dir.
func snapshot(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string][]byte{}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		m[e.Name()] = b
	}
	return m
}

func sameSnapshot(t *testing.T, before, after map[string][]byte) {
	t.Helper()
	if len(before) != len(after) {
		t.Fatalf("files before %d, after %d", len(before), len(after))
	}
	for name, b := range before {
		if !bytes.Equal(b, after[name]) {
			t.Fatalf("%s changed", name)
		}
	}
}

func readAll(t *testing.T, b storage.Store) []protocol.Entry {
	t.Helper()
	es, err := b.Entries(b.LogStart(), 0, 1<<30)
	if err != nil {
		t.Fatalf("Entries: %v", err)
	}
	return es
}

func TestOpenDirCreateAndReopen(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data") // created by OpenDir
	got := newDir(t, dir)
	if got.ClusterID != "c1" || got.NodeID != "n1" || !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(got.DirectoryID) {
		t.Fatalf("identity %+v", got)
	}
	for _, name := range []string{storage.DataFileName, storage.IdentityFileName} {
		if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.Size() == 0 {
			t.Fatalf("%s: %v", name, err)
		}
	}
	text, _ := os.ReadFile(filepath.Join(dir, storage.IdentityFileName))
	if !strings.Contains(string(text), `node_id "n1"`) || !strings.Contains(string(text), "state ready") {
		t.Fatalf("identity file:\n%s", text)
	}
	b, again := mustOpenDir(t, dir, idN1)
	if again != got {
		t.Fatalf("reopened as %+v, created as %+v", again, got)
	}
	if es := readAll(t, b); len(es) != 20 {
		t.Fatalf("%d entries after reopen", len(es))
	}
	b.Close()
	// A second directory gets another directory ID.
	other := newDir(t, t.TempDir())
	if other.DirectoryID == got.DirectoryID {
		t.Fatal("two directories got the same directory ID")
	}
	// The directory ID, when given, must match.
	if _, _, err := storage.OpenDir(dir, storage.Identity{ClusterID: "c1", NodeID: "n1", DirectoryID: other.DirectoryID},
		storage.DirOptions{Timeout: 50 * time.Millisecond}); !errors.Is(err, storage.ErrIdentityMismatch) {
		t.Fatalf("wrong directory ID: %v", err)
	}
}

// A directory of another node or cluster is refused, says which field
// differs and what was expected, and is left unchanged; the right identity
// (positive control) opens it.
func TestOpenDirIdentityMismatch(t *testing.T) {
	dir := t.TempDir()
	created := newDir(t, dir)
	before := snapshot(t, dir)
	for _, tc := range []struct {
		id   storage.Identity
		want string
	}{
		{idN2, `node ID is "n1", expected "n2"`},
		{idC2, `cluster ID is "c1", expected "c2"`},
		{storage.Identity{ClusterID: "c2", NodeID: "n2"}, `cluster ID is "c1", expected "c2"; node ID is "n1", expected "n2"`},
	} {
		b, _, err := storage.OpenDir(dir, tc.id, storage.DirOptions{})
		if err == nil {
			b.Close()
			t.Fatalf("OpenDir as %+v succeeded on a directory of %+v", tc.id, idN1)
		}
		if !errors.Is(err, storage.ErrIdentityMismatch) || !strings.Contains(err.Error(), tc.want) ||
			!strings.Contains(err.Error(), storage.IdentityFileName) {
			t.Fatalf("OpenDir as %+v: %v; want ErrIdentityMismatch saying %s and naming the file", tc.id, err, tc.want)
		}
		sameSnapshot(t, before, snapshot(t, dir))
	}
	b, got := mustOpenDir(t, dir, idN1)
	defer b.Close()
	if got != created || len(readAll(t, b)) != 20 {
		t.Fatalf("positive control: %+v", got)
	}
}

// A ready identity whose data file is missing or empty is refused with
// ErrCorrupt naming the file, and nothing is created.
func TestOpenDirDataFileGone(t *testing.T) {
	for _, kind := range []string{"missing", "empty"} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			created := newDir(t, dir)
			data := filepath.Join(dir, storage.DataFileName)
			var err error
			if kind == "missing" {
				err = os.Remove(data)
			} else {
				err = os.Truncate(data, 0)
			}
			if err != nil {
				t.Fatal(err)
			}
			before := snapshot(t, dir)
			b, _, err := storage.OpenDir(dir, idN1, storage.DirOptions{})
			if err == nil {
				b.Close()
				t.Fatal("OpenDir started a node whose data file is " + kind)
			}
			msg := err.Error()
			if !errors.Is(err, storage.ErrCorrupt) || !strings.Contains(msg, data) || !strings.Contains(msg, "is "+kind) ||
				!strings.Contains(msg, created.DirectoryID) || !strings.Contains(msg, `node "n1" of cluster "c1"`) {
				t.Fatalf("OpenDir: %v; want ErrCorrupt naming %s, the node and that it is %s", err, data, kind)
			}
			sameSnapshot(t, before, snapshot(t, dir))
		})
	}
}

func TestOpenDirIdentityCorrupt(t *testing.T) {
	for name, damage := range map[string]func([]byte) []byte{
		"byte flipped": func(b []byte) []byte { b[len(b)/2] ^= 0x20; return b },
		"truncated":    func(b []byte) []byte { return b[:len(b)-5] },
		"empty":        func(b []byte) []byte { return nil },
		"garbage":      func(b []byte) []byte { return bytes.Repeat([]byte{0xa5}, 300) },
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			newDir(t, dir)
			path := filepath.Join(dir, storage.IdentityFileName)
			b, _ := os.ReadFile(path)
			if err := os.WriteFile(path, damage(b), 0o600); err != nil {
				t.Fatal(err)
			}
			before := snapshot(t, dir)
			s, _, err := storage.OpenDir(dir, idN1, storage.DirOptions{})
			if err == nil {
				s.Close()
				t.Fatal("OpenDir accepted a damaged identity file")
			}
			if !errors.Is(err, storage.ErrCorrupt) || !strings.Contains(err.Error(), path) {
				t.Fatalf("OpenDir: %v; want ErrCorrupt naming %s", err, path)
			}
			sameSnapshot(t, before, snapshot(t, dir))
		})
	}
}

// A directory written before identities existed is adopted: the identity
// is written with the given IDs, and from then on it is that node's.
func TestOpenDirAdoptsLegacy(t *testing.T) {
	dir := t.TempDir()
	legacy := []protocol.Write{{Kind: protocol.WriteAppend, Entries: storagetest.Batch(0, 7, 1, 10)}}
	if err := storage.WriteLegacyDataFile(filepath.Join(dir, storage.DataFileName), legacy); err != nil {
		t.Fatal(err)
	}
	d, got := mustOpenDir(t, dir, idN2)
	if len(readAll(t, d)) != 7 || got.NodeID != "n2" || got.DirectoryID == "" {
		t.Fatalf("adopted as %+v", got)
	}
	d.Close()
	if _, _, err := storage.OpenDir(dir, idN1, storage.DirOptions{}); !errors.Is(err, storage.ErrIdentityMismatch) {
		t.Fatalf("adopted directory opened as another node: %v", err)
	}
	d, again := mustOpenDir(t, dir, idN2)
	d.Close()
	if again != got {
		t.Fatalf("reopened as %+v, adopted as %+v", again, got)
	}
}

// An empty data file without identity may be what is left of a node: it is
// refused, and no identity is written.
func TestOpenDirLegacyEmptyRefused(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, storage.DataFileName)
	if err := os.WriteFile(data, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := storage.OpenDir(dir, idN1, storage.DirOptions{}); !errors.Is(err, storage.ErrCorrupt) || !strings.Contains(err.Error(), data) {
		t.Fatalf("OpenDir: %v; want ErrCorrupt naming %s", err, data)
	}
	if _, err := os.Stat(filepath.Join(dir, storage.IdentityFileName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("identity written for a refused directory: %v", err)
	}
}

// The data file records the identity, so a lost identity file is not taken
// for a legacy directory: the same node gets its identity back (same
// directory ID), another node is refused and nothing is written.
func TestOpenDirIdentityFileLost(t *testing.T) {
	dir := t.TempDir()
	created := newDir(t, dir)
	idPath := filepath.Join(dir, storage.IdentityFileName)
	if err := os.Remove(idPath); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, dir)
	if _, _, err := storage.OpenDir(dir, idN2, storage.DirOptions{}); !errors.Is(err, storage.ErrIdentityMismatch) ||
		!strings.Contains(err.Error(), `node ID is "n1", expected "n2"`) {
		t.Fatalf("OpenDir as n2: %v; want ErrIdentityMismatch", err)
	}
	sameSnapshot(t, before, snapshot(t, dir))
	b, got := mustOpenDir(t, dir, idN1)
	defer b.Close()
	if got != created {
		t.Fatalf("identity after the file was lost %+v, created %+v", got, created)
	}
	if _, err := os.Stat(idPath); err != nil {
		t.Fatalf("identity file not rewritten: %v", err)
	}
}

// Identity and data files of different directories are refused.
func TestOpenDirFilesDisagree(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	newDir(t, a)
	newDir(t, b) // same node and cluster, another directory ID
	id, _ := os.ReadFile(filepath.Join(a, storage.IdentityFileName))
	if err := os.WriteFile(filepath.Join(b, storage.IdentityFileName), id, 0o600); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, b)
	if _, _, err := storage.OpenDir(b, idN1, storage.DirOptions{}); !errors.Is(err, storage.ErrCorrupt) ||
		!strings.Contains(err.Error(), "different directories") {
		t.Fatalf("OpenDir: %v; want ErrCorrupt (files of different directories)", err)
	}
	sameSnapshot(t, before, snapshot(t, b))
}

// The store keeps its lock: a second OpenDir of the same directory waits
// and fails with ErrLocked.
func TestOpenDirLocked(t *testing.T) {
	dir := t.TempDir()
	b, _ := mustOpenDir(t, dir, idN1)
	_, _, err := storage.OpenDir(dir, idN1, storage.DirOptions{Timeout: 50 * time.Millisecond})
	if !errors.Is(err, storage.ErrLocked) {
		t.Fatalf("second OpenDir: %v; want ErrLocked", err)
	}
	b.Close()
	b, _ = mustOpenDir(t, dir, idN1)
	b.Close()
}

func TestOpenDirRequiresIDs(t *testing.T) {
	for _, id := range []storage.Identity{{NodeID: "n1"}, {ClusterID: "c1"}} {
		if _, _, err := storage.OpenDir(t.TempDir(), id, storage.DirOptions{}); err == nil {
			t.Fatalf("OpenDir accepted %+v", id)
		}
	}
}
