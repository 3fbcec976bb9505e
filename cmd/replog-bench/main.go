package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/replog-io/replog"
)

func main() {
	c, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "replog-bench:", err)
		os.Exit(2)
	}
	if c.cpuprofile != "" {
		f, err := os.Create(c.cpuprofile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "replog-bench:", err)
			os.Exit(1)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "replog-bench:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	stopTrace := func() {}
	if c.trace != "" {
		f, err := os.Create(c.trace)
		if err != nil {
			fmt.Fprintln(os.Stderr, "replog-bench:", err)
			os.Exit(1)
		}
		if err := trace.Start(f); err != nil {
			fmt.Fprintln(os.Stderr, "replog-bench:", err)
			os.Exit(1)
		}
		stopTrace = func() {
			trace.Stop()
			_ = f.Close()
		}
	}
	_, err = run(c, os.Stdout)
	stopTrace()
	if err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "replog-bench:", err)
		os.Exit(1)
	}
	if c.memprofile != "" && c.idleLogs == 0 {
		if err := writeHeapProfile(c.memprofile); err != nil {
			fmt.Fprintln(os.Stderr, "replog-bench:", err)
			os.Exit(1)
		}
	}
}

// writeHeapProfile writes the heap profile, after a collection, to path.
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	runtime.GC()
	if err := pprof.WriteHeapProfile(f); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// observerID names the catch-up mode's empty replica.
const observerID = "obs"

// report is what a run measured (run prints it too).
type report struct {
	// load is the run's load; in the catch-up mode, the load before the
	// observer starts (none with -clients 0).
	load loadResult
	// catchup is the catch-up mode's figures; nil otherwise.
	catchup *catchupResult
	// restart is the restart mode's figures; nil otherwise.
	restart *restartResult
	// names are the nodes the disk sampler measured (the voters, then the
	// observer in the catch-up mode); diskMax and diskFinal their largest
	// and last measurements, logStart their log starts at the end.
	names     []string
	samples   int
	diskMax   []diskUsage
	diskFinal []diskUsage
	logStart  []uint64
}

func run(c config, w io.Writer) (report, error) {
	if err := c.validate(); err != nil {
		return report{}, err
	}
	dir := c.dir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "replog-bench")
		if err != nil {
			return report{}, err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	if ran, err := nodeMode(c, dir, w); ran {
		return report{}, err
	}
	if c.restart > 0 {
		record := make([]byte, c.size)
		for i := range record {
			record[i] = byte('a' + i%26)
		}
		fmt.Fprintf(w, "nodes=%d size=%dB fsync=%t idempotence=%t\n", c.nodes, c.size, !c.nosync, !c.noIdempotence)
		rs, err := runRestart(c, dir, record, w)
		if err != nil {
			return report{}, err
		}
		fmt.Fprintf(w, "peak RSS=%s\n", peakRSS())
		return report{restart: rs}, nil
	}
	var extra []string
	if c.catchup > 0 || c.snapshotMB > 0 {
		extra = []string{observerID}
	}
	cl, err := startCluster(c, dir, extra)
	if err != nil {
		return report{}, err
	}
	defer cl.close()
	leader, err := waitLeader(cl.logs, 30*time.Second)
	if err != nil {
		return report{}, err
	}

	rep := report{names: append(cl.voters, extra...)}
	dirs := make([]string, len(rep.names))
	for i, id := range rep.names {
		dirs[i] = cl.dir(id)
	}
	sampler := newDiskSampler(dirs)
	stopSampler := sampler.start(c.diskEvery)
	record := make([]byte, c.size)
	for i := range record {
		record[i] = byte('a' + i%26)
	}

	fmt.Fprintf(w, "nodes=%d clients=%d async=%d size=%dB fsync=%t via=%s duration=%v idempotence=%t ids=%t\n", c.nodes, c.clients, c.async, c.size, !c.nosync, c.via, c.duration, !c.noIdempotence, c.ids)
	if !c.nosync {
		// Measured before the load, in the nodes' directory: what a
		// 1-client commit cannot beat here.
		f, err := measureFloor(dir)
		if err != nil {
			stopSampler()
			return report{}, err
		}
		fmt.Fprintln(w, f)
	}
	fmt.Fprintf(w, "retention-bytes=%s retention-age=%v segment-bytes=%s disk-every=%v\n", orDefault(c.retentionBytes, "off"), c.retentionAge, orDefault(c.segmentBytes, "default"), c.diskEvery)
	if c.kvClients > 0 {
		if _, err := runKV(c, leader, w); err != nil {
			stopSampler()
			return report{}, err
		}
	} else if c.snapshotMB > 0 {
		if _, err := runSnapshot(c, cl, leader, record, w); err != nil {
			stopSampler()
			return report{}, err
		}
	} else if c.compactKeys > 0 {
		cr, err := runCompact(c, cl, leader, record, w)
		if err != nil {
			stopSampler()
			return report{}, err
		}
		rep.load = cr.during
	} else if c.catchup > 0 {
		cu, err := runCatchup(c, cl, leader, record, w)
		if err != nil {
			stopSampler()
			return report{}, err
		}
		rep.catchup, rep.load = cu, cu.before
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), c.duration)
		rep.load = runLoad(ctx, c, cl.logs, leader, record)
		cancel()
		if len(rep.load.lat) == 0 {
			stopSampler()
			return report{}, fmt.Errorf("no append committed (%d failed)", rep.load.failed)
		}
		rep.load.print(w, "", c.size)
	}
	stopSampler()
	rep.samples, rep.diskMax, rep.diskFinal = sampler.results()
	for _, id := range rep.names {
		rep.logStart = append(rep.logStart, cl.log(id).Status().LogStart)
	}
	rep.printDisk(w, c)
	for _, id := range rep.names {
		printStorage(w, id, cl.log(id).Stats())
	}
	fmt.Fprintf(w, "peak RSS=%s\n", peakRSS())
	return rep, nil
}

// printStorage prints node id's storage counters since it opened its
// directory: fsyncs per journal record show whether a group commit costs
// one fsync; journal waits whether the writes outran the checkpoints.
func printStorage(w io.Writer, id string, s replog.Stats) {
	perGroup := 0.0
	if s.StorageGroupCommits > 0 {
		perGroup = float64(s.StorageFsyncs) / float64(s.StorageGroupCommits)
	}
	fmt.Fprintf(w, "storage %s fsyncs=%d group-commits=%d fsyncs/group-commit=%.2f bolt-commits=%d journal-MB=%.1f journal-waits=%d checkpoints=%d checkpoint-time=%v\n",
		id, s.StorageFsyncs, s.StorageGroupCommits, perGroup, s.StorageCommits, float64(s.StorageJournalBytes)/1e6, s.StorageJournalWaits,
		s.StorageCheckpoints, s.StorageCheckpointTime.Round(time.Millisecond))
}

// printDisk prints the disk samples: per node the largest and the last
// size (ls and du), the files and the final log start, and whether the
// size stayed within -retention-bytes + 2 segments.
func (r report) printDisk(w io.Writer, c config) {
	bound := c.diskBound()
	if bound > 0 {
		fmt.Fprintf(w, "disk samples=%d bound=%s (retention-bytes + 2 segments)\n", r.samples, mib(bound))
	} else {
		fmt.Fprintf(w, "disk samples=%d bound=none (no -retention-bytes)\n", r.samples)
	}
	for i, id := range r.names {
		m, f := r.diskMax[i], r.diskFinal[i]
		line := fmt.Sprintf("disk %s max=%s final=%s du-max=%s du-final=%s files-max=%d log-start=%d", id, mib(m.Size), mib(f.Size), mib(m.Alloc), mib(f.Alloc), m.Files, r.logStart[i])
		if bound > 0 {
			line += fmt.Sprintf(" held=%t", m.Size <= bound)
		}
		fmt.Fprintln(w, line)
	}
	if bound > 0 {
		fmt.Fprintf(w, "disk bound held=%t\n", r.boundHeld(bound))
	}
}

// boundHeld reports whether no sample of any node exceeded bound.
func (r report) boundHeld(bound int64) bool {
	for _, m := range r.diskMax {
		if m.Size > bound {
			return false
		}
	}
	return true
}

// orDefault formats a byte flag, or names what 0 means.
func orDefault(n int64, zero string) string {
	if n == 0 {
		return zero
	}
	return mib(n)
}

// loadResult is what a load measured.
type loadResult struct {
	lat     []time.Duration // committed appends' latencies, sorted
	failed  int             // appends that failed before the load ended
	elapsed time.Duration
	// use is what the process spent over the load (every node's and the
	// clients' share): divided by the appends, costs that depend less on
	// the machine's other load than ops/s.
	use usage
}

// usage is the process's CPU time (user and system; 0 if unknown), its
// heap allocations (objects and bytes) and its collections, so far or
// over a load.
type usage struct {
	cpu                time.Duration
	allocs, bytes, gcs uint64
}

// usageMetrics are the runtime/metrics samples usageNow reads.
var usageMetrics = []string{"/gc/heap/allocs:objects", "/gc/heap/allocs:bytes", "/gc/cycles/total:gc-cycles"}

// usageNow reads the process's usage so far (runtime/metrics: no stop of
// the world, unlike runtime.ReadMemStats).
func usageNow() usage {
	ss := make([]metrics.Sample, len(usageMetrics))
	for i, name := range usageMetrics {
		ss[i].Name = name
	}
	metrics.Read(ss)
	u := usage{cpu: processCPU()}
	for i, p := range []*uint64{&u.allocs, &u.bytes, &u.gcs} {
		if ss[i].Value.Kind() == metrics.KindUint64 {
			*p = ss[i].Value.Uint64()
		}
	}
	return u
}

// since is the usage from u0 to u; no CPU time if u0's is unknown.
func (u usage) since(u0 usage) usage {
	d := usage{allocs: u.allocs - u0.allocs, bytes: u.bytes - u0.bytes, gcs: u.gcs - u0.gcs}
	if u0.cpu > 0 {
		d.cpu = u.cpu - u0.cpu
	}
	return d
}

// cpuPerOp is the process's CPU time per committed append, 0 if unknown.
func (r loadResult) cpuPerOp() time.Duration {
	if r.use.cpu <= 0 || len(r.lat) == 0 {
		return 0
	}
	return r.use.cpu / time.Duration(len(r.lat))
}

func (r loadResult) pct(p float64) time.Duration {
	if len(r.lat) == 0 {
		return 0
	}
	return r.lat[min(len(r.lat)-1, int(float64(len(r.lat))*p))]
}

func (r loadResult) max() time.Duration {
	if len(r.lat) == 0 {
		return 0
	}
	return r.lat[len(r.lat)-1]
}

func (r loadResult) opsPerSec() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return float64(len(r.lat)) / r.elapsed.Seconds()
}

// print writes the load's two lines, each after prefix.
func (r loadResult) print(w io.Writer, prefix string, size int) {
	ops := r.opsPerSec()
	fmt.Fprintf(w, "%sappends=%d failed=%d ops/s=%.0f MB/s=%.2f over %v\n", prefix, len(r.lat), r.failed, ops, ops*float64(size)/1e6, r.elapsed.Round(time.Millisecond))
	fmt.Fprintf(w, "%slatency p50=%v p99=%v max=%v\n", prefix, r.pct(0.50).Round(time.Microsecond), r.pct(0.99).Round(time.Microsecond), r.max().Round(time.Microsecond))
	if per := r.cpuPerOp(); per > 0 {
		n := float64(len(r.lat))
		fmt.Fprintf(w, "%scpu/append=%.1fµs allocs/append=%.0f B/append=%.0f (process CPU %v over the load: %.2f cores; %d GCs)\n", prefix,
			float64(per)/float64(time.Microsecond), float64(r.use.allocs)/n, float64(r.use.bytes)/n,
			r.use.cpu.Round(time.Millisecond), r.use.cpu.Seconds()/r.elapsed.Seconds(), r.use.gcs)
	}
}

// runLoad runs c.clients appenders (synchronous, or -async windows) until
// ctx ends.
func runLoad(ctx context.Context, c config, logs []*replog.Log, leader *replog.Log, record []byte) loadResult {
	return runClients(ctx, c.clients, func(i int) ([]time.Duration, int) {
		if c.async > 0 {
			return appendAsync(ctx, logs, leader, i, c.via, record, c.async, c.ids)
		}
		return timeOps(ctx, func(j int) error {
			target := leader
			if c.via == "all" {
				target = logs[(i+j)%len(logs)]
			}
			var opts []replog.AppendOption
			if c.ids {
				opts = append(opts, replog.WithID(fmt.Sprintf("c%d-%d", i, j)))
			}
			_, err := target.Append(ctx, record, opts...)
			return err
		})
	})
}

// runClients runs clients goroutines, client(i) for i = 0, 1, ..., and
// returns their latencies, sorted, their failures and how long they ran.
// Each client returns the latencies of its operations that succeeded and
// how many failed (not counting those its context ended).
func runClients(ctx context.Context, clients int, client func(i int) ([]time.Duration, int)) loadResult {
	lat := make([][]time.Duration, clients)
	errs := make([]int, clients)
	var wg sync.WaitGroup
	u0, start := usageNow(), time.Now()
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lat[i], errs[i] = client(i)
		}()
	}
	wg.Wait()
	r := loadResult{elapsed: time.Since(start), use: usageNow().since(u0)}
	for i := range clients {
		r.lat = append(r.lat, lat[i]...)
		r.failed += errs[i]
	}
	slices.Sort(r.lat)
	return r
}

// timeOps calls op(j) for j = 0, 1, ... one after another until ctx
// ends: the latencies of the calls that succeeded, and how many failed
// before ctx ended.
func timeOps(ctx context.Context, op func(j int) error) (lat []time.Duration, failed int) {
	for j := 0; ctx.Err() == nil; j++ {
		t0 := time.Now()
		if err := op(j); err != nil {
			if ctx.Err() == nil {
				failed++
			}
			continue
		}
		lat = append(lat, time.Since(t0))
	}
	return lat, failed
}

// appendAsync is one appender of -async window: it keeps window appends
// in flight with AppendAsync, taking the oldest outcome whenever the
// window is full, until ctx ends. It returns the latencies (from the call
// to when the appender took the outcome: for an append that completed
// while an older one was awaited, an upper bound) and the number of
// appends that failed before the end.
func appendAsync(ctx context.Context, logs []*replog.Log, leader *replog.Log, c int, via string, record []byte, window int, ids bool) ([]time.Duration, int) {
	type pending struct {
		r  *replog.AppendResult
		t0 time.Time
	}
	var lat []time.Duration
	failed := 0
	ring := make([]pending, window) // ring[i%window] for i in [oldest, next)
	oldest := 0
	take := func(p pending) {
		if _, err := p.r.Wait(context.Background()); err != nil {
			if ctx.Err() == nil {
				failed++
			}
			return
		}
		lat = append(lat, time.Since(p.t0))
	}
	target := leader
	next := 0
	for ; ctx.Err() == nil; next++ {
		if via == "all" {
			target = logs[(c+next)%len(logs)]
		}
		if next-oldest == window {
			take(ring[oldest%window])
			oldest++
		}
		var opts []replog.AppendOption
		if ids {
			opts = append(opts, replog.WithID(fmt.Sprintf("c%d-%d", c, next)))
		}
		t0 := time.Now()
		ring[next%window] = pending{target.AppendAsync(ctx, record, opts...), t0}
	}
	for ; oldest < next; oldest++ {
		take(ring[oldest%window])
	}
	return lat, failed
}

// cluster is the running nodes: the voters, and the observers started
// later (their addresses are reserved up front, so that every node knows
// them).
type cluster struct {
	cfg    config
	root   string
	voters []string
	peers  map[string]string
	secret []byte

	mu   sync.Mutex
	logs []*replog.Log // voters, in voters' order
	obs  map[string]*replog.Log
}

// startCluster opens c.nodes voters with static peers on ports picked up
// front, authenticated by a random secret (as production would be: the
// handshake is part of what a new connection costs). extra names nodes
// that will be started later as observers (startObserver); a single voter
// with none runs without a transport.
func startCluster(c config, root string, extra []string) (*cluster, error) {
	cl := &cluster{cfg: c, root: root, secret: make([]byte, 32), obs: map[string]*replog.Log{}}
	if _, err := rand.Read(cl.secret); err != nil {
		return nil, err
	}
	if c.nodes > 1 || len(extra) > 0 {
		cl.peers = map[string]string{}
	}
	for i := range c.nodes {
		cl.voters = append(cl.voters, fmt.Sprintf("n%d", i+1))
	}
	if cl.peers != nil {
		for _, id := range append(slices.Clone(cl.voters), extra...) {
			addr, err := freeAddr()
			if err != nil {
				return nil, err
			}
			cl.peers[id] = addr
		}
	}
	for _, id := range cl.voters {
		l, err := replog.Open(c.options(cl.dir(id), id, cl.voters, cl.peers, cl.secret))
		if err != nil {
			cl.close()
			return nil, fmt.Errorf("open %s: %w", id, err)
		}
		cl.logs = append(cl.logs, l)
	}
	if len(extra) == 0 {
		return cl, nil
	}
	// A brand-new cluster bootstraps only once every node it knows of
	// has answered (R60), and the voters must know the observers (a
	// leader answers a fetch over its own connection to the fetcher).
	// So each observer runs, empty, until a leader is elected, then
	// closes and loses its directory: startObserver opens it empty.
	var early []*replog.Log
	for _, id := range extra {
		l, err := replog.Open(c.options(cl.dir(id), id, cl.voters, cl.peers, cl.secret))
		if err != nil {
			cl.close()
			return nil, fmt.Errorf("open %s: %w", id, err)
		}
		early = append(early, l)
	}
	_, err := waitLeader(cl.logs, 30*time.Second)
	for i, l := range early {
		if cerr := l.Close(); cerr != nil && err == nil {
			err = cerr
		}
		if rerr := os.RemoveAll(cl.dir(extra[i])); rerr != nil && err == nil {
			err = rerr
		}
	}
	if err != nil {
		cl.close()
		return nil, err
	}
	return cl, nil
}

// dir is node id's data directory.
func (cl *cluster) dir(id string) string { return filepath.Join(cl.root, id) }

// startObserver opens observer id with an empty directory.
func (cl *cluster) startObserver(id string) (*replog.Log, error) {
	l, err := replog.Open(cl.cfg.options(cl.dir(id), id, cl.voters, cl.peers, cl.secret))
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", id, err)
	}
	cl.mu.Lock()
	cl.obs[id] = l
	cl.mu.Unlock()
	return l, nil
}

// log returns node id's Log.
func (cl *cluster) log(id string) *replog.Log {
	if i := slices.Index(cl.voters, id); i >= 0 {
		return cl.logs[i]
	}
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.obs[id]
}

func (cl *cluster) close() {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	for _, l := range cl.obs {
		l.Close()
	}
	for _, l := range cl.logs {
		l.Close()
	}
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func waitLeader(logs []*replog.Log, timeout time.Duration) (*replog.Log, error) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		for _, l := range logs {
			if l.Status().Role == replog.RoleLeader {
				return l, nil
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	return nil, errors.New("no leader elected")
}

// peakRSS reads VmHWM (the resident set's high-water mark) from
// /proc/self/status.
func peakRSS() string { return procStatus("VmHWM") }

// procStatus reads field key of /proc/self/status ("unknown" if none).
func procStatus(key string) string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}
