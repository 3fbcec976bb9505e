package replog

import (
	"context"
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/storage"
)

// compactionTest sets the knobs a compaction test needs: small key
// checkpoints (a pass stops at the newest one).
func compactionTest(t *testing.T) {
	t.Helper()
	old := keyCheckpointBytes
	keyCheckpointBytes = 8 << 10
	t.Cleanup(func() { keyCheckpointBytes = old })
}

// keyedWorkload appends n entries on l: most are updates of one of keys
// keys (value "k<key>=<i>" and padding) or, in the first half, of a
// quarter as many cold keys, every seventh has no key, every thirteenth is
// a tombstone. It returns, per key, the offset and value of its newest
// entry, and every unkeyed entry's offset and data.
func keyedWorkload(t *testing.T, ctx context.Context, l *Log, rng *rand.Rand, n, keys int) (newest map[string]Entry, plain map[uint64]string) {
	t.Helper()
	newest, plain = map[string]Entry{}, map[uint64]string{}
	for i := range n {
		k := fmt.Sprintf("key-%d", rng.Intn(keys))
		if i < n/2 && rng.Intn(5) == 0 {
			// Cold keys, updated in the first half only: their newest
			// entries lie below the compaction point.
			k = fmt.Sprintf("cold-%d", rng.Intn(keys/4+1))
		}
		var data []byte
		opts := []AppendOption{WithKey(k)}
		switch {
		case i%7 == 3:
			data, opts = fmt.Appendf(nil, "plain-%d", i), nil
		case i%13 == 5:
			data = nil // a tombstone
		default:
			// Padded: the commit journal moves writes into segments
			// once a quarter of it (2 MiB) is full.
			data = fmt.Appendf(nil, "%s=%d %01500d", k, i, i)
		}
		off, err := l.Append(ctx, data, opts...)
		if err != nil {
			t.Fatal(err)
		}
		if opts == nil {
			plain[off] = string(data)
		} else {
			newest[k] = Entry{Offset: off, Data: data, Key: k}
		}
	}
	return newest, plain
}

// readAllEntries reads l's committed entries from offset 0 to its readable HW.
func readAllEntries(t *testing.T, l *Log) []Entry {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out []Entry
	for e, err := range l.ReadRange(ctx, 0, l.Status().ReadableHW) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

// checkCompactedLog checks R103's guarantees on what a reader from 0 sees
// of l: offsets increase; every unkeyed entry is there; every key's newest
// entry is there at its offset (a tombstone too, unless it is below
// gonePoint, when the key is not there at all).
func checkCompactedLog(t *testing.T, when string, l *Log, newest map[string]Entry, plain map[uint64]string, gonePoint uint64) (seen int) {
	t.Helper()
	got := readAllEntries(t, l)
	at := map[uint64]Entry{}
	var last uint64
	for i, e := range got {
		if i > 0 && e.Offset <= last {
			t.Fatalf("%s: offsets out of order: %d after %d", when, e.Offset, last)
		}
		last = e.Offset
		at[e.Offset] = e
	}
	for off, d := range plain {
		if e, ok := at[off]; !ok || string(e.Data) != d || e.Key != "" {
			t.Fatalf("%s: unkeyed entry %d (%q) is %+v, %v", when, off, d, e, ok)
		}
	}
	for k, w := range newest {
		e, ok := at[w.Offset]
		if w.Offset < gonePoint && len(w.Data) == 0 {
			if ok {
				t.Fatalf("%s: tombstone of %s at %d outlived its retention", when, k, w.Offset)
			}
			for _, e := range got {
				if e.Key == k {
					t.Fatalf("%s: deleted key %s still has entry %d", when, k, e.Offset)
				}
			}
			continue
		}
		if !ok || e.Key != k || string(e.Data) != string(w.Data) {
			t.Fatalf("%s: the newest entry of %s (offset %d, %q) reads %+v, %v", when, k, w.Offset, w.Data, e, ok)
		}
	}
	return len(got)
}

// TestCompactionKeepsNewestPerKey (R103, R104): a pass on a node whose log
// holds 4000 updates over 40 keys (and cold keys updated only early on),
// with unkeyed entries and tombstones,
// leaves a reader from 0 every unkeyed entry and every key's newest entry
// at its offset, in order, and fewer entries than before; nothing moves
// within the lag; the active segment keeps everything; a cursor and a
// WithID duplicate still work after the pass and a restart; past the
// tombstones' retention the deleted keys are gone.
func TestCompactionKeepsNewestPerKey(t *testing.T) {
	compactionTest(t)
	dir := t.TempDir()
	o := Options{Dir: dir, SegmentBytes: 256 << 10, Compaction: Compaction{Enabled: true, Interval: time.Hour}}
	l := openSingle(t, o)
	waitFor(t, "level 10", 10*time.Second, func() bool { return l.Status().FeatureLevel >= protocol.FeatureLevelKeys })
	ctx, cancel := appendCtx(t)
	defer cancel()
	idOff, err := l.Append(ctx, []byte("once"), WithID("order-1"), WithKey("order"))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.CommitCursor(ctx, "reader", 17); err != nil {
		t.Fatal(err)
	}
	newest, plain := keyedWorkload(t, ctx, l, rand.New(rand.NewSource(1)), 4000, 40)
	cs := l.store.(compactor)
	c := l.opts.Compaction.withDefaults()
	before := len(readAllEntries(t, l))

	l.compactOnce(cs, c, time.Now()) // everything is within the lag
	if st := l.Stats(); st.CompactionEntriesRemoved != 0 {
		t.Fatalf("a pass within the lag removed %d entries", st.CompactionEntriesRemoved)
	}
	l.compactOnce(cs, c, time.Now().Add(2*time.Hour))
	st := l.Stats()
	if st.CompactionEntriesRemoved == 0 || st.CompactionSegments == 0 || st.CompactionPasses == 0 {
		t.Fatalf("the pass removed nothing: %+v", st)
	}
	after := checkCompactedLog(t, "after a pass", l, newest, plain, 0)
	cold := 0
	for _, w := range newest {
		if w.Offset < st.CompactionPoint {
			cold++
		}
	}
	if cold == 0 {
		t.Fatalf("no key's newest entry below the point %d: the check proves nothing", st.CompactionPoint)
	}
	if after >= before {
		t.Fatalf("%d entries before the pass, %d after", before, after)
	}
	// The active segment: every entry still there.
	segs := l.store.(segmentLister).Segments()
	act := segs[len(segs)-1]
	es, err := l.store.Entries(act.Base, int(act.End-act.Base), 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		if e.Type == protocol.EntryHole {
			t.Fatalf("the active segment [%d, %d) has a hole at %d", act.Base, act.End, e.Offset)
		}
	}
	if next, err := l.Cursor(ctx, "reader"); err != nil || next != 17 {
		t.Fatalf("Cursor after the pass: %d, %v", next, err)
	}
	if off, err := l.Append(ctx, []byte("once"), WithID("order-1"), WithKey("order")); err == nil || off != idOff {
		t.Fatalf("the duplicate after the pass: %d, %v; want ErrDuplicate at %d", off, err, idOff)
	}

	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openSingle(t, o)
	checkCompactedLog(t, "after a restart", l, newest, plain, 0)
	if next, err := l.Cursor(ctx, "reader"); err != nil || next != 17 {
		t.Fatalf("Cursor after a restart: %d, %v", next, err)
	}
	l.compactOnce(l.store.(compactor), c, time.Now().Add(30*time.Hour))
	point := l.Stats().CompactionPoint
	gone := 0
	for _, w := range newest {
		if len(w.Data) == 0 && w.Offset < point {
			gone++
		}
	}
	if gone == 0 {
		t.Fatalf("no tombstone below the point %d: the check proves nothing", point)
	}
	checkCompactedLog(t, "past the tombstones' retention", l, newest, plain, point)
	if _, ok := l.store.(storage.KeyCheckpointStore); !ok {
		t.Fatal("the store keeps no key checkpoint")
	}
}

// TestCompactionFollowerCatchesUpAcrossHoles (R103, R104): a follower
// stopped before a workload comes back after its leader compacted the
// log and catches up across the holes (fetching a placeholder for each
// removed offset): its LEO reaches the leader's and a reader from 0 sees
// on it exactly what it sees on the leader, and still after its own pass.
// The leader is stopped: the other two elect a
// leader, take more appends, and agree entry for entry.
func TestCompactionFollowerCatchesUpAcrossHoles(t *testing.T) {
	compactionTest(t)
	c := newCluster(t, 3, func(_ string, o *Options) {
		o.SegmentBytes = 256 << 10
		o.Compaction = Compaction{Enabled: true, Interval: time.Hour}
	})
	leader := c.leader(15 * time.Second)
	waitLevel(t, c, protocol.FeatureLevelKeys)
	var late string
	for id := range c.nodes {
		if id != leader {
			late = id
			break
		}
	}
	if err := c.nodes[late].Close(); err != nil {
		t.Fatal(err)
	}
	delete(c.nodes, late)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ld := c.nodes[leader]
	newest, plain := keyedWorkload(t, ctx, ld, rand.New(rand.NewSource(2)), 4000, 40)
	ld.compactOnce(ld.store.(compactor), ld.opts.Compaction.withDefaults(), time.Now().Add(2*time.Hour))
	if n := ld.Stats().CompactionEntriesRemoved; n == 0 {
		t.Fatal("the leader's pass removed nothing")
	}
	want := readAllEntries(t, ld)

	fl := c.restart(late)
	waitFor(t, "the late follower caught up", 30*time.Second, func() bool {
		return fl.Status().ReadableHW >= ld.Status().HighWatermark && fl.Status().LEO == ld.Status().LEO
	})
	sameEntries(t, "the follower after catching up", readAllEntries(t, fl)[:len(want)], want)
	holes := 0
	if es, err := fl.store.Entries(0, 4096, 1<<30); err == nil {
		for _, e := range es {
			if e.Type == protocol.EntryHole {
				holes++
			}
		}
	}
	if holes == 0 {
		t.Fatal("the follower stored no placeholder: it did not fetch across holes")
	}
	checkCompactedLog(t, "the follower", fl, newest, plain, 0)
	// Its own pass (what it holds is mostly still in its commit journal,
	// so it may find no sealed segment to rewrite) changes nothing a
	// reader sees.
	fl.compactOnce(fl.store.(compactor), fl.opts.Compaction.withDefaults(), time.Now().Add(2*time.Hour))
	sameEntries(t, "the follower after its own pass", readAllEntries(t, fl)[:len(want)], want)

	if err := ld.Close(); err != nil {
		t.Fatal(err)
	}
	delete(c.nodes, leader)
	next := c.leader(20 * time.Second)
	for i := range 20 {
		if _, err := c.nodes[next].Append(ctx, fmt.Appendf(nil, "after-%d", i), WithKey("after")); err != nil {
			t.Fatal(err)
		}
	}
	// Each node compacted what it did (the one that never stopped holds
	// every entry); where both hold an offset they hold the same entry,
	// and both show every key's newest value and the new appends.
	hw := c.nodes[next].Status().HighWatermark
	byOffset := map[uint64]Entry{}
	for id, l := range c.nodes {
		waitFor(t, "the appends everywhere", 20*time.Second, func() bool { return l.Status().ReadableHW >= hw })
		checkCompactedLog(t, "after the fail-over on "+id, l, newest, plain, 0)
		afters := 0
		for _, e := range readAllEntries(t, l) {
			if o, ok := byOffset[e.Offset]; ok && (o.Epoch != e.Epoch || o.Key != e.Key || string(o.Data) != string(e.Data)) {
				t.Fatalf("%s: offset %d is %d/%q, the other node has %d/%q", id, e.Offset, e.Epoch, e.Key, o.Epoch, o.Key)
			}
			byOffset[e.Offset] = e
			if e.Key == "after" {
				afters++
			}
		}
		if afters != 20 {
			t.Fatalf("%s: %d of the 20 appends after the fail-over", id, afters)
		}
	}
}

// sameEntries fails unless got and want hold the same entries.
func sameEntries(t *testing.T, when string, got, want []Entry) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d entries, want %d", when, len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Offset != w.Offset || g.Epoch != w.Epoch || g.Key != w.Key || string(g.Data) != string(w.Data) {
			t.Fatalf("%s: entry %d is %d/%d/%q, want %d/%d/%q", when, i, g.Offset, g.Epoch, g.Key, w.Offset, w.Epoch, w.Key)
		}
	}
}
