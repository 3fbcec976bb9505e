package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"github.com/replog-io/replog"
)

// snapshotResult is what the snapshot mode measured.
type snapshotResult struct {
	info replog.SnapshotInfo
	// save is how long the leader's SaveSnapshot took; install from the
	// observer's Open until it listed the shipped snapshot, ready until
	// its readable HW reached the leader's.
	save, install, ready time.Duration
}

// snapshotChunk is how much of the snapshot's body the mode writes at
// once: the body is streamed, never whole in memory.
const snapshotChunk = 1 << 20

// runSnapshot saves a snapshot of c.snapshotMB MB (pseudo-random bytes,
// which nothing compresses) on the leader at its readable HW, deletes the
// log below it, and starts an empty observer: it holds nothing the
// leader still has, so the leader ships it the snapshot (R92) in
// FetchMaxBytes chunks. It prints the save's rate, the time until the
// observer installed the snapshot and the transfer's rate over that
// time, and the time until the observer caught up.
func runSnapshot(c config, cl *cluster, leader *replog.Log, record []byte, w io.Writer) (*snapshotResult, error) {
	r := &snapshotResult{}
	for leader.Status().FeatureLevel < 9 {
		time.Sleep(20 * time.Millisecond) // shipping snapshots needs level 9
	}
	ctx, cancel := context.WithTimeout(context.Background(), catchupTimeout)
	defer cancel()
	if err := fill(leader, 1000, record); err != nil {
		return nil, fmt.Errorf("fill: %w", err)
	}
	if err := leader.Barrier(ctx); err != nil {
		return nil, err
	}
	at := leader.Status().ReadableHW
	size := int64(c.snapshotMB) << 20
	t0 := time.Now()
	info, err := leader.SaveSnapshot(ctx, at, func(sw io.Writer) error {
		rng := rand.New(rand.NewPCG(3, 4))
		buf := make([]byte, snapshotChunk)
		for left := size; left > 0; left -= int64(len(buf)) {
			for i := 0; i+8 <= len(buf); i += 8 {
				v := rng.Uint64()
				for b := range 8 {
					buf[i+b] = byte(v >> (8 * b))
				}
			}
			if _, err := sw.Write(buf[:min(int64(len(buf)), left)]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("saving the snapshot: %w", err)
	}
	r.info, r.save = info, time.Since(t0)
	fmt.Fprintf(w, "snapshot saved offset=%d size=%s in %v: %.1f MB/s\n", info.Offset, mib(info.Size), r.save.Round(time.Millisecond), float64(info.Size)/1e6/r.save.Seconds())
	ls, err := leader.DeleteBefore(ctx, at)
	if err != nil {
		return nil, fmt.Errorf("deleting below the snapshot: %w", err)
	}
	target := leader.Status().ReadableHW
	start := time.Now()
	obs, err := cl.startObserver(observerID)
	if err != nil {
		return nil, err
	}
	for {
		if s := obs.Snapshots(); len(s) > 0 && s[0].Offset >= info.Offset {
			r.install = time.Since(start)
			break
		}
		if st := obs.Status(); st.Error != "" {
			return nil, fmt.Errorf("%s failed: %s", st.NodeID, st.Error)
		}
		if time.Since(start) > catchupTimeout {
			return nil, fmt.Errorf("%s installed no snapshot in %v", observerID, catchupTimeout)
		}
		time.Sleep(time.Millisecond)
	}
	if err := waitReadable(obs, target, catchupTimeout); err != nil {
		return nil, err
	}
	r.ready = time.Since(start)
	fmt.Fprintf(w, "snapshot shipped to %s (empty; leader log start %d): installed in %v: %.1f MB/s; caught up to %d in %v\n",
		observerID, ls, r.install.Round(time.Millisecond), float64(info.Size)/1e6/r.install.Seconds(), target, r.ready.Round(time.Millisecond))
	return r, nil
}
