//go:build linux && (amd64 || arm64)

package storage_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/storage"
)

// BenchmarkDirOpen: fills a data directory with N entries of
// 128-byte records (batches of 10,000, NoSync, then every file synced),
// then per iteration opens it in a fresh child process (this test binary,
// TestOpenBenchChild) and reports what the child measured:
//
//	cold-open-ms  OpenDir with the page cache dropped first (echo 3 >
//	              /proc/sys/vm/drop_caches as root; otherwise, or with
//	              REPLOG_BENCH_COLD=fadvise, posix_fadvise DONTNEED on
//	              every file of the directory: the store's own files cold,
//	              the binary warm)
//	warm-open-ms  OpenDir right after, the files cached
//	rss-MB        the child's VmRSS after the cold open (Go runtime and
//	              test binary included); rss-open-MB its growth over the
//	              open alone
//	writable-ms   from the start of the cold open until the verification
//	              that follows it has checked the free list (appends
//	              wait for that; docs/storage.md section 9)
//	verified-ms   until that verification ended (reads of old entries
//	              and truncations wait for it); rss-verified-MB the
//	              VmRSS then
//	active-MiB    the active segment's size; segments the sealed count
//
// N = 10,000 always; 400,000 (an active segment nearly full: Open's worst
// case), 1,000,000 and 5,000,000 only with REPLOG_BENCH_OPEN_BIG=1 (up to
// ~1 GB of /tmp, removed afterwards). Run with -benchtime=5x: each
// iteration is a child.
func BenchmarkDirOpen(b *testing.B) {
	sizes := []int{10_000}
	if os.Getenv("REPLOG_BENCH_OPEN_BIG") != "" {
		// 400,000 entries nearly fill one 64 MiB segment: the largest
		// active segment, the worst case of Open.
		sizes = append(sizes, 400_000, 1_000_000, 5_000_000)
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("entries=%d", n), func(b *testing.B) {
			dir, err := os.MkdirTemp("", "replog-open-bench-")
			if err != nil {
				b.Fatal(err)
			}
			defer os.RemoveAll(dir)
			fillDir(b, dir, n)
			var cold, warm, rss, rssOpen, writable, verified, rssVerified []float64
			var last openResult
			for b.Loop() {
				r := runOpenChild(b, dir)
				cold, warm = append(cold, r.ColdMs), append(warm, r.WarmMs)
				rss, rssOpen = append(rss, r.RSSMB), append(rssOpen, r.RSSOpenMB)
				writable, verified = append(writable, r.WritableMs), append(verified, r.VerifiedMs)
				rssVerified = append(rssVerified, r.RSSVerifiedMB)
				last = r
			}
			b.ReportMetric(median(cold), "cold-open-ms")
			b.ReportMetric(median(warm), "warm-open-ms")
			b.ReportMetric(median(rss), "rss-MB")
			b.ReportMetric(median(rssOpen), "rss-open-MB")
			b.ReportMetric(median(writable), "writable-ms")
			b.ReportMetric(median(verified), "verified-ms")
			b.ReportMetric(median(rssVerified), "rss-verified-MB")
			b.ReportMetric(last.ActiveMiB, "active-MiB")
			b.ReportMetric(float64(last.Sealed), "segments")
			b.ReportMetric(dirMiB(b, dir), "dir-MiB")
			b.Logf("cold cache by %s", last.Cold)
		})
	}
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

func dirMiB(b *testing.B, dir string) float64 {
	ents, err := os.ReadDir(dir)
	if err != nil {
		b.Fatal(err)
	}
	var n int64
	for _, e := range ents {
		if fi, err := e.Info(); err == nil {
			n += fi.Size()
		}
	}
	return float64(n) / (1 << 20)
}

var benchID = storage.Identity{ClusterID: "bench", NodeID: "n1"}

// fillDir writes n entries of 128 bytes in batches of 10,000 with NoSync,
// then syncs every file of dir (so that their pages are clean and can be
// dropped from the cache).
func fillDir(b *testing.B, dir string, n int) {
	if os.Getenv(envNoFreelistSync) != "" {
		defer storage.SetActiveNoFreelistSync(storage.SetActiveNoFreelistSync(true))
	}
	s, _, err := storage.OpenDir(dir, benchID, storage.DirOptions{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	payload := make([]byte, 128)
	for i := range payload {
		payload[i] = byte(i*7 + 3)
	}
	const batch = 10_000
	es := make([]protocol.Entry, batch)
	now := time.Now().UnixMilli()
	for off := 0; off < n; off += batch {
		k := min(batch, n-off)
		for i := range k {
			es[i] = protocol.Entry{Offset: uint64(off + i), Epoch: 1 + uint64(off/1_000_000), Type: protocol.EntryData, Time: now, Data: payload}
		}
		if err := s.Apply([]protocol.Write{{Kind: protocol.WriteAppend, Entries: es[:k]}}); err != nil {
			b.Fatal(err)
		}
	}
	err = s.Apply([]protocol.Write{
		{Kind: protocol.WriteQuorumState, Quorum: protocol.QuorumState{Epoch: 5, VotedFor: "n1", LeaderID: "n1"}},
		{Kind: protocol.WriteHWCheckpoint, Offset: uint64(n)},
	})
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		b.Fatal(err)
	}
	for _, e := range ents {
		f, err := os.Open(filepath.Join(dir, e.Name()))
		if err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
}

// openResult is what TestOpenBenchChild prints.
type openResult struct {
	ColdMs, WarmMs         float64
	RSSMB, RSSOpenMB       float64
	WritableMs, VerifiedMs float64
	RSSVerifiedMB          float64
	ActiveMiB              float64
	Sealed                 int
	LEO                    uint64
	Cold                   string
	Err                    string
}

const envOpenChild = "REPLOG_OPEN_BENCH_DIR"

// envNoFreelistSync (any value) makes BenchmarkDirOpen and
// BenchmarkDirAppend open the active segment with NoFreelistSync (its
// free list rebuilt at open by a walk instead of written at every commit:
// the choice not made), to compare both.
const envNoFreelistSync = "REPLOG_BENCH_NO_FREELIST_SYNC"

func runOpenChild(b *testing.B, dir string) openResult {
	cmd := exec.Command(os.Args[0], "-test.run=^TestOpenBenchChild$", "-test.count=1", "-test.bench=^$")
	cmd.Env = append(os.Environ(), envOpenChild+"="+dir)
	out, err := cmd.CombinedOutput()
	i := strings.LastIndex(string(out), "OPEN-RESULT ")
	if err != nil || i < 0 {
		b.Fatalf("open child: %v\n%s", err, out)
	}
	line := string(out[i+len("OPEN-RESULT "):])
	line = line[:strings.IndexByte(line, '\n')]
	var r openResult
	if err := json.Unmarshal([]byte(line), &r); err != nil {
		b.Fatal(err)
	}
	if r.Err != "" {
		b.Fatal(r.Err)
	}
	return r
}

// TestOpenBenchChild is BenchmarkDirOpen's child: it drops the directory's
// files from the page cache, opens it, and prints what it measured.
func TestOpenBenchChild(t *testing.T) {
	dir := os.Getenv(envOpenChild)
	if dir == "" {
		return
	}
	var r openResult
	defer func() {
		out, _ := json.Marshal(r)
		fmt.Printf("\nOPEN-RESULT %s\n", out)
	}()
	if os.Getenv(envNoFreelistSync) != "" {
		storage.SetActiveNoFreelistSync(true)
	}
	r.Cold = dropCache(dir)
	rss0 := vmRSS()
	writable := make(chan time.Time, 1)
	storage.SetVerifyHook(func(stage string) {
		if stage == "writable" {
			writable <- time.Now()
		}
	})
	defer storage.SetVerifyHook(nil)
	start := time.Now()
	s, _, err := storage.OpenDir(dir, benchID, storage.DirOptions{})
	r.ColdMs = float64(time.Since(start).Microseconds()) / 1000
	if err != nil {
		r.Err = err.Error()
		return
	}
	rss1 := vmRSS()
	r.RSSMB, r.RSSOpenMB = rss1/1024, (rss1-rss0)/1024
	if err := s.WaitVerified(context.Background()); err != nil {
		r.Err = err.Error()
		return
	}
	r.VerifiedMs = float64(time.Since(start).Microseconds()) / 1000
	r.RSSVerifiedMB = vmRSS() / 1024
	select {
	case w := <-writable:
		r.WritableMs = float64(w.Sub(start).Microseconds()) / 1000
	default: // Open verified the whole file
		r.WritableMs = r.ColdMs
	}
	storage.SetVerifyHook(nil)
	r.LEO, r.Sealed = s.LEO(), s.Stats().Sealed
	if fi, err := os.Stat(filepath.Join(dir, storage.DataFileName)); err == nil {
		r.ActiveMiB = float64(fi.Size()) / (1 << 20)
	}
	s.Close()
	start = time.Now()
	s, _, err = storage.OpenDir(dir, benchID, storage.DirOptions{})
	r.WarmMs = float64(time.Since(start).Microseconds()) / 1000
	if err != nil {
		r.Err = err.Error()
		return
	}
	s.Close()
}

// dropCache empties the page cache of dir's files and says how.
func dropCache(dir string) string {
	if os.Getenv("REPLOG_BENCH_COLD") != "fadvise" {
		syscall.Sync()
		if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3\n"), 0); err == nil {
			return "drop_caches"
		}
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		f, err := os.Open(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		_ = fadviseDontNeed(f)
		f.Close()
	}
	return "fadvise"
}

// vmRSS returns this process's VmRSS in KiB.
func vmRSS() float64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			n, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return n
		}
	}
	return 0
}

// fadviseDontNeed drops f's clean pages from the page cache
// (posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED)).
func fadviseDontNeed(f *os.File) error {
	const fadvDontNeed = 4
	_, _, e := syscall.Syscall6(syscall.SYS_FADVISE64, f.Fd(), 0, 0, fadvDontNeed, 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

// BenchmarkDirAppend: one Apply of batch entries of 128 bytes per op on
// OpenDir's store, fsync on, default segments (so no roll within a run of
// a few seconds). Metrics as BenchmarkBoltAppend's: entries/s, wamp
// (write_bytes of /proc/self/io / payload bytes), p50-µs. With
// REPLOG_BENCH_NO_FREELIST_SYNC set the active segment does not write its
// free list at commits, the choice not made (docs/storage.md).
func BenchmarkDirAppend(b *testing.B) {
	if os.Getenv(envNoFreelistSync) != "" {
		defer storage.SetActiveNoFreelistSync(storage.SetActiveNoFreelistSync(true))
	}
	for _, batch := range []int{1, 64, 1024} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			s, _, err := storage.OpenDir(b.TempDir(), benchID, storage.DirOptions{})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			payload := make([]byte, 128)
			es := make([]protocol.Entry, batch)
			for i := range es {
				es[i] = protocol.Entry{Epoch: 1, Type: protocol.EntryData, Data: payload}
			}
			lat := make([]time.Duration, 0, b.N)
			w0 := writeBytes(b)
			start := time.Now()
			for b.Loop() {
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
			written := writeBytes(b) - w0
			n := len(lat)
			slices.Sort(lat)
			b.ReportMetric(float64(n*batch)/elapsed.Seconds(), "entries/s")
			b.ReportMetric(float64(written)/float64(n*batch*128), "wamp")
			b.ReportMetric(float64(lat[n/2].Microseconds()), "p50-µs")
		})
	}
}
