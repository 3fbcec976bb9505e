package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/replog-io/replog"
)

func main() {
	var (
		nodes    = flag.Int("nodes", 3, "number of voters")
		clients  = flag.Int("clients", 1, "concurrent appenders")
		size     = flag.Int("size", 128, "record size in bytes")
		duration = flag.Duration("duration", 10*time.Second, "how long to append")
		dir      = flag.String("dir", "", "data directory (default: a temporary one, removed at the end)")
		nosync   = flag.Bool("nosync", false, "disable fsync (not what production does)")
		via      = flag.String("via", "leader", "where appenders send: leader or all (round robin, followers forward)")
		cpuprof  = flag.String("cpuprofile", "", "write a CPU profile of the run to this file")
		async    = flag.Int("async", 0, "appends each appender keeps in flight with AppendAsync (0: synchronous Append)")
	)
	flag.Parse()
	if *cpuprof != "" {
		f, err := os.Create(*cpuprof)
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
	if err := run(*nodes, *clients, *size, *duration, *dir, *nosync, *via, *async); err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "replog-bench:", err)
		os.Exit(1)
	}
}

func run(n, clients, size int, d time.Duration, dir string, nosync bool, via string, async int) error {
	if n < 1 || clients < 1 || size < 0 || d <= 0 || async < 0 {
		return errors.New("nodes, clients and duration must be positive, size and async non-negative")
	}
	if dir == "" {
		tmp, err := os.MkdirTemp("", "replog-bench")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	logs, err := startCluster(n, dir, nosync)
	if err != nil {
		return err
	}
	defer func() {
		for _, l := range logs {
			l.Close()
		}
	}()
	leader, err := waitLeader(logs, 30*time.Second)
	if err != nil {
		return err
	}

	record := make([]byte, size)
	for i := range record {
		record[i] = byte('a' + i%26)
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	lat := make([][]time.Duration, clients)
	errs := make([]int, clients)
	var wg sync.WaitGroup
	start := time.Now()
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if async > 0 {
				lat[c], errs[c] = appendAsync(ctx, logs, leader, c, via, record, async)
				return
			}
			target := leader
			for i := 0; ctx.Err() == nil; i++ {
				if via == "all" {
					target = logs[(c+i)%len(logs)]
				}
				t0 := time.Now()
				_, err := target.Append(ctx, record)
				if err != nil {
					if ctx.Err() == nil {
						errs[c]++
					}
					continue
				}
				lat[c] = append(lat[c], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)

	var all []time.Duration
	failed := 0
	for c := range clients {
		all = append(all, lat[c]...)
		failed += errs[c]
	}
	if len(all) == 0 {
		return fmt.Errorf("no append committed (%d failed)", failed)
	}
	slices.Sort(all)
	pct := func(p float64) time.Duration { return all[min(len(all)-1, int(float64(len(all))*p))] }
	ops := float64(len(all)) / elapsed.Seconds()
	fmt.Printf("nodes=%d clients=%d async=%d size=%dB fsync=%t via=%s duration=%v\n", n, clients, async, size, !nosync, via, elapsed.Round(time.Millisecond))
	fmt.Printf("appends=%d failed=%d ops/s=%.0f MB/s=%.2f\n", len(all), failed, ops, ops*float64(size)/1e6)
	fmt.Printf("latency p50=%v p99=%v max=%v\n", pct(0.50).Round(time.Microsecond), pct(0.99).Round(time.Microsecond), all[len(all)-1].Round(time.Microsecond))
	fmt.Printf("peak RSS=%s\n", peakRSS())
	return nil
}

// appendAsync is one appender of -async window: it keeps window appends
// in flight with AppendAsync, taking the oldest outcome whenever the
// window is full, until ctx ends. It returns the latencies (from the call
// to when the appender took the outcome: for an append that completed
// while an older one was awaited, an upper bound) and the number of
// appends that failed before the end.
func appendAsync(ctx context.Context, logs []*replog.Log, leader *replog.Log, c int, via string, record []byte, window int) ([]time.Duration, int) {
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
		t0 := time.Now()
		ring[next%window] = pending{target.AppendAsync(ctx, record), t0}
	}
	for ; oldest < next; oldest++ {
		take(ring[oldest%window])
	}
	return lat, failed
}

// startCluster opens n voters with static peers on ports picked up front,
// authenticated by a random secret (as production would be: the handshake
// is part of what a new connection costs).
func startCluster(n int, dir string, nosync bool) ([]*replog.Log, error) {
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return nil, err
	}
	ids := make([]string, n)
	peers := map[string]string{}
	for i := range n {
		ids[i] = fmt.Sprintf("n%d", i+1)
		addr, err := freeAddr()
		if err != nil {
			return nil, err
		}
		peers[ids[i]] = addr
	}
	var logs []*replog.Log
	for _, id := range ids {
		o := replog.Options{
			Dir:     fmt.Sprintf("%s/%s", dir, id),
			NodeID:  id,
			Voters:  ids,
			RPCAddr: peers[id],
			Peers:   peers,
			NoSync:  nosync,
			Secret:  secret,
		}
		if n == 1 {
			o.RPCAddr, o.Peers, o.Secret = "", nil, nil
		}
		l, err := replog.Open(o)
		if err != nil {
			for _, l := range logs {
				l.Close()
			}
			return nil, fmt.Errorf("open %s: %w", id, err)
		}
		logs = append(logs, l)
	}
	return logs, nil
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
func peakRSS() string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}
