package storage

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/replog-io/replog/protocol"
)

// Open costs on a data directory of 100k entries of 128 bytes in one
// segment (its active file; warm page cache):
//
//	verify:      verifyBoltFile alone (the structural walk of a whole file)
//	bbolt-open:  bolt.Open read-write with NoFreelistSync and Close, less
//	             load: the active file records its free list, so bbolt
//	             reads it instead of walking every page (a file without
//	             one, from another tool, costs that walk)
//	OpenDir:     the whole open (locks, identity, the active file's
//	             verification, the part that follows Open included, bbolt,
//	             load) and Close
//	bbolt-check: bbolt's Tx.Check (a full consistency check) on a
//	             read-only open, for comparison
//	read-all:    reading every entry (verifying every entry's CRC): the
//	             cost of a full check of the data itself

var (
	benchOpenOnce sync.Once
	benchOpenDir  string
)

// benchOpenFile fills the benchmarks' data directory once and returns its
// active file.
func benchOpenFile(b *testing.B) string {
	benchOpenOnce.Do(func() {
		dir, err := os.MkdirTemp("", "replog-open-bench-")
		if err != nil {
			b.Fatal(err)
		}
		benchOpenDir = dir
		s, _, err := OpenDir(dir, testID, DirOptions{NoSync: true})
		if err != nil {
			b.Fatal(err)
		}
		data := make([]byte, 128)
		for i := 0; i < 100000; i += 1000 {
			es := make([]protocol.Entry, 1000)
			for j := range es {
				es[j] = protocol.Entry{Offset: uint64(i + j), Epoch: 1, Type: protocol.EntryData, Data: data}
			}
			if err := s.Append(es); err != nil {
				b.Fatal(err)
			}
		}
		if st := s.Stats(); st.Rolls != 0 {
			b.Fatalf("the directory rolled: %+v", st)
		}
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
	})
	path := filepath.Join(benchOpenDir, DataFileName)
	if fi, err := os.Stat(path); err == nil {
		b.ReportMetric(float64(fi.Size())/(1<<20), "file-MiB")
	}
	return path
}

func BenchmarkOpen100k(b *testing.B) {
	path := benchOpenFile(b)
	b.Cleanup(func() { // the file is shared by the sub-benchmarks only
		_ = os.RemoveAll(filepath.Dir(path))
		benchOpenOnce = sync.Once{}
	})
	opts := func(ro bool) *bolt.Options {
		return &bolt.Options{ReadOnly: ro, FreelistType: bolt.FreelistMapType, NoFreelistSync: true}
	}
	b.Run("verify", func(b *testing.B) {
		f, err := os.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		fi, _ := f.Stat()
		for b.Loop() {
			if err := verifyBoltFile(f, fi.Size()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("bbolt-open", func(b *testing.B) {
		for b.Loop() {
			db, err := bolt.Open(path, 0o600, opts(false))
			if err != nil {
				b.Fatal(err)
			}
			db.Close()
		}
	})
	b.Run("OpenDir", func(b *testing.B) {
		for b.Loop() {
			s, _, err := OpenDir(filepath.Dir(path), testID, DirOptions{NoSync: true})
			if err != nil {
				b.Fatal(err)
			}
			if err := s.WaitVerified(context.Background()); err != nil {
				b.Fatal(err)
			}
			s.Close()
		}
	})
	b.Run("bbolt-check", func(b *testing.B) {
		db, err := bolt.Open(path, 0o600, opts(true))
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		for b.Loop() {
			err := db.View(func(tx *bolt.Tx) error {
				for err := range tx.Check() {
					return err
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("read-all", func(b *testing.B) {
		s, _, err := OpenDir(filepath.Dir(path), testID, DirOptions{NoSync: true})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		for b.Loop() {
			es, err := s.Entries(0, 0, 1<<40)
			if err != nil || len(es) != 100000 {
				b.Fatal(len(es), err)
			}
		}
	})
}
