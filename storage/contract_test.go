package storage_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"go.uber.org/goleak"

	"github.com/replog-io/replog/internal/storagetest"
	"github.com/replog-io/replog/storage"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// damageEntry flips a byte of the payload the contract suite wrote at
// offset (epoch 1, 100 bytes) in whichever of files holds it, and returns
// that file.
func damageEntry(t *testing.T, files []string, offset uint64) string {
	t.Helper()
	payload := storagetest.Payload(offset, 1, 100)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if i := bytes.Index(b, payload); i >= 0 {
			b[i+40] ^= 0x08
			if err := os.WriteFile(f, b, 0o600); err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	t.Fatalf("the payload of offset %d is in none of %v", offset, files)
	return ""
}

func TestMemoryContract(t *testing.T) {
	storagetest.Run(t, storagetest.Harness{
		Open:   func(t *testing.T, dir string) storage.Store { return storage.NewMemory() },
		Reopen: func(t *testing.T, s storage.Store, dir string) storage.Store { return s.(*storage.Memory).Crash() },
	})
}

// The deferred-durability Memory keeps the contract when synced before
// every restart.
func TestMemoryDeferredContract(t *testing.T) {
	storagetest.Run(t, storagetest.Harness{
		Open: func(t *testing.T, dir string) storage.Store { return storage.NewMemoryDeferred() },
		Reopen: func(t *testing.T, s storage.Store, dir string) storage.Store {
			m := s.(*storage.Memory)
			if err := m.Sync(); err != nil {
				t.Fatalf("Sync: %v", err)
			}
			return m.Crash()
		},
	})
}

// dirHarness runs the contract on OpenDir's segmented store; segmentBytes
// of a few KiB make it roll at almost every append, so that reads,
// truncations and prefix deletions cross segment boundaries all the time.
func dirHarness(segmentBytes int64, noSync bool) storagetest.Harness {
	return dirHarnessOpts(storage.DirOptions{SegmentBytes: segmentBytes, NoSync: noSync})
}

// dirHarnessOpts runs the contract on OpenDir's store with opts.
func dirHarnessOpts(opts storage.DirOptions) storagetest.Harness {
	open := func(t *testing.T, dir string) storage.Store {
		t.Helper()
		s, _, err := storage.OpenDir(filepath.Join(dir, "data"), storage.Identity{ClusterID: "c", NodeID: "n"}, opts)
		if err != nil {
			t.Fatalf("OpenDir: %v", err)
		}
		return s
	}
	return storagetest.Harness{
		Open: open,
		Reopen: func(t *testing.T, s storage.Store, dir string) storage.Store {
			if err := s.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			return open(t, dir)
		},
		BigLog: 6000,
		Damage: func(t *testing.T, dir string, offset uint64) string {
			files, err := filepath.Glob(filepath.Join(dir, "data", "replog*"))
			if err != nil {
				t.Fatal(err)
			}
			// The journal keeps the bytes of records it has cut: the
			// segments' copy is the one read.
			files = slices.DeleteFunc(files, func(f string) bool { return filepath.Base(f) == storage.JournalFileName })
			return damageEntry(t, files, offset)
		},
	}
}

// With the default segment size the suite's logs fit one segment: the
// whole log in the active file, one bbolt commit per Apply.
func TestDirContract(t *testing.T) {
	storagetest.Run(t, dirHarness(0, false))
}

func TestDirContractTinySegments(t *testing.T) {
	storagetest.Run(t, dirHarness(1, true))
}

func TestDirContractSmallSegments(t *testing.T) {
	storagetest.Run(t, dirHarness(48<<10, true))
}

// The contract with the commit journal in front of the segments: a small
// journal (checkpoints every few Applies, Applies waiting for room, the
// suite's large batches applied directly) and tiny segments (checkpoints
// roll).
func TestDirContractJournal(t *testing.T) {
	storagetest.Run(t, dirHarnessOpts(storage.DirOptions{Journal: true, JournalBytes: 64 << 10}))
}

func TestDirContractJournalTinySegments(t *testing.T) {
	storagetest.Run(t, dirHarnessOpts(storage.DirOptions{Journal: true, JournalBytes: 128 << 10, SegmentBytes: 4 << 10, NoSync: true}))
}

func TestDirContractJournalDefaults(t *testing.T) {
	storagetest.Run(t, dirHarnessOpts(storage.DirOptions{Journal: true, NoSync: true}))
}
