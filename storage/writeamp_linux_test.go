package storage_test

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/replog-io/replog/internal/storagetest"
	"github.com/replog-io/replog/storage"
)

// wchar is the bytes this process has passed to write calls
// (/proc/self/io).
func wchar(t *testing.T) float64 {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "wchar: "); ok {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return float64(n)
		}
	}
	t.Fatal("no wchar in /proc/self/io")
	return 0
}

// TestWriteAmplification counts the bytes each store writes per byte of
// record (entry payload), by shape of Apply, without and with the
// journal, from the first Apply to the end of Close (with the journal,
// its final checkpoint included): the bytes passed to write calls, so the
// filesystem's rounding of each fdatasync to its block is not counted.
// The journal's own records are counted apart (JournalBytes: the commit
// path). It asserts that the journal's commit path writes less than
// bbolt's commits for small records and no more than it for large ones,
// and logs the figures (docs/storage.md section 10).
func TestWriteAmplification(t *testing.T) {
	for _, shape := range []struct{ entries, size, applies int }{{1, 128, 400}, {64, 128, 100}, {1024, 128, 20}, {1, 16 << 10, 100}, {8, 16 << 10, 30}} {
		t.Run(fmt.Sprintf("%dx%d", shape.entries, shape.size), func(t *testing.T) {
			record := float64(shape.entries * shape.size * shape.applies)
			amp := map[bool][2]float64{}
			for _, journal := range []bool{false, true} {
				s, _, err := storage.OpenDir(t.TempDir(), journalID, storage.DirOptions{Journal: journal, NoSync: true})
				if err != nil {
					t.Fatal(err)
				}
				w0 := wchar(t)
				for i := range shape.applies {
					if err := s.Append(storagetest.Batch(uint64(i*shape.entries), shape.entries, 1, shape.size)); err != nil {
						t.Fatal(err)
					}
				}
				jb := float64(s.Stats().JournalBytes)
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
				all := wchar(t) - w0
				if journal {
					amp[journal] = [2]float64{jb / record, all / record}
				} else {
					amp[journal] = [2]float64{all / record, all / record}
				}
			}
			t.Logf("%d entries of %d bytes per Apply: bbolt %.2f; journal %.2f on the commit path, %.2f with checkpoints",
				shape.entries, shape.size, amp[false][0], amp[true][0], amp[true][1])
			if amp[true][0] > amp[false][0] || (shape.size < 1024 && amp[true][0] >= amp[false][0]) {
				t.Fatalf("the journal's commit path writes %.2f bytes per record byte, bbolt's %.2f", amp[true][0], amp[false][0])
			}
		})
	}
}
