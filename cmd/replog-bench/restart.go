package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/replog-io/replog"
	"github.com/replog-io/replog/storage"
)

// restartResult is what the restart mode measured.
type restartResult struct {
	records int
	// open: every node's Open, one after the other; leader: from the
	// first Open until a leader was elected; commit: the first append's
	// latency (from its call, once there was a leader); total: from the
	// first Open until that append committed.
	open, leader, commit, total time.Duration
	// readAtCommit, readLater: the process's disk reads (read_bytes)
	// since the restart, when the first append committed and restartSettle
	// later; cachedAtCommit, cachedLater: the data directories' resident
	// file pages then.
	readAtCommit, readLater, cachedAtCommit, cachedLater int64
}

// restartSettle is how long after the first commit the restart mode
// measures the reads and cached pages again: what the nodes go on reading
// once the commit is done (a rebuild of the key table, a verification).
const restartSettle = 3 * time.Second

// runRestart fills a new cluster's log with c.restart records, closes
// every node, drops the directories' cached pages, and opens them again:
// it times the Opens, the election and the first append, and measures
// what the restart read.
func runRestart(c config, root string, record []byte, w io.Writer) (*restartResult, error) {
	r := &restartResult{records: c.restart}
	cl, err := startCluster(c, root, nil)
	if err != nil {
		return nil, err
	}
	leader, err := waitLeader(cl.logs, 30*time.Second)
	if err == nil {
		t0 := time.Now()
		err = fill(leader, c.restart, record)
		d := time.Since(t0)
		fmt.Fprintf(w, "fill records=%d in %v: %.0f records/s\n", c.restart, d.Round(time.Millisecond), float64(c.restart)/d.Seconds())
	}
	if err == nil {
		// Every node holds the whole log before the restart, so that no
		// follower catches up after it.
		err = waitReadableAll(cl.logs, leader.Status().ReadableHW, catchupTimeout)
	}
	cl.close()
	if err != nil {
		return nil, err
	}
	runtime.GC()
	if err := dropDirCache(root); err != nil {
		return nil, fmt.Errorf("dropping the cached pages: %w", err)
	}
	fmt.Fprintf(w, "closed; cached pages of the directories before the restart: %s; key checkpoint files:", mib(residentBytes(root)))
	for _, id := range cl.voters {
		fi, err := os.Stat(filepath.Join(cl.dir(id), storage.KeyCheckpointFileName))
		if err != nil {
			fmt.Fprintf(w, " %s none", id)
			continue
		}
		fmt.Fprintf(w, " %s %dB", id, fi.Size())
	}
	fmt.Fprintln(w)

	read0 := readBytes()
	start := time.Now()
	cl, err = startCluster(c, root, nil)
	if err != nil {
		return nil, err
	}
	defer cl.close()
	r.open = time.Since(start)
	leader, err = waitLeader(cl.logs, 30*time.Second)
	if err != nil {
		return nil, err
	}
	r.leader = time.Since(start)
	ctx, cancel := context.WithTimeout(context.Background(), catchupTimeout)
	defer cancel()
	t0 := time.Now()
	if _, err := leader.Append(ctx, record); err != nil {
		return nil, fmt.Errorf("first append after the restart: %w", err)
	}
	r.commit, r.total = time.Since(t0), time.Since(start)
	r.readAtCommit, r.cachedAtCommit = readBytes()-read0, residentBytes(root)
	time.Sleep(restartSettle)
	r.readLater, r.cachedLater = readBytes()-read0, residentBytes(root)
	fmt.Fprintf(w, "restart records=%d: open=%v leader=%v first-commit=%v restart-to-commit=%v\n",
		r.records, r.open.Round(time.Microsecond), r.leader.Round(time.Microsecond), r.commit.Round(time.Microsecond), r.total.Round(time.Microsecond))
	fmt.Fprintf(w, "restart reads: at the first commit %s read, %s cached; %v later %s read, %s cached\n",
		mib(r.readAtCommit), mib(r.cachedAtCommit), restartSettle, mib(r.readLater), mib(r.cachedLater))
	return r, nil
}

// waitReadableAll waits until every log's readable HW reaches hw.
func waitReadableAll(logs []*replog.Log, hw uint64, timeout time.Duration) error {
	for _, l := range logs {
		if err := waitReadable(l, hw, timeout); err != nil {
			return err
		}
	}
	return nil
}
