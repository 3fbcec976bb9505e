package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"github.com/replog-io/replog"
)

// compactWindow is how many keyed appends the compaction mode's fill
// keeps in flight (AppendAsync).
const compactWindow = 2048

// compactResult is what the compaction mode measured.
type compactResult struct {
	before, during        loadResult
	diskBefore, diskAfter diskUsage
	pass, second          time.Duration
	stats                 replog.Stats
}

// runCompact appends c.compactUpdates records, each with the key of one of
// c.compactKeys keys at random (replog.WithKey), runs the load for
// c.duration, then runs a compaction pass on the leader (Log.Compact)
// under the same load, and prints the leader's disk before and after, the
// pass's duration and rate (entry bytes read per second) and the append
// latencies before and during it; then a second pass (what it read and
// how long it took).
func runCompact(c config, cl *cluster, leader *replog.Log, record []byte, w io.Writer) (*compactResult, error) {
	r := &compactResult{}
	for leader.Status().FeatureLevel < replog.FeatureLevelKeys {
		time.Sleep(20 * time.Millisecond) // keys need level 10
	}
	ctx, cancel := context.WithTimeout(context.Background(), catchupTimeout)
	defer cancel()
	t0 := time.Now()
	rng := rand.New(rand.NewPCG(1, 2))
	inflight := make([]*replog.AppendResult, 0, compactWindow)
	for range c.compactUpdates {
		if len(inflight) == compactWindow {
			for _, a := range inflight {
				if _, err := a.Wait(ctx); err != nil {
					return nil, fmt.Errorf("fill: %w", err)
				}
			}
			inflight = inflight[:0]
		}
		key := fmt.Sprintf("key-%d", rng.IntN(c.compactKeys))
		inflight = append(inflight, leader.AppendAsync(ctx, record, replog.WithKey(key)))
	}
	for _, a := range inflight {
		if _, err := a.Wait(ctx); err != nil {
			return nil, fmt.Errorf("fill: %w", err)
		}
	}
	fill := time.Since(t0)
	fmt.Fprintf(w, "fill updates=%d keys=%d in %v: %.0f updates/s\n", c.compactUpdates, c.compactKeys, fill.Round(time.Millisecond), float64(c.compactUpdates)/fill.Seconds())

	lctx, lcancel := context.WithTimeout(context.Background(), c.duration)
	r.before = runLoad(lctx, c, cl.logs, leader, record)
	lcancel()
	r.before.print(w, "before the pass ", c.size)

	dir := cl.dir(leader.Status().NodeID)
	r.diskBefore = measureDir(dir)
	done := make(chan error, 1)
	lctx, lcancel = context.WithCancel(context.Background())
	t1 := time.Now()
	go func() {
		err := leader.Compact()
		r.pass = time.Since(t1)
		lcancel()
		done <- err
	}()
	r.during = runLoad(lctx, c, cl.logs, leader, record)
	if err := <-done; err != nil {
		return nil, err
	}
	r.during.print(w, "during the pass ", c.size)
	r.diskAfter = measureDir(dir)
	r.stats = leader.Stats()
	s := r.stats
	fmt.Fprintf(w, "compaction pass=%v segments=%d removed=%d read=%.1fMB rate=%.1fMB/s freed=%.1fMB point=%d of leo=%d\n",
		r.pass.Round(time.Millisecond), s.CompactionSegments, s.CompactionEntriesRemoved, float64(s.CompactionBytesRead)/1e6,
		float64(s.CompactionBytesRead)/1e6/max(r.pass.Seconds(), 1e-9), float64(s.CompactionBytesFreed)/1e6, s.CompactionPoint, s.LEO)
	fmt.Fprintf(w, "compaction disk before=%s after=%s (leader %s)\n", mib(r.diskBefore.Size), mib(r.diskAfter.Size), dir)
	// A second pass over what the first left (and the load's appends):
	// the cleaner checkpoint lets it read only what changed.
	t2 := time.Now()
	if err := leader.Compact(); err != nil {
		return nil, err
	}
	r.second = time.Since(t2)
	s2 := leader.Stats()
	fmt.Fprintf(w, "compaction second pass=%v segments=%d removed=%d read=%.1fMB point=%d\n",
		r.second.Round(time.Millisecond), s2.CompactionSegments-s.CompactionSegments, s2.CompactionEntriesRemoved-s.CompactionEntriesRemoved,
		float64(s2.CompactionBytesRead-s.CompactionBytesRead)/1e6, s2.CompactionPoint)
	return r, nil
}
