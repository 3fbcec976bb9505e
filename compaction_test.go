package replog

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
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
	c.MinDirtyRatio = -1 // every pass runs, as Compact's
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

// TestCompactionReadsOnlyWhatChanged (R103, docs/storage.md 13): after a
// full pass the store's cleaner checkpoint lets a second pass over the
// unchanged log read no sealed segment and rewrite none, and a background
// pass (Compaction.MinDirtyRatio) do nothing at all; once one key is
// updated past the point, the next pass reads the dirty part and the one
// clean segment holding that key's old newest entry, which goes (the
// positive control: a superseded entry never outlives a pass; teeth
// replog_bug_compact_skip_superseded), every key's newest staying; after
// a restart the checkpoint still holds (nothing read), and a torn one
// means a full pass, with the same log after it.
func TestCompactionReadsOnlyWhatChanged(t *testing.T) {
	compactionTest(t)
	dir := t.TempDir()
	o := Options{Dir: dir, SegmentBytes: 256 << 10, Compaction: Compaction{Enabled: true, Interval: time.Hour}}
	l := openSingle(t, o)
	waitFor(t, "level 10", 10*time.Second, func() bool { return l.Status().FeatureLevel >= protocol.FeatureLevelKeys })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute) // about 9000 appends, under -race on a busy machine
	defer cancel()
	newest, plain := keyedWorkload(t, ctx, l, rand.New(rand.NewSource(2)), 4000, 40)
	pad := func(n int) uint64 { // unkeyed entries: past the journal's and the active segment's share
		var last uint64
		for i := range n {
			data := fmt.Appendf(nil, "pad-%d %01500d", i, i)
			off, err := l.Append(ctx, data)
			if err != nil {
				t.Fatal(err)
			}
			plain[off], last = string(data), off
		}
		return last
	}
	// The whole workload below the first pass's point, so that later
	// passes' dirty parts hold only what the test appends.
	end := pad(1800)
	waitFor(t, "the workload in sealed segments below the pass's limit", 20*time.Second, func() bool {
		return passPoint(t, l) > end-2000
	})
	c := l.opts.Compaction.withDefaults()
	every := c
	every.MinDirtyRatio = -1
	later := time.Now().Add(2 * time.Hour)
	ds := l.store.(*storage.DirStore)

	l.compactOnce(ds, every, later)
	first := l.Stats()
	if first.CompactionSegments == 0 || first.CompactionEntriesRemoved == 0 {
		t.Fatalf("the first pass removed nothing: %+v", first)
	}
	ck, ok, err := ds.CleanerCheckpoint()
	if err != nil || !ok || ck.Point != first.CompactionPoint || len(ck.Segments) < 4 {
		t.Fatalf("cleaner checkpoint after the first pass: %+v, %v, %v (point %d)", ck.Point, ok, err, first.CompactionPoint)
	}
	checkCompactedLog(t, "after the first pass", l, newest, plain, 0)

	// A pass over the unchanged log: one whose point is the checkpoint's
	// (the journal's checkpoints and the key checkpoint may still move
	// the point just after the appends: such a pass has a dirty part).
	unchanged := func(when string) Stats {
		t.Helper()
		for try := 0; try < 20; try++ {
			ck, _, _ := ds.CleanerCheckpoint()
			before, reads := l.Stats(), ds.Stats().SealedReads
			l.compactOnce(ds, every, later)
			st := l.Stats()
			if st.CompactionPoint != ck.Point {
				continue
			}
			if d := ds.Stats().SealedReads - reads; d != 0 || st.CompactionBytesRead != before.CompactionBytesRead || st.CompactionSegments != before.CompactionSegments {
				t.Fatalf("%s: a pass over the unchanged log (point %d) read %d sealed segments, %d entry bytes, rewrote %d segments",
					when, ck.Point, d, st.CompactionBytesRead-before.CompactionBytesRead, st.CompactionSegments-before.CompactionSegments)
			}
			if st.CompactionPasses != before.CompactionPasses+1 {
				t.Fatalf("%s: the pass did not run: %d passes", when, st.CompactionPasses)
			}
			return st
		}
		t.Fatalf("%s: the point moved at each of 20 passes", when)
		return Stats{}
	}
	second := unchanged("after the first pass")
	ck, _, _ = ds.CleanerCheckpoint()
	l.compactOnce(ds, c, later) // the background's: nothing dirty
	if st := l.Stats(); st.CompactionPassesSkipped != 1 || st.CompactionPasses != second.CompactionPasses || st.CompactionPoint != second.CompactionPoint {
		t.Fatalf("a background pass over a clean log: %d skipped, %d passes", st.CompactionPassesSkipped, st.CompactionPasses)
	}

	// One key updated past the point: its old newest entry, in a clean
	// segment, is superseded.
	var hot string
	var old Entry
	for k, w := range newest {
		if len(w.Data) > 0 && w.Offset < ck.Point && (hot == "" || w.Offset < old.Offset) {
			hot, old = k, w
		}
	}
	for i := range 300 {
		data := fmt.Appendf(nil, "%s=again-%d %01500d", hot, i, i)
		off, err := l.Append(ctx, data, WithKey(hot))
		if err != nil {
			t.Fatal(err)
		}
		newest[hot] = Entry{Offset: off, Data: data, Key: hot}
	}
	pad(1800)
	waitFor(t, "the hot key's updates in sealed segments below the pass's limit", 20*time.Second, func() bool {
		return passPoint(t, l) > newest[hot].Offset
	})
	files := map[uint64]os.FileInfo{} // the clean segments' files
	var oldSeg uint64
	for _, sg := range ds.Segments() {
		if sg.End > ck.Point {
			break
		}
		fi, err := os.Stat(sg.Path)
		if err != nil {
			t.Fatal(err)
		}
		files[sg.Base] = fi
		if sg.Base <= old.Offset && old.Offset < sg.End {
			oldSeg = sg.Base
		}
	}
	reads := ds.Stats().SealedReads
	l.compactOnce(ds, every, later)
	third := l.Stats()
	ck2, _, _ := ds.CleanerCheckpoint()
	if ck2.Point <= ck.Point || newest[hot].Offset >= ck2.Point {
		t.Fatalf("the third pass's point %d (first %d, %s's newest %d): the check proves nothing", ck2.Point, ck.Point, hot, newest[hot].Offset)
	}
	dirtySegs, dirtyBytes := 0, int64(0)
	for _, sg := range ds.Segments() {
		if sg.Base >= ck.Point && sg.End <= ck2.Point {
			dirtySegs++
			dirtyBytes += sg.Bytes
		}
	}
	// Each dirty segment is read for its last entry's time (the lag), by
	// the plan (once, and once more by each read of 4 MiB that ends in it)
	// and by its rewrite; of the clean ones only the one holding hot's old
	// entry, once. The store's own reads (the verification of the newest
	// sealed files) get a slack of half the clean segments: reading them
	// all is more.
	if d, most := ds.Stats().SealedReads-reads, uint64(3*dirtySegs+2+len(files)/2)+uint64(dirtyBytes/(4<<20)); d == 0 || d > most {
		t.Fatalf("the pass after one key's updates read %d sealed segments, more than %d (%d dirty, %d clean)", d, most, dirtySegs, len(files))
	}
	for _, sg := range ds.Segments() {
		fi, ok := files[sg.Base]
		if !ok {
			continue
		}
		now, err := os.Stat(sg.Path)
		if err != nil {
			t.Fatal(err)
		}
		if rewritten := !os.SameFile(fi, now); rewritten != (sg.Base == oldSeg) {
			t.Fatalf("clean segment %d (hot's old entry at %d in %d) rewritten: %v", sg.Base, old.Offset, oldSeg, rewritten)
		}
	}
	if d := third.CompactionSegments - second.CompactionSegments; d > uint64(dirtySegs+1) {
		t.Fatalf("the pass rewrote %d segments (%d dirty)", d, dirtySegs)
	}
	got := readAllEntries(t, l)
	for _, e := range got {
		if e.Offset == old.Offset {
			t.Fatalf("%s's superseded entry at %d (in a clean segment) outlived the pass", hot, old.Offset)
		}
		if e.Key == hot && e.Offset < ck2.Point && e.Offset != newest[hot].Offset {
			t.Fatalf("%s's superseded entry at %d outlived the pass (newest %d, point %d)", hot, e.Offset, newest[hot].Offset, ck2.Point)
		}
	}
	checkCompactedLog(t, "after one key's updates", l, newest, plain, 0)

	ck2, _, _ = ds.CleanerCheckpoint()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openSingle(t, o)
	ds = l.store.(*storage.DirStore)
	if got, ok, err := ds.CleanerCheckpoint(); !ok || err != nil || !reflect.DeepEqual(got, ck2) {
		t.Fatalf("after a restart the cleaner checkpoint is point %d, %v, %v; before it point %d", got.Point, ok, err, ck2.Point)
	}
	unchanged("after a restart")
	ck2, _, _ = ds.CleanerCheckpoint()
	checkCompactedLog(t, "after a restart", l, newest, plain, 0)
	// A torn checkpoint: nothing is clean.
	if err := os.WriteFile(filepath.Join(dir, storage.CleanerCheckpointFileName), []byte("RLCC\x01torn"), 0o600); err != nil {
		t.Fatal(err)
	}
	l.compactOnce(ds, c, later)
	if st := l.Stats(); st.CompactionBytesRead == 0 || st.CompactionPassesSkipped != 0 || st.CompactionPoint != ck2.Point {
		t.Fatalf("with a torn checkpoint a background pass read %d entry bytes (%d skipped): not a full pass", st.CompactionBytesRead, st.CompactionPassesSkipped)
	}
	if ck3, ok, _ := ds.CleanerCheckpoint(); !ok || ck3.Point != ck2.Point {
		t.Fatalf("the full pass's checkpoint: %+v, %v (want point %d)", ck3.Point, ok, ck2.Point)
	}
	checkCompactedLog(t, "after a full pass", l, newest, plain, 0)
}

// passPoint is the point a pass on l would take, the lag aside: the end of
// the last sealed segment below min(HW, durable LEO, the newest key
// checkpoint).
func passPoint(t *testing.T, l *Log) uint64 {
	t.Helper()
	st := l.Status()
	limit := min(st.HighWatermark, st.DurableLEO)
	cp, ok, err := l.store.(storage.KeyCheckpointStore).KeyCheckpoint()
	if err != nil {
		t.Fatal(err)
	}
	if ok {
		limit = min(limit, cp.Offset)
	}
	var p uint64
	for _, s := range l.store.(segmentLister).Segments() {
		if s.Active || s.End > limit {
			break
		}
		p = s.End
	}
	return p
}
