package faults

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// compactNodeArgs are the node flags of the compaction runs: the default
// log compacted (the KV's Puts and Deletes carry a key) with a lag of a
// second (so the dedup window too), passes only on demand (POST
// /compact), throttled so that a pass over a few MB of 64 KiB segments
// rewrites for seconds, and tombstones kept (the KV's creates and
// updates depend on them, R105).
func compactNodeArgs() []string {
	return []string{"-segment-bytes", "64KiB", "-compact", "-compact-lag", "1s", "-dedup-window", "1s",
		"-compact-every", "1h", "-compact-rate", "1MiB", "-compact-tombstones", "-1ns"}
}

// compactCounters is a node's /compact answer.
type compactCounters struct {
	Passes         uint64 `json:"passes"`
	Segments       uint64 `json:"segments"`
	EntriesRemoved uint64 `json:"entries_removed"`
}

// postCompact runs a compaction pass on n (POST /compact) and returns its
// counters once the pass is done.
func postCompact(ctx context.Context, c *Cluster, n *Node) (compactCounters, error) {
	var cc compactCounters
	err := c.callJSON(ctx, n, http.MethodPost, "/compact", &cc)
	return cc, err
}

// compactingFiles counts the segment rewrites in n's directory
// (replog-<base>.seg.compact: storage's CompactSegment writes one, syncs
// it and renames it over the segment; a crash leaves it, and the store
// removes it at open).
func compactingFiles(n *Node) int {
	ents, err := os.ReadDir(n.Dir)
	if err != nil {
		return 0
	}
	k := 0
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "replog-") && strings.HasSuffix(e.Name(), ".seg.compact") {
			k++
		}
	}
	return k
}

// rawEntry is one entry of a node's /entries, as stored.
type rawEntry struct {
	Epoch uint64
	Key   string
	Data  string
}

// rawLog reads n's whole committed log (from 0, to its HW): every entry
// at its offset, key and data as they are. A compacted offset is absent
// (readers never see its placeholder).
func rawLog(ctx context.Context, c *Cluster, n *Node) (map[uint64]rawEntry, error) {
	out := map[uint64]rawEntry{}
	last := int64(-1)
	err := c.entryLines(ctx, n, 0, false, func(e entryJSON) error {
		if int64(*e.Offset) <= last {
			return fmt.Errorf("offset %d after %d: not in order", *e.Offset, last)
		}
		last = int64(*e.Offset)
		out[*e.Offset] = rawEntry{Epoch: e.Epoch, Key: e.Key, Data: string(e.Data)}
		return nil
	})
	if !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: /entries: %w", n.ID, err)
	}
	return out, nil
}

// TestCompactionSurvivesSIGKILL: 3 voters whose default log is compacted
// (a lag of 1s, 64 KiB segments, passes on demand throttled to 1 MiB/s),
// KV writers over a small key space (48 keys: puts, deletes, creates and
// updates), a few MB of log; then, while the writers go on, a voter
// (each in turn, the leader too) is told to compact (POST /compact) and
// SIGKILLed once a segment's rewrite is in its directory, 6 times, and
// started again. After the writers stop and every node ran a whole pass:
// on every node each key's newest acknowledged put or delete is at its
// offset, or a later entry of the key is (the newest value of a key is
// never compacted away, R103), every acknowledged create and update (an
// entry without a key) is at its offset; no offset holds different
// entries on two nodes; the KV states are equal and what the
// acknowledged writes leave (CheckKV). Positive controls: most kills
// landed mid-pass (the request had not returned, and the rewrite file
// outlived the process), and the passes removed entries on every node
// (fewer entries read than acknowledged writes, and the final pass's
// counters).
func TestCompactionSurvivesSIGKILL(t *testing.T) {
	o := testRunOpts(t)
	o.nodeArgs = append(o.nodeArgs, compactNodeArgs()...)
	o.kvEntries = true
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	c, _, _ := startRunCluster(ctx, t, o)
	kh := &KVHistory{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			kvWriter(ctx, c, kh, i, 12, 1000, o.cfg.Seed, stop)
		}()
	}
	stopped := false
	stopWriters := func() {
		if !stopped {
			stopped = true
			close(stop)
			wg.Wait()
		}
	}
	defer stopWriters()
	// A few MB of log first: a pass rewrites sealed segments only, and
	// with the commit journal the newest 2 MiB may not be in one yet.
	const fill = 4000
	for {
		_, st, ok := c.LeaderStatus(ctx)
		if ok && st.HW >= fill {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the log did not reach %d entries: %+v", fill, st)
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(1500 * time.Millisecond) // past the lag

	const kills = 6
	midPass := 0
	for k := range kills {
		target := c.Voters()[k%len(c.Voters())]
		pctx, pcancel := context.WithCancel(ctx)
		passDone := make(chan error, 1)
		go func() {
			_, err := postCompact(pctx, c, target)
			passDone <- err
		}()
		deadline := time.Now().Add(30 * time.Second)
		returned := false
		for compactingFiles(target) == 0 && !returned && time.Now().Before(deadline) {
			select {
			case err := <-passDone:
				returned = true
				t.Logf("kill %d: %s's pass ended before a rewrite was seen (%v)", k+1, target.ID, err)
			case <-time.After(time.Millisecond):
			}
		}
		c.Kill(target)
		if !returned {
			// The kill breaks the request's connection: an answer
			// (no error) says the pass had ended before the signal.
			returned = <-passDone == nil
		}
		// The pass was under way when the signal landed only if its
		// request was not answered and a rewrite outlived the process
		// (a rewrite renamed into place in between is gone).
		rewriting := compactingFiles(target)
		landed := !returned && rewriting > 0
		if landed {
			midPass++
		}
		pcancel()
		t.Logf("kill %d of %s: mid-pass %t (rewrites left in its directory: %d; mid-pass kills so far %d)", k+1, target.ID, landed, rewriting, midPass)
		if err := c.Start(target); err != nil {
			t.Fatal(err)
		}
		if err := c.WaitReady(ctx, target); err != nil {
			t.Fatal(err)
		}
		if n := compactingFiles(target); n > 0 {
			t.Errorf("%s kept %d rewrites after its restart (the store removes them at open)", target.ID, n)
		}
		time.Sleep(1500 * time.Millisecond) // the writes go on; the node catches up
	}
	stopWriters()

	// Every node converges, then compacts all it can.
	states, err := waitKVAgree(ctx, c, 90*time.Second)
	if err != nil {
		t.Fatalf("the nodes' KV states do not agree: %v", err)
	}
	time.Sleep(1500 * time.Millisecond) // the newest writes past the lag
	removed := map[string]uint64{}
	var mu sync.Mutex
	var passes sync.WaitGroup
	for _, n := range c.Nodes {
		passes.Add(1)
		go func() {
			defer passes.Done()
			cc, err := postCompact(ctx, c, n)
			if err != nil {
				t.Errorf("the final pass on %s: %v", n.ID, err)
			}
			mu.Lock()
			removed[n.ID] = cc.EntriesRemoved
			mu.Unlock()
		}()
	}
	passes.Wait()
	if t.Failed() {
		t.FailNow()
	}
	ops := kh.Ops()
	counts := map[Outcome]int{}
	for _, op := range ops {
		counts[op.Outcome]++
	}
	logs := map[string]map[uint64]rawEntry{}
	for _, n := range c.Nodes {
		l, err := rawLog(ctx, c, n)
		if err != nil {
			t.Fatal(err)
		}
		logs[n.ID] = l
	}
	t.Logf("KV writes %v; final pass removed %v; entries read %v; mid-pass kills %d of %d", counts, removed,
		func() map[string]int {
			m := map[string]int{}
			for id, l := range logs {
				m[id] = len(l)
			}
			return m
		}(), midPass, kills)

	for _, id := range sortedKeys(states) {
		for _, bad := range CheckKV(ops, states[id].Entries) {
			t.Errorf("%s: %s", id, bad)
		}
	}
	// The log itself: each key's newest acknowledged put or delete, and
	// every acknowledged create and update, where they were written.
	newest := map[string]KVOp{}
	for _, op := range ops {
		if op.Outcome != OK {
			continue
		}
		if op.Kind == "put" || op.Kind == "delete" {
			if prev, ok := newest[op.Key]; !ok || op.Revision > prev.Revision {
				newest[op.Key] = op
			}
		}
	}
	for _, n := range c.Nodes {
		l := logs[n.ID]
		newestAt := map[string]uint64{} // the offset of each key's newest entry on n
		for off, e := range l {
			if e.Key != "" && off >= newestAt[e.Key] {
				newestAt[e.Key] = off
			}
		}
		for _, key := range sortedKeys(newest) {
			op := newest[key]
			at, ok := newestAt[kvKeyPrefix+key]
			switch {
			case !ok || at < op.Revision:
				t.Errorf("%s: key %q: newest entry at %d (present %t), want the acknowledged %s at %d or a later one", n.ID, key, at, ok, op.Kind, op.Revision)
			case l[op.Revision].Key != "" && l[op.Revision].Key != kvKeyPrefix+key:
				t.Errorf("%s: offset %d holds key %q, acknowledged as %s of %q", n.ID, op.Revision, l[op.Revision].Key, op.Kind, key)
			}
		}
		for _, op := range ops {
			if op.Outcome == OK && (op.Kind == "create" || op.Kind == "update") {
				if e, ok := l[op.Revision]; !ok || e.Key != "" {
					t.Errorf("%s: the acknowledged %s of %q at %d: %+v (present %t), want an entry without a key (never compacted)", n.ID, op.Kind, op.Key, op.Revision, e, ok)
				}
			}
		}
		if removed[n.ID] == 0 || len(l) >= counts[OK]+counts[Refused] {
			t.Errorf("%s: the final pass removed %d entries and %d remain of at least %d written: compaction removed nothing", n.ID, removed[n.ID], len(l), counts[OK]+counts[Refused])
		}
	}
	// No offset holds different entries on two nodes.
	ref := c.Nodes[0]
	for _, n := range c.Nodes[1:] {
		diffs := 0
		for off, e := range logs[ref.ID] {
			if f, ok := logs[n.ID][off]; ok && f != e {
				if diffs++; diffs <= 3 {
					t.Errorf("offset %d: %s holds %q (epoch %d, key %q), %s %q (epoch %d, key %q)", off,
						ref.ID, truncate(e.Data, 40), e.Epoch, e.Key, n.ID, truncate(f.Data, 40), f.Epoch, f.Key)
				}
			}
		}
		if diffs > 3 {
			t.Errorf("and %d more offsets differ between %s and %s", diffs-3, ref.ID, n.ID)
		}
	}
	if counts[OK] == 0 {
		t.Errorf("no KV write acknowledged: %v", counts)
	}
	if midPass < kills/2 {
		t.Errorf("only %d of %d kills landed during a pass's rewrite", midPass, kills)
	}
	if len(c.Crashes()) > 0 {
		t.Errorf("node processes exited on their own: %v", c.Crashes())
	}
}
