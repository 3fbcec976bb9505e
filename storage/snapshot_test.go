package storage_test

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/replog-io/replog/storage"
)

// snapshotBody is the deterministic body of n bytes the tests save for
// seed.
func snapshotBody(seed uint64, n int) []byte {
	rng := rand.New(rand.NewPCG(seed, 3))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// writeChunks writes b in chunks of random sizes (1 byte to 64 KiB), as a
// service encoding its state piece by piece does.
func writeChunks(seed uint64, b []byte) func(io.Writer) error {
	return func(w io.Writer) error {
		rng := rand.New(rand.NewPCG(seed, 5))
		for len(b) > 0 {
			n := min(len(b), 1+rng.IntN(64<<10))
			if rng.IntN(4) == 0 {
				n = min(len(b), 1+rng.IntN(16))
			}
			if _, err := w.Write(b[:n]); err != nil {
				return err
			}
			b = b[n:]
		}
		return nil
	}
}

func openSnaps(t *testing.T, dir string) *storage.SnapshotStore {
	t.Helper()
	s, err := storage.OpenSnapshots(dir, storage.SnapshotOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func readSnapshot(t *testing.T, s *storage.SnapshotStore, i storage.SnapshotInfo) ([]byte, error) {
	t.Helper()
	r, err := s.Open(i)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

// Saved snapshots read back byte for byte, whatever their size (empty,
// smaller than the buffer, several buffers) and however the service
// chunks its writes; the info says the offset, epoch, size and file.
func TestSnapshotSaveAndRead(t *testing.T) {
	for _, n := range []int{0, 1, 4095, 256 << 10, 1<<20 + 17} {
		t.Run("", func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), storage.SnapshotDirName)
			s := openSnaps(t, dir)
			body := snapshotBody(uint64(n), n)
			info, err := s.Save(100, 4, writeChunks(uint64(n), body))
			if err != nil {
				t.Fatal(err)
			}
			if info.Offset != 100 || info.Epoch != 4 || info.Size != int64(n) || info.Time.IsZero() || filepath.Dir(info.Path) != dir {
				t.Fatalf("info %+v", info)
			}
			got, err := readSnapshot(t, s, info)
			if err != nil || !bytes.Equal(got, body) {
				t.Fatalf("read %d bytes (want %d), err %v", len(got), n, err)
			}
			// And after a reopen: Latest is the same snapshot.
			s2 := openSnaps(t, dir)
			l, ok := s2.Latest()
			if !ok || l.Offset != 100 || l.Epoch != 4 || l.Size != int64(n) || l.CRC != info.CRC || l.Path != info.Path || !l.Time.Equal(info.Time) {
				t.Fatalf("reopened: %+v %v, saved %+v", l, ok, info)
			}
			got, err = readSnapshot(t, s2, l)
			if err != nil || !bytes.Equal(got, body) {
				t.Fatalf("reopened: read %d bytes (want %d), err %v", len(got), n, err)
			}
		})
	}
}

// The store keeps the Keep snapshots of highest offset and deletes the
// others' files; a save at a stored offset replaces it.
func TestSnapshotKeep(t *testing.T) {
	for _, keep := range []int{1, 2, 3} {
		dir := t.TempDir()
		s, err := storage.OpenSnapshots(dir, storage.SnapshotOptions{Keep: keep})
		if err != nil {
			t.Fatal(err)
		}
		for off := uint64(10); off <= 50; off += 10 {
			if _, err := s.Save(off, 1, writeChunks(off, snapshotBody(off, 1000))); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.Save(50, 2, writeChunks(99, snapshotBody(99, 10))); err != nil {
			t.Fatal(err)
		}
		list := s.List()
		if len(list) != keep || list[0].Offset != 50 || list[0].Epoch != 2 || list[0].Size != 10 {
			t.Fatalf("keep %d: list %+v", keep, list)
		}
		for i, l := range list {
			if want := uint64(50 - 10*i); l.Offset != want {
				t.Fatalf("keep %d: list[%d] at %d, want %d", keep, i, l.Offset, want)
			}
		}
		ents, _ := os.ReadDir(dir)
		if len(ents) != keep {
			t.Fatalf("keep %d: %d files in the directory", keep, len(ents))
		}
		_ = s.Close()
	}
	if _, err := storage.OpenSnapshots(t.TempDir(), storage.SnapshotOptions{Keep: -1}); !errors.Is(err, storage.ErrInvalidOptions) || !strings.Contains(err.Error(), "Keep") {
		t.Fatalf("Keep -1: %v", err)
	}
}

// A write function's error saves nothing: the store, the directory and
// Latest are as before, and the error comes back as it is. So does an
// error the write function swallowed (a write after the store failed
// one cannot be a whole body).
func TestSnapshotWriteError(t *testing.T) {
	dir := t.TempDir()
	s := openSnaps(t, dir)
	if _, err := s.Save(5, 1, writeChunks(1, snapshotBody(1, 300))); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	_, err := s.Save(9, 1, func(w io.Writer) error {
		_, _ = w.Write(snapshotBody(2, 300<<10))
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Save: %v, want boom", err)
	}
	if l, _ := s.Latest(); l.Offset != 5 || len(s.List()) != 1 {
		t.Fatalf("after a failed save: latest %+v, list %+v", l, s.List())
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("files after a failed save: %v", ents)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Save(10, 1, writeChunks(1, nil)); !errors.Is(err, storage.ErrClosed) {
		t.Fatalf("Save after Close: %v", err)
	}
	if _, err := s.Open(storage.SnapshotInfo{}); !errors.Is(err, storage.ErrClosed) {
		t.Fatalf("Open after Close: %v", err)
	}
}

// At open every snapshot file is checked whole: a damaged one (its body,
// header or length) is skipped and listed by Damaged, never returned, and
// the newest whole one is Latest; the next save deletes the damaged
// files. A temporary file (a save a crash interrupted) is removed.
// Other files are left alone.
func TestSnapshotOpenSkipsDamage(t *testing.T) {
	flip := func(at int64) func(t *testing.T, p string) {
		return func(t *testing.T, p string) {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if at < 0 {
				at += int64(len(b))
			}
			b[at] ^= 1
			if err := os.WriteFile(p, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	truncate := func(by int64) func(t *testing.T, p string) {
		return func(t *testing.T, p string) {
			st, _ := os.Stat(p)
			if err := os.Truncate(p, st.Size()-by); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, c := range []struct {
		name   string
		damage func(t *testing.T, p string)
	}{
		{"body byte", flip(storage.SnapshotHeaderSize + 1000)},
		{"last body byte", flip(-1)},
		{"header offset", flip(10)},
		{"header body checksum", flip(41)},
		{"magic", flip(0)},
		{"torn tail", truncate(1)},
		{"torn header", truncate(5000 + storage.SnapshotHeaderSize - 20)},
		{"empty", truncate(5000 + storage.SnapshotHeaderSize)},
		{"grown", func(t *testing.T, p string) {
			f, _ := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
			_, _ = f.Write([]byte{0})
			_ = f.Close()
		}},
		{"renamed to another offset", func(t *testing.T, p string) {
			if err := os.Rename(p, filepath.Join(filepath.Dir(p), "snapshot-00000000000000000025.snap")); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			s := openSnaps(t, dir)
			older, err := s.Save(10, 1, writeChunks(10, snapshotBody(10, 5000)))
			if err != nil {
				t.Fatal(err)
			}
			newer, err := s.Save(20, 1, writeChunks(20, snapshotBody(20, 5000)))
			if err != nil {
				t.Fatal(err)
			}
			_ = s.Close()
			c.damage(t, newer.Path)
			tmp := filepath.Join(dir, "snapshot-00000000000000000030.snap.tmp")
			other := filepath.Join(dir, "README")
			for _, p := range []string{tmp, other} {
				if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			s = openSnaps(t, dir)
			l, ok := s.Latest()
			if !ok || l.Offset != older.Offset || len(s.List()) != 1 {
				t.Fatalf("latest %+v %v, list %+v", l, ok, s.List())
			}
			if d := s.Damaged(); len(d) != 1 {
				t.Fatalf("damaged %v", d)
			}
			if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("temporary file left: %v", err)
			}
			if got, err := readSnapshot(t, s, l); err != nil || !bytes.Equal(got, snapshotBody(10, 5000)) {
				t.Fatalf("older snapshot: %d bytes, %v", len(got), err)
			}
			if _, err := s.Save(40, 1, writeChunks(40, snapshotBody(40, 10))); err != nil {
				t.Fatal(err)
			}
			ents, _ := os.ReadDir(dir)
			var names []string
			for _, e := range ents {
				names = append(names, e.Name())
			}
			if want := []string{"README", "snapshot-00000000000000000010.snap", "snapshot-00000000000000000040.snap"}; strings.Join(names, " ") != strings.Join(want, " ") || len(s.Damaged()) != 0 {
				t.Fatalf("after a save: %v (damaged %v), want %v", names, s.Damaged(), want)
			}
		})
	}
}

// Damage after open (the disk rots under a checked file) is found by the
// reader as it streams: every byte comes out, and the read that ends the
// body fails with ErrCorrupt naming the file instead of io.EOF. A torn
// body ends with ErrCorrupt too; a header that changed fails Open.
func TestSnapshotReaderVerifies(t *testing.T) {
	dir := t.TempDir()
	s := openSnaps(t, dir)
	older, err := s.Save(60, 2, writeChunks(6, snapshotBody(6, 1000)))
	if err != nil {
		t.Fatal(err)
	}
	body := snapshotBody(7, 700<<10)
	info, err := s.Save(70, 2, writeChunks(7, body))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(info.Path)
	b[len(b)-100] ^= 0x80
	if err := os.WriteFile(info.Path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	// The reader's error is sticky.
	r, err := s.Open(info)
	if err != nil {
		t.Fatal(err)
	}
	got, err1 := io.ReadAll(r)
	_, err2 := r.Read(make([]byte, 1))
	_ = r.Close()
	if !errors.Is(err1, storage.ErrCorrupt) || !strings.Contains(err1.Error(), info.Path) || len(got) != len(body) || !errors.Is(err2, storage.ErrCorrupt) {
		t.Fatalf("rotten body: read %d bytes of %d, errors %v, then %v", len(got), len(body), err1, err2)
	}
	// Found damaged, it is no longer listed: the older one is Latest
	// again, and the next save deletes the damaged file.
	if l, ok := s.Latest(); !ok || l.Offset != older.Offset || len(s.List()) != 1 || strings.Join(s.Damaged(), " ") != info.Path {
		t.Fatalf("after the rotten read: latest %+v %v, list %+v, damaged %v", l, ok, s.List(), s.Damaged())
	}
	if _, err := s.Open(info); !errors.Is(err, storage.ErrNoSnapshot) {
		t.Fatalf("Open of a snapshot found damaged: %v", err)
	}

	// Torn under an open reader: its length no longer matches, so Open
	// refuses; one opened before sees the body end early.
	b[len(b)-100] ^= 0x80
	if err := os.WriteFile(info.Path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	s = openSnaps(t, dir)
	if l, ok := s.Latest(); !ok || l != info {
		t.Fatalf("whole again, reopened: latest %+v %v, want %+v", l, ok, info)
	}
	r, err = s.Open(info)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(info.Path, int64(len(b)-10)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, r); !errors.Is(err, storage.ErrCorrupt) || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("torn under a reader: %v", err)
	}
	_ = r.Close()
	if _, err := s.Open(older); err != nil {
		t.Fatal(err)
	}
	if l, ok := s.Latest(); !ok || l.Offset != older.Offset {
		t.Fatalf("after a torn read: latest %+v %v", l, ok)
	}
	// Torn before Open: Open finds it and it is no longer listed either.
	_ = s.Close()
	if err := os.WriteFile(info.Path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	s = openSnaps(t, dir)
	if err := os.Truncate(info.Path, int64(len(b)-10)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Open(info); !errors.Is(err, storage.ErrCorrupt) {
		t.Fatalf("Open of a torn file: %v", err)
	}
	if l, ok := s.Latest(); !ok || l.Offset != older.Offset || len(s.Damaged()) != 1 {
		t.Fatalf("after Open of a torn file: latest %+v %v, damaged %v", l, ok, s.Damaged())
	}
	// A snapshot no longer stored is ErrNoSnapshot.
	if _, err := s.Open(storage.SnapshotInfo{Offset: 3, Path: filepath.Join(dir, "x")}); !errors.Is(err, storage.ErrNoSnapshot) {
		t.Fatalf("Open of an unknown snapshot: %v", err)
	}
}

// A reader keeps reading a snapshot that a later save deletes.
func TestSnapshotReaderOutlivesPrune(t *testing.T) {
	s, err := storage.OpenSnapshots(t.TempDir(), storage.SnapshotOptions{Keep: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	body := snapshotBody(1, 100<<10)
	info, err := s.Save(1, 1, writeChunks(1, body))
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.Open(info)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := s.Save(2, 1, writeChunks(2, nil)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(info.Path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("old snapshot not deleted: %v", err)
	}
	if got, err := io.ReadAll(r); err != nil || !bytes.Equal(got, body) {
		t.Fatalf("read %d bytes, %v", len(got), err)
	}
}

// A snapshot replaced by a save at its offset is no longer stored: Open
// of its old info is ErrNoSnapshot (never the new file's bytes checked
// against the old checksum, which would read as damage).
func TestSnapshotReplacedIsGone(t *testing.T) {
	s := openSnaps(t, t.TempDir())
	old, err := s.Save(50, 1, writeChunks(1, snapshotBody(1, 100)))
	if err != nil {
		t.Fatal(err)
	}
	cur, err := s.Save(50, 1, writeChunks(2, snapshotBody(2, 100)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Open(old); !errors.Is(err, storage.ErrNoSnapshot) {
		t.Fatalf("Open of the replaced snapshot: %v", err)
	}
	if got, err := readSnapshot(t, s, cur); err != nil || !bytes.Equal(got, snapshotBody(2, 100)) {
		t.Fatalf("the replacing snapshot: %d bytes, %v", len(got), err)
	}
}

// A save at the offset of a file found damaged at open replaces that
// file: the save's own file is the one kept, not deleted with the damage.
func TestSnapshotSaveOverDamaged(t *testing.T) {
	dir := t.TempDir()
	s := openSnaps(t, dir)
	if _, err := s.Save(10, 1, writeChunks(10, snapshotBody(10, 5000))); err != nil {
		t.Fatal(err)
	}
	damaged, err := s.Save(20, 1, writeChunks(20, snapshotBody(20, 5000)))
	if err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	if err := os.Truncate(damaged.Path, 100); err != nil {
		t.Fatal(err)
	}
	s = openSnaps(t, dir)
	if d := s.Damaged(); len(d) != 1 || d[0] != damaged.Path {
		t.Fatalf("damaged %v, want %s", d, damaged.Path)
	}
	saved, err := s.Save(20, 1, writeChunks(21, snapshotBody(21, 3000)))
	if err != nil {
		t.Fatal(err)
	}
	if l, ok := s.Latest(); !ok || l.Path != saved.Path {
		t.Fatalf("latest %+v %v, want %+v", l, ok, saved)
	}
	if got, err := readSnapshot(t, s, saved); err != nil || !bytes.Equal(got, snapshotBody(21, 3000)) {
		t.Fatalf("the snapshot saved over the damaged file: %d bytes, %v", len(got), err)
	}
	if len(s.Damaged()) != 0 {
		t.Fatalf("damaged after a save: %v", s.Damaged())
	}
	_ = s.Close()
	s = openSnaps(t, dir)
	if l, ok := s.Latest(); !ok || l.Offset != 20 || l.Size != 3000 || len(s.Damaged()) != 0 {
		t.Fatalf("after reopening: latest %+v %v, damaged %v", l, ok, s.Damaged())
	}
}

// With SnapshotOptions.Counts, only the snapshots that count make up the
// Keep kept: one that does not count (epoch 9 here) stays while it is
// above the lowest kept, never pushes one that counts out, and goes once
// it is below it.
func TestSnapshotKeepCountsOnly(t *testing.T) {
	dir := t.TempDir()
	s, err := storage.OpenSnapshots(dir, storage.SnapshotOptions{Keep: 2, Counts: func(i storage.SnapshotInfo) bool { return i.Epoch != 9 }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	save := func(off, epoch uint64) {
		t.Helper()
		if _, err := s.Save(off, epoch, writeChunks(off, snapshotBody(off, 100))); err != nil {
			t.Fatal(err)
		}
	}
	offsets := func() []uint64 {
		var out []uint64
		for _, i := range s.List() {
			out = append(out, i.Offset)
		}
		return out
	}
	save(100, 9) // not counted, above everything
	save(90, 9)
	save(10, 1)
	save(20, 1)
	if got := offsets(); !slices.Equal(got, []uint64{100, 90, 20, 10}) {
		t.Fatalf("after two counted saves below two that do not count: %v, want [100 90 20 10]", got)
	}
	save(30, 1)
	if got := offsets(); !slices.Equal(got, []uint64{100, 90, 30, 20}) {
		t.Fatalf("after a third counted save: %v, want [100 90 30 20]", got)
	}
	save(110, 1)
	save(120, 1)
	if got := offsets(); !slices.Equal(got, []uint64{120, 110}) {
		t.Fatalf("after two counted saves above those that do not count: %v, want [120 110]", got)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 2 {
		t.Fatalf("%d files in the directory, want 2", len(ents))
	}
}
