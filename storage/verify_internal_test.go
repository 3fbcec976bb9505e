package storage

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/replog-io/replog/protocol"
)

// The pread path (platforms without mmap) finds what the mapped path
// finds: the same verdict and message on the same damaged files.
func TestVerifyPreadMatchesMapped(t *testing.T) {
	tmpl, _ := fuzzTemplate(t)
	rng := rand.New(rand.NewPCG(1, 2))
	path := filepath.Join(t.TempDir(), "v.db")
	corrupt := 0
	for i := 0; i < 300; i++ {
		data := bytes.Clone(tmpl)
		switch i % 3 {
		case 0: // one byte
			data[rng.IntN(len(data))] ^= byte(1 + rng.IntN(255))
		case 1: // a run of garbage
			off := rng.IntN(len(data))
			for j := off; j < min(len(data), off+1+rng.IntN(64)); j++ {
				data[j] = byte(rng.Uint32())
			}
		case 2: // truncation
			data = data[:rng.IntN(len(data))]
		}
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		mapped := verifyBoltFile(f, int64(len(data)))
		pread := (&verifier{r: f, size: int64(len(data))}).run()
		f.Close()
		if (mapped == nil) != (pread == nil) || (mapped != nil && mapped.Error() != pread.Error()) {
			t.Fatalf("case %d: mapped %v, pread %v", i, mapped, pread)
		}
		if mapped != nil {
			if !errors.Is(mapped, ErrCorrupt) {
				t.Fatalf("case %d: %v is not ErrCorrupt", i, mapped)
			}
			corrupt++
		}
	}
	if corrupt == 0 {
		t.Fatal("no damage detected at all")
	}
	t.Logf("%d of 300 damaged files refused", corrupt)
}

// Files bbolt writes legitimately pass, whole (the verification that
// follows Open included): entries spanning overflow pages, a file written
// since by a bbolt of another tool, and one fresh from bbolt's init.
func TestVerifyAcceptsValidFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, DataFileName)
	opts := DirOptions{NoSync: true, SegmentBytes: oneSegment}
	d, _, err := OpenDir(dir, testID, opts)
	if err != nil {
		t.Fatal(err)
	}
	var es []protocol.Entry
	for i, n := range []int{10, 5000, 100 << 10, 3, 1 << 20, 0} {
		es = append(es, protocol.Entry{Offset: uint64(i), Epoch: 1, Type: protocol.EntryData, Data: bytes.Repeat([]byte{byte(i)}, n)})
	}
	if err := d.Append(es); err != nil {
		t.Fatal(err)
	}
	if err := d.DeletePrefix(2); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	reopen := func(when string) {
		t.Helper()
		d, _, err := OpenDir(dir, testID, opts)
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		defer d.Close()
		if err := d.WaitVerified(context.Background()); err != nil {
			t.Fatalf("%s: verification after Open: %v", when, err)
		}
		got, err := d.Entries(2, 0, 1<<30)
		if err != nil || len(got) != 4 || len(got[2].Data) != 1<<20 {
			t.Fatalf("%s: %d entries, %v", when, len(got), err)
		}
	}
	reopen("overflow pages")
	// Another tool writes to it, its free list synced.
	db, err := bolt.Open(path, 0o600, &bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMeta).Put([]byte("x"), []byte("y"))
	})
	if err != nil {
		t.Fatal(err)
	}
	hasFreelist := false
	_ = db.View(func(tx *bolt.Tx) error {
		for id := 0; id < int(tx.Size())/db.Info().PageSize; id++ {
			if p, _ := tx.Page(id); p != nil && p.Type == "freelist" {
				hasFreelist = true
			}
		}
		return nil
	})
	db.Close()
	if !hasFreelist {
		t.Fatal("the file has no free-list page: the case is not exercised")
	}
	reopen("written by another tool")
	// Fresh from bbolt's init (its meta names free-list page 2), in a
	// directory without identity, which OpenDir adopts.
	fresh := t.TempDir()
	db, err = bolt.Open(filepath.Join(fresh, DataFileName), 0o600, &bolt.Options{NoFreelistSync: true})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	d, _, err = OpenDir(fresh, testID, DirOptions{})
	if err != nil {
		t.Fatalf("fresh bbolt file: %v", err)
	}
	if err := d.WaitVerified(context.Background()); err != nil {
		t.Fatalf("fresh bbolt file: verification after Open: %v", err)
	}
	d.Close()
}
