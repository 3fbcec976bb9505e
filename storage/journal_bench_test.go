package storage_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/storage"
)

// BenchmarkDirApply and BenchmarkDirApplyJournal: one Apply per op of
// batch entries of size bytes (128 as BenchmarkDirAppend's, and 16 KiB
// records) and an HW checkpoint, on OpenDir's store with fsync on and
// default segments, without and with the commit journal (default
// JournalBytes, so checkpoints run during the benchmark). Metrics:
// entries/s, wamp (write_bytes of /proc/self/io / payload bytes, the
// checkpoints' included), fsyncs/op (DirStats.Fsyncs), p50-µs and p99-µs.
func BenchmarkDirApply(b *testing.B) { benchDirApply(b, false) }

func BenchmarkDirApplyJournal(b *testing.B) { benchDirApply(b, true) }

func benchDirApply(b *testing.B, journal bool) {
	for _, shape := range []struct{ batch, size int }{{1, 128}, {64, 128}, {1024, 128}, {1, 16 << 10}, {8, 16 << 10}} {
		b.Run(fmt.Sprintf("batch=%d/size=%d", shape.batch, shape.size), func(b *testing.B) {
			s, _, err := storage.OpenDir(b.TempDir(), benchID, storage.DirOptions{Journal: journal})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			payload := make([]byte, shape.size)
			es := make([]protocol.Entry, shape.batch)
			for i := range es {
				es[i] = protocol.Entry{Epoch: 1, Type: protocol.EntryData, Data: payload}
			}
			ws := []protocol.Write{{Kind: protocol.WriteAppend, Entries: es}, {Kind: protocol.WriteHWCheckpoint}}
			lat := make([]time.Duration, 0, b.N)
			f0 := s.Stats().Fsyncs
			w0 := writeBytes(b)
			start := time.Now()
			for b.Loop() {
				leo := s.LEO()
				for i := range es {
					es[i].Offset = leo + uint64(i)
				}
				ws[1].Offset = leo
				t0 := time.Now()
				if err := s.Apply(ws); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
			}
			elapsed := time.Since(start)
			written := writeBytes(b) - w0
			n := len(lat)
			slices.Sort(lat)
			b.ReportMetric(float64(n*shape.batch)/elapsed.Seconds(), "entries/s")
			b.ReportMetric(float64(written)/float64(n*shape.batch*shape.size), "wamp")
			b.ReportMetric(float64(s.Stats().Fsyncs-f0)/float64(n), "fsyncs/op")
			b.ReportMetric(float64(lat[n/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[n*99/100].Microseconds()), "p99-µs")
		})
	}
}

// BenchmarkSharedJournal: N stores on one shared journal (fsync on), each
// with its own goroutine applying one 128-byte entry and an HW checkpoint
// per Apply, b.N Applies in all. Metrics: applies/s, fsyncs/apply (the
// journal's fdatasyncs, rounds' and cuts', per Apply: about 1/N when
// every round takes one Apply of each store), batches/record (Applies per
// round).
func BenchmarkSharedJournal(b *testing.B) {
	for _, n := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("stores=%d", n), func(b *testing.B) {
			root := b.TempDir()
			j, err := storage.OpenJournal(filepath.Join(root, "journal"), storage.JournalOptions{})
			if err != nil {
				b.Fatal(err)
			}
			defer j.Close()
			stores := make([]*storage.DirStore, n)
			for i := range stores {
				if stores[i], _, err = storage.OpenDir(filepath.Join(root, fmt.Sprint(i)), benchID, storage.DirOptions{SharedJournal: j, JournalLogID: uint32(i)}); err != nil {
					b.Fatal(err)
				}
			}
			j0 := j.Stats()
			start := time.Now()
			applyFromEach(b, stores)
			elapsed := time.Since(start)
			j1 := j.Stats()
			for _, s := range stores {
				if err := s.Close(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "applies/s")
			b.ReportMetric(float64(j1.Fsyncs-j0.Fsyncs)/float64(b.N), "fsyncs/apply")
			b.ReportMetric(float64(j1.Batches-j0.Batches)/float64(max(j1.Records-j0.Records, 1)), "batches/record")
		})
	}
}

// BenchmarkSharedJournalCheckpoints: 64 stores on one 1 MiB shared
// journal without fsync (a node's named logs under load, with the disk
// taken out), each with its own goroutine applying one 128-byte entry and
// an HW checkpoint per Apply, b.N Applies in all; run it with
// -benchtime of 20000x or more, so that a quarter of the journal fills
// many times. Metric: checkpoints/kapply, the stores' checkpoints (bbolt
// commits, each two fsyncs on a real disk) per 1,000 Applies.
func BenchmarkSharedJournalCheckpoints(b *testing.B) {
	const n = 64
	root := b.TempDir()
	j, err := storage.OpenJournal(filepath.Join(root, "journal"), storage.JournalOptions{Bytes: 1 << 20, NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	stores := make([]*storage.DirStore, n)
	for i := range stores {
		if stores[i], _, err = storage.OpenDir(filepath.Join(root, fmt.Sprint(i)), benchID, storage.DirOptions{SharedJournal: j, JournalLogID: uint32(i), NoSync: true}); err != nil {
			b.Fatal(err)
		}
	}
	checkpoints := func() (sum uint64) {
		for _, s := range stores {
			sum += s.Stats().Checkpoints
		}
		return sum
	}
	c0 := checkpoints()
	b.ResetTimer()
	applyFromEach(b, stores)
	b.StopTimer()
	b.ReportMetric(float64(checkpoints()-c0)*1000/float64(b.N), "checkpoints/kapply")
	for _, s := range stores {
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// applyFromEach runs b.N Applies in all over stores, each store from a
// goroutine of its own: one 128-byte entry and an HW checkpoint each, as a
// log's round under load writes.
func applyFromEach(b *testing.B, stores []*storage.DirStore) {
	var left atomic.Int64
	left.Store(int64(b.N))
	var wg sync.WaitGroup
	for _, s := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			payload := make([]byte, 128)
			for left.Add(-1) >= 0 {
				leo := s.LEO()
				ws := []protocol.Write{{Kind: protocol.WriteAppend, Entries: []protocol.Entry{{Offset: leo, Epoch: 1, Type: protocol.EntryData, Data: payload}}},
					{Kind: protocol.WriteHWCheckpoint, Offset: leo}}
				if err := s.Apply(ws); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}
