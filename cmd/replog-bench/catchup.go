package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/replog-io/replog"
)

// catchupTimeout bounds the fill and the observer's catch-up.
const catchupTimeout = 10 * time.Minute

// The fill appends its records from fillers goroutines in AppendBatch
// calls of about fillBatchBytes of records, at most fillBatchMax of them
// (a batch must fit one transport frame, 16 MiB with each record's
// overhead): it only has to be quick.
const (
	fillers        = 4
	fillBatchBytes = 1 << 20
	fillBatchMax   = 4096
)

// catchupResult is what the catch-up mode measured.
type catchupResult struct {
	// records were appended in fill before anything else.
	records int
	fill    time.Duration
	// before is the load for -duration before the observer starts;
	// during the same load while it catches up (both empty with
	// -clients 0).
	before, during loadResult
	// from and target are the leader's log start and readable HW when the
	// observer starts; reached is the observer's readable HW when it had
	// target, elapsed after its Open was called.
	from, target, reached uint64
	elapsed               time.Duration
	// disk is the observer's data directory then.
	disk int64
}

// runCatchup fills the log with c.catchup records, runs the load for
// c.duration, then starts an empty observer under the same load and waits
// until its readable HW reaches the leader's readable HW at its start.
func runCatchup(c config, cl *cluster, leader *replog.Log, record []byte, w io.Writer) (*catchupResult, error) {
	r := &catchupResult{records: c.catchup}
	t0 := time.Now()
	if err := fill(leader, c.catchup, record); err != nil {
		return nil, fmt.Errorf("fill: %w", err)
	}
	r.fill = time.Since(t0)
	fmt.Fprintf(w, "fill records=%d in %v: %.0f records/s %.2f MB/s\n", r.records, r.fill.Round(time.Millisecond), float64(r.records)/r.fill.Seconds(), float64(r.records*len(record))/1e6/r.fill.Seconds())

	if c.clients > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), c.duration)
		r.before = runLoad(ctx, c, cl.logs, leader, record)
		cancel()
		if len(r.before.lat) == 0 {
			return nil, fmt.Errorf("no append committed (%d failed)", r.before.failed)
		}
		r.before.print(w, "before catch-up: ", c.size)
	}

	st := leader.Status()
	r.from, r.target = st.LogStart, st.ReadableHW
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	loaded := make(chan loadResult, 1)
	if c.clients > 0 {
		go func() { loaded <- runLoad(ctx, c, cl.logs, leader, record) }()
	}
	start := time.Now()
	obs, err := cl.startObserver(observerID)
	if err == nil {
		err = waitReadable(obs, r.target, catchupTimeout)
		r.elapsed = time.Since(start)
		r.reached = obs.Status().ReadableHW
	}
	cancel()
	if c.clients > 0 {
		r.during = <-loaded
	}
	if err != nil {
		return nil, err
	}
	r.disk = measureDir(cl.dir(observerID)).Size
	n := r.reached - r.from
	secs := r.elapsed.Seconds()
	fmt.Fprintf(w, "catch-up %s: entries=%d (offsets %d to %d) in %v: %.0f entries/s %.2f MB/s of records; its directory %s (%.2f MB/s)\n",
		observerID, n, r.from, r.reached, r.elapsed.Round(time.Millisecond), float64(n)/secs, float64(n)*float64(len(record))/1e6/secs, mib(r.disk), float64(r.disk)/1e6/secs)
	if c.clients > 0 {
		r.during.print(w, "during catch-up: ", c.size)
	}
	ls := leader.Stats()
	fmt.Fprintf(w, "leader quota: throttled-fetches=%d throttled-time=%v catch-up-bytes=%s backlog-refusals=%d\n",
		ls.CatchUpThrottledFetches, ls.CatchUpThrottledTime.Round(time.Millisecond), mib(int64(ls.CatchUpBytes)), ls.BacklogRefusals)
	return r, nil
}

// fill appends n copies of record to l.
func fill(l *replog.Log, n int, record []byte) error {
	if n == 0 {
		return nil
	}
	per := max(1, min(n, fillBatchMax, fillBatchBytes/max(1, len(record))))
	batch := make([][]byte, per)
	for i := range batch {
		batch[i] = record // AppendBatch copies: sharing one is fine
	}
	ctx, cancel := context.WithTimeout(context.Background(), catchupTimeout)
	defer cancel()
	var claimed atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, fillers)
	for f := range fillers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				k := int(claimed.Add(int64(per))) - per
				if k >= n || ctx.Err() != nil {
					return
				}
				if _, err := l.AppendBatch(ctx, batch[:min(per, n-k)]); err != nil {
					errs[f] = err
					cancel()
					return
				}
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// waitReadable waits until l's readable HW reaches hw.
func waitReadable(l *replog.Log, hw uint64, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		st := l.Status()
		if st.ReadableHW >= hw {
			return nil
		}
		if st.Error != "" {
			return fmt.Errorf("%s failed: %s", st.NodeID, st.Error)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s reached %d of %d in %v", st.NodeID, st.ReadableHW, hw, timeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
