package storage_test

import (
	"bytes"
	"errors"
	"hash/crc32"
	"io"
	"path/filepath"
	"testing"

	"github.com/replog-io/replog/storage"
)

// TestSnapshotShip: a snapshot read in chunks from one store and received
// in another, with a reopen of the receiver half way (the partial is kept
// and resumes at its size), installs as the sender's snapshot; a chunk
// that does not continue the partial is refused; a body whose checksum is
// not the sender's is refused at install and the partial dropped.
func TestSnapshotShip(t *testing.T) {
	src, err := storage.OpenSnapshots(filepath.Join(t.TempDir(), "s"), storage.SnapshotOptions{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	body := bytes.Repeat([]byte("0123456789abcdef"), 1000)
	info, err := src.Save(90, 3, func(w io.Writer) error { _, err := w.Write(body); return err })
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "d")
	dst, err := storage.OpenSnapshots(dir, storage.SnapshotOptions{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	p := storage.PartialSnapshot{Offset: info.Offset, Epoch: info.Epoch, Size: info.Size, CRC: info.CRC}
	var pos int64
	for pos < info.Size {
		chunk, err := src.ReadChunk(info, pos, 3000)
		if err != nil || len(chunk) == 0 {
			t.Fatalf("chunk at %d: %d bytes, %v", pos, len(chunk), err)
		}
		if pos, err = dst.Receive(p, pos, chunk); err != nil {
			t.Fatal(err)
		}
		if pos == 9000 {
			if _, err := dst.Receive(p, pos-1, chunk[:1]); !errors.Is(err, storage.ErrPartialMismatch) {
				t.Fatalf("a chunk behind the partial's end: %v", err)
			}
			other := p
			other.Epoch++
			if _, err := dst.Receive(other, pos, chunk[:1]); !errors.Is(err, storage.ErrPartialMismatch) {
				t.Fatalf("a chunk of another snapshot: %v", err)
			}
			// A restart: the partial is kept, at its size.
			if err := dst.Close(); err != nil {
				t.Fatal(err)
			}
			if dst, err = storage.OpenSnapshots(dir, storage.SnapshotOptions{NoSync: true}); err != nil {
				t.Fatal(err)
			}
			if got, ok := dst.Partial(); !ok || got.Have != pos || got.Offset != 90 || got.CRC != info.CRC {
				t.Fatalf("partial after a reopen: %+v %v", got, ok)
			}
			if _, ok := dst.Latest(); ok {
				t.Fatal("a partial snapshot is listed")
			}
		}
	}
	if end, err := src.ReadChunk(info, info.Size, 10); err != nil || len(end) != 0 {
		t.Fatalf("chunk at the end: %d bytes, %v", len(end), err)
	}
	got, err := dst.Install()
	if err != nil || got.Offset != 90 || got.Epoch != 3 || got.CRC != info.CRC {
		t.Fatalf("install: %+v %v", got, err)
	}
	if _, ok := dst.Partial(); ok {
		t.Fatal("partial left after install")
	}
	r, err := dst.Open(got)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(r); err != nil || !bytes.Equal(b, body) {
		t.Fatalf("installed body: %d bytes, %v", len(b), err)
	}
	r.Close()

	// A body that is not the sender's: refused, the partial dropped.
	bad := p
	bad.Offset, bad.Size, bad.CRC = 120, 4, crc32.Checksum([]byte("abcd"), crc32.MakeTable(crc32.Castagnoli))
	if _, err := dst.Receive(bad, 0, []byte("abce")); err != nil {
		t.Fatal(err)
	}
	if _, err := dst.Install(); !errors.Is(err, storage.ErrCorrupt) {
		t.Fatalf("install of a damaged body: %v", err)
	}
	if _, ok := dst.Partial(); ok {
		t.Fatal("a damaged partial is kept")
	}
	if l, _ := dst.Latest(); l.Offset != 90 {
		t.Fatalf("latest after a refused install: %+v", l)
	}
	if _, err := dst.Install(); !errors.Is(err, storage.ErrNoSnapshot) {
		t.Fatalf("install without a partial: %v", err)
	}
}
