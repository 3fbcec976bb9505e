package storage_test

import (
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/storage"
)

// BenchmarkDirAppendRolls: appends with retention on the
// append path's clock. One op is one Apply appending rollBatch entries of
// 128 bytes, fsync on, with segments of segment-MiB, so that the active
// file rolls every few hundred ops; every rollRetentionEvery ops a
// retention pass (the size policy of the root package's retainer: the
// oldest sealed segments go while all segments hold more than
// rollRetentionSegments segments' worth) applies a DeletePrefix when it
// has something to drop (retention=false: never, the log only grows).
// Metrics, in µs of one Apply's latency:
//
//	p50, p99, p99.9, max   of every Apply (appends and deletions)
//	roll-mean, roll-max    of the appends that rolled
//	del-mean, del-max      of the deletions (each drops a segment or more)
//	plain-p99, plain-max   of the appends that neither rolled nor
//	                       deleted (work left to the store's goroutine
//	                       would show here; the max is mostly the
//	                       machine's own noise)
//
// plus entries/s, rolls and deletions. Run each segment size with its own
// -benchtime=Nx (the figures of docs/storage.md: 4000x at 4 MiB,
// 40 rolls; 12000x at 16 MiB, 30 rolls; 40000x at 64 MiB, the default,
// 25 rolls). REPLOG_BENCH_DROP_PACING="<bytes> <pause>" sets the steps by
// which a deleted segment's file is shrunk before its unlink ("0 0s":
// unlinked at once). With
// REPLOG_BENCH_ROLL_PHASES set it also logs where the rolls spent their
// time, by the rollHook stages.
func BenchmarkDirAppendRolls(b *testing.B) {
	for _, segMiB := range []int64{4, 16, 64} {
		for _, retention := range []bool{true, false} {
			b.Run(fmt.Sprintf("segment=%dMiB/retention=%v", segMiB, retention), func(b *testing.B) {
				benchAppendRolls(b, segMiB<<20, retention)
			})
		}
	}
}

const (
	rollBatch             = 256
	rollRetentionEvery    = 32
	rollRetentionSegments = 4
)

func benchAppendRolls(b *testing.B, segBytes int64, retention bool) {
	var phases map[string][]time.Duration
	var mu sync.Mutex // the hook runs on the store's goroutine too
	var t0 time.Time  // the start of the Apply under way, under mu
	if os.Getenv("REPLOG_BENCH_ROLL_PHASES") != "" {
		phases = map[string][]time.Duration{}
		storage.SetRollHook(func(stage string) {
			mu.Lock()
			defer mu.Unlock()
			phases[stage] = append(phases[stage], time.Since(t0))
		})
		defer storage.SetRollHook(nil)
	}
	begin := func() {
		mu.Lock()
		t0 = time.Now()
		mu.Unlock()
	}
	if v := os.Getenv("REPLOG_BENCH_DROP_PACING"); v != "" {
		var chunk int64
		var pause string
		_, err := fmt.Sscanf(v, "%d %s", &chunk, &pause)
		d, perr := time.ParseDuration(pause)
		if err != nil || perr != nil {
			b.Fatalf("REPLOG_BENCH_DROP_PACING=%q: want \"<chunk bytes> <pause>\", e.g. \"1048576 1ms\"", v)
		}
		defer storage.SetDropPacing(chunk, d)()
	}
	s, _, err := storage.OpenDir(b.TempDir(), benchID, storage.DirOptions{SegmentBytes: segBytes})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	payload := make([]byte, benchEntrySize)
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	es := make([]protocol.Entry, rollBatch)
	for i := range es {
		es[i] = protocol.Entry{Epoch: 1, Type: protocol.EntryData, Data: payload}
	}
	var all, rolled, deleted, plain []time.Duration
	start := time.Now()
	n := 0
	for b.Loop() {
		leo := s.LEO()
		for i := range es {
			es[i].Offset = leo + uint64(i)
		}
		rolls := s.Stats().Rolls
		begin()
		t := time.Now()
		if err := s.Append(es); err != nil {
			b.Fatal(err)
		}
		d := time.Since(t)
		all = append(all, d)
		if s.Stats().Rolls != rolls {
			rolled = append(rolled, d)
		} else {
			plain = append(plain, d)
		}
		if n++; !retention || n%rollRetentionEvery != 0 {
			continue
		}
		if target := retentionPoint(s.Segments(), s.LogStart(), rollRetentionSegments*segBytes); target > s.LogStart() {
			begin()
			t := time.Now()
			if err := s.DeletePrefix(target); err != nil {
				b.Fatal(err)
			}
			d := time.Since(t)
			all, deleted = append(all, d), append(deleted, d)
		}
	}
	elapsed := time.Since(start)
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
	q := func(v []time.Duration, p float64) float64 {
		if len(v) == 0 {
			return 0
		}
		s := slices.Clone(v)
		slices.Sort(s)
		return us(s[min(len(s)-1, int(p*float64(len(s))))])
	}
	mean := func(v []time.Duration) float64 {
		if len(v) == 0 {
			return 0
		}
		var t time.Duration
		for _, d := range v {
			t += d
		}
		return us(t) / float64(len(v))
	}
	b.ReportMetric(float64(n*rollBatch)/elapsed.Seconds(), "entries/s")
	b.ReportMetric(q(all, 0.5), "p50-µs")
	b.ReportMetric(q(all, 0.99), "p99-µs")
	b.ReportMetric(q(all, 0.999), "p99.9-µs")
	b.ReportMetric(q(all, 1), "max-µs")
	b.ReportMetric(mean(rolled), "roll-mean-µs")
	b.ReportMetric(q(rolled, 1), "roll-max-µs")
	b.ReportMetric(mean(deleted), "del-mean-µs")
	b.ReportMetric(q(deleted, 1), "del-max-µs")
	b.ReportMetric(q(plain, 0.99), "plain-p99-µs")
	b.ReportMetric(q(plain, 1), "plain-max-µs")
	b.ReportMetric(float64(len(rolled)), "rolls")
	b.ReportMetric(float64(len(deleted)), "deletions")
	for _, stage := range slices.Sorted(func(yield func(string) bool) {
		for k := range phases {
			if !yield(k) {
				return
			}
		}
	}) {
		b.Logf("stage %q reached after (median, max of %d): %.0f µs, %.0f µs", stage, len(phases[stage]), q(phases[stage], 0.5), q(phases[stage], 1))
	}
}

// retentionPoint is the size policy of the root package's retainer
// (retentionTarget): the end of the last sealed segment that must go so
// that the segments hold at most maxBytes, or logStart.
func retentionPoint(segs []storage.SegmentInfo, logStart uint64, maxBytes int64) uint64 {
	target := logStart
	var total int64
	for _, s := range segs {
		total += s.Bytes
	}
	for _, s := range segs {
		if s.Active || s.End <= logStart {
			total -= s.Bytes
			continue
		}
		if total <= maxBytes {
			break
		}
		target = s.End
		total -= s.Bytes
	}
	return target
}
