package storage_test

import (
	"bufio"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/storage"
)

// writeBytes returns this process's write_bytes from /proc/self/io: bytes
// it caused to be sent to the storage layer (page-granular; the file
// system's journal is not included).
func writeBytes(b *testing.B) int64 {
	f, err := os.Open("/proc/self/io")
	if err != nil {
		b.Fatalf("write amplification needs /proc/self/io: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "write_bytes: "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return n
		}
	}
	b.Fatal("no write_bytes in /proc/self/io")
	return 0
}

const benchEntrySize = 128

// openOneFile opens a data directory whose log stays in one bbolt file
// (SegmentBytes beyond what any run appends: no roll): what the Bolt*
// benchmarks measure, named for that one bbolt file, is its cost, not
// that of rolls (BenchmarkDirAppendRolls measures those).
func openOneFile(b *testing.B, noSync bool) *storage.DirStore {
	b.Helper()
	s, _, err := storage.OpenDir(b.TempDir(), idN1, storage.DirOptions{NoSync: noSync, SegmentBytes: 1 << 40})
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkBoltAppend: one Append of batch entries of 128 bytes per op to
// a data directory in one segment, fsync on. Metrics: entries/s, wamp
// (write_bytes of /proc/self/io / payload bytes), wamp-bbolt (bbolt's page
// writes, meta pages included / payload bytes), p50-µs (median commit
// latency of one Append).
func BenchmarkBoltAppend(b *testing.B) {
	for _, batch := range []int{1, 64, 1024} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			s := openOneFile(b, false)
			defer s.Close()
			payload := make([]byte, benchEntrySize)
			for i := range payload {
				payload[i] = byte(i * 7)
			}
			es := make([]protocol.Entry, batch)
			for i := range es {
				es[i] = protocol.Entry{Epoch: 1, Type: protocol.EntryData, Data: payload}
			}
			lat := make([]time.Duration, 0, b.N)
			b.SetBytes(int64(batch * benchEntrySize))
			w0, p0 := writeBytes(b), s.Stats().PagesWritten
			b.ResetTimer()
			start := time.Now()
			for range b.N {
				leo := s.LEO()
				for i := range es {
					es[i].Offset = leo + uint64(i)
				}
				t0 := time.Now()
				if err := s.Append(es); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
			}
			elapsed := time.Since(start)
			b.StopTimer()
			written := writeBytes(b) - w0
			st := s.Stats()
			pageBytes := (st.PagesWritten - p0) * uint64(st.PageSize)
			slices.Sort(lat)
			b.ReportMetric(float64(b.N*batch)/elapsed.Seconds(), "entries/s")
			b.ReportMetric(float64(written)/float64(b.N*batch*benchEntrySize), "wamp")
			b.ReportMetric(float64(pageBytes)/float64(b.N*batch*benchEntrySize), "wamp-bbolt")
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
		})
	}
}

// BenchmarkBoltRead: sequential reads of 1000 entries of 128 bytes per op
// over a 100,000-entry log in one segment (wrapping around). Metrics:
// entries/s and MB/s.
func BenchmarkBoltRead(b *testing.B) {
	const total, per = 100_000, 1000
	s := openOneFile(b, true)
	defer s.Close()
	payload := make([]byte, benchEntrySize)
	for off := uint64(0); off < total; off += 10_000 {
		es := make([]protocol.Entry, 10_000)
		for i := range es {
			es[i] = protocol.Entry{Offset: off + uint64(i), Epoch: 1, Type: protocol.EntryData, Data: payload}
		}
		if err := s.Append(es); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(per * benchEntrySize)
	b.ResetTimer()
	start := time.Now()
	from := uint64(0)
	for range b.N {
		es, err := s.Entries(from, per, 1<<30)
		if err != nil || len(es) != per {
			b.Fatalf("Entries(%d) = %d, %v", from, len(es), err)
		}
		from = (from + per) % total
	}
	b.ReportMetric(float64(b.N*per)/time.Since(start).Seconds(), "entries/s")
}

// BenchmarkBoltApplyMixed: one pass of the node's writer in steady state —
// the quorum state, an append of 64 entries of 128 bytes and an HW
// checkpoint — fsync on, applied as one Apply (what the writer does) and
// as one Apply per write (what it did before: one call per write), to a
// data directory in one segment. Metrics: entries/s, commits/op
// (DirStats), p50-µs (median latency of the pass).
func BenchmarkBoltApplyMixed(b *testing.B) {
	for _, split := range []bool{false, true} {
		name := "one-apply"
		if split {
			name = "apply-per-write"
		}
		b.Run(name, func(b *testing.B) {
			s := openOneFile(b, false)
			defer s.Close()
			var err error
			const batch = 64
			payload := make([]byte, benchEntrySize)
			es := make([]protocol.Entry, batch)
			for i := range es {
				es[i] = protocol.Entry{Epoch: 1, Type: protocol.EntryData, Data: payload}
			}
			ws := []protocol.Write{
				{Kind: protocol.WriteQuorumState},
				{Kind: protocol.WriteAppend, Entries: es},
				{Kind: protocol.WriteHWCheckpoint},
			}
			lat := make([]time.Duration, 0, b.N)
			c0 := s.Stats().Commits
			b.SetBytes(batch * benchEntrySize)
			b.ResetTimer()
			start := time.Now()
			for n := range b.N {
				leo := s.LEO()
				for i := range es {
					es[i].Offset = leo + uint64(i)
				}
				ws[0].Quorum = protocol.QuorumState{Epoch: 1, LeaderID: "n1", VotedFor: fmt.Sprint(n % 2)}
				ws[2].Offset = leo + batch
				t0 := time.Now()
				if split {
					for i := range ws {
						err = s.Apply(ws[i : i+1])
						if err != nil {
							break
						}
					}
				} else {
					err = s.Apply(ws)
				}
				if err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
			}
			elapsed := time.Since(start)
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(b.N*batch)/elapsed.Seconds(), "entries/s")
			b.ReportMetric(float64(s.Stats().Commits-c0)/float64(b.N), "commits/op")
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
		})
	}
}
