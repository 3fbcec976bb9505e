package storage_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/replog-io/replog/internal/storagetest"
	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/storage"
)

// readEvery reads every entry of s from its log start.
func readEvery(t *testing.T, s storage.Store) []protocol.Entry {
	t.Helper()
	var out []protocol.Entry
	for off := s.LogStart(); off < s.LEO(); {
		es, err := s.Entries(off, 1000, 1<<20)
		if err != nil {
			t.Fatalf("Entries(%d): %v", off, err)
		}
		if len(es) == 0 {
			t.Fatalf("Entries(%d) returned nothing below the LEO %d", off, s.LEO())
		}
		for i, e := range es {
			if e.Offset != off+uint64(i) {
				t.Fatalf("Entries(%d)[%d] has offset %d: a gap", off, i, e.Offset)
			}
		}
		out = append(out, es...)
		off += uint64(len(es))
	}
	return out
}

// checkCompacted compares the store's entries with the model's: an offset
// in removed reads as an EntryHole placeholder with the model entry's
// epoch, no data and a time no older than the entry's (its run's newest);
// every other one as the model's entry.
func checkCompacted(t *testing.T, when string, l *segLog, removed map[uint64]bool) {
	t.Helper()
	got := readEvery(t, l.s)
	want := readEvery(t, l.model)
	if len(got) != len(want) {
		t.Fatalf("%s: %d entries, model %d", when, len(got), len(want))
	}
	for i, g := range got {
		w := want[i]
		if removed[w.Offset] {
			if g.Type != protocol.EntryHole || g.Epoch != w.Epoch || g.Time < w.Time || len(g.Data) != 0 || g.Offset != w.Offset {
				t.Fatalf("%s: offset %d: %+v; want the placeholder of %+v", when, w.Offset, g, w)
			}
			continue
		}
		if g.Type != w.Type || g.Epoch != w.Epoch || g.Time != w.Time || string(g.Data) != string(w.Data) {
			t.Fatalf("%s: offset %d: %+v; want %+v", when, w.Offset, g, w)
		}
	}
}

// TestCompactSegment (R103, R104, storage.md 13): a sealed segment
// rewritten without some entries keeps every offset, the removed ones
// read as placeholders of their epoch and time, across epochs inside the
// segment, a reopen, a second pass (holes merge with new ones, a
// placeholder is never kept), a log start moved onto a hole and a
// truncation into the compacted segment; the file shrinks; the active
// segment is refused; a leftover .compact file is removed at open.
func TestCompactSegment(t *testing.T) {
	l := newSegLog(t, tinySegment)
	for e := uint64(1); e <= 16; e += 2 {
		// Each write spans two epochs, and each write is a segment.
		leo := l.s.LEO()
		l.apply(protocol.Write{Kind: protocol.WriteAppend, Entries: append(storagetest.Batch(leo, 10, e, 100), storagetest.Batch(leo+10, 10, e+1, 100)...)})
	}
	segs := l.s.Segments()
	if len(segs) < 4 {
		t.Fatalf("%d segments, want several", len(segs))
	}
	// A segment that spans an epoch change, so that the holes are runs of
	// two epochs.
	var seg storage.SegmentInfo
	for _, s := range segs[:len(segs)-1] {
		es, err := l.model.Entries(s.Base, int(s.End-s.Base), 1<<30)
		if err != nil {
			t.Fatal(err)
		}
		if es[0].Epoch != es[len(es)-1].Epoch {
			seg = s
			break
		}
	}
	if seg.End == 0 {
		t.Fatalf("no sealed segment spans an epoch change: %+v", segs)
	}
	removed := map[uint64]bool{}
	res, err := l.s.CompactSegment(seg.Base, func(e protocol.Entry) bool {
		if e.Offset%3 != 0 && e.Offset != seg.End-1 {
			removed[e.Offset] = true
			return true
		}
		return false
	}, nil)
	if err != nil || !res.Swapped || res.Removed != len(removed) || res.Kept != int(seg.End-seg.Base)-len(removed) {
		t.Fatalf("CompactSegment: %+v, %v; want %d removed and swapped", res, err, len(removed))
	}
	if res.BytesAfter >= res.BytesBefore {
		t.Fatalf("the file went from %d to %d bytes", res.BytesBefore, res.BytesAfter)
	}
	if st := l.s.Stats(); st.Compactions != 1 {
		t.Fatalf("Stats.Compactions = %d, want 1", st.Compactions)
	}
	checkCompacted(t, "after the pass", l, removed)
	l.reopen(tinySegment)
	checkCompacted(t, "after a reopen", l, removed)

	// A second pass: the placeholders go back to holes (drop never sees
	// one kept), more entries go.
	res, err = l.s.CompactSegment(seg.Base, func(e protocol.Entry) bool {
		if e.Type == protocol.EntryHole {
			t.Fatalf("drop was shown placeholder %d", e.Offset)
		}
		if e.Offset%2 == 0 && e.Offset != seg.End-1 {
			removed[e.Offset] = true
			return true
		}
		return false
	}, nil)
	if err != nil || !res.Swapped {
		t.Fatalf("second pass: %+v, %v", res, err)
	}
	checkCompacted(t, "after a second pass", l, removed)

	// Nothing to remove: the segment stays.
	if res, err := l.s.CompactSegment(seg.Base, func(protocol.Entry) bool { return false }, nil); err != nil || res.Swapped {
		t.Fatalf("a pass that removes nothing: %+v, %v", res, err)
	}
	if _, err := l.s.CompactSegment(segs[len(segs)-1].Base, func(protocol.Entry) bool { return true }, nil); !errors.Is(err, storage.ErrNotSealed) {
		t.Fatalf("the active segment: %v; want ErrNotSealed", err)
	}

	// The log start onto a hole, then a reopen (open checks the first entry).
	var hole uint64
	for off := seg.Base + 1; off < seg.End; off++ {
		if removed[off] {
			hole = off
			break
		}
	}
	l.apply(protocol.Write{Kind: protocol.WriteDeletePrefix, Offset: hole})
	leftover := filepath.Join(l.s.Dir(), filepath.Base(l.s.Segments()[0].Path)+".compact")
	if err := os.WriteFile(leftover, []byte("half a pass"), 0o600); err != nil {
		t.Fatal(err)
	}
	l.reopen(tinySegment)
	if _, err := os.Stat(leftover); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the leftover %s is still there: %v", leftover, err)
	}
	checkCompacted(t, "log start on a hole", l, removed)

	// A truncation into the compacted segment, then appends on top.
	cut := seg.End - 3
	l.apply(protocol.Write{Kind: protocol.WriteTruncate, Offset: cut})
	for off := range removed {
		if off >= cut {
			delete(removed, off)
		}
	}
	l.appendN(4, 20, 20)
	checkCompacted(t, "after a truncation into it", l, removed)
	l.reopen(tinySegment)
	checkCompacted(t, "truncated, reopened", l, removed)

	// Placeholders a follower fetched are stored as entries; a pass
	// removes them whatever drop says, and they read the same after.
	leo := l.s.LEO()
	var ph []protocol.Entry
	for i := range uint64(30) {
		ph = append(ph, protocol.Entry{Offset: leo + i, Epoch: 21, Type: protocol.EntryHole, Time: 5})
	}
	l.apply(protocol.Write{Kind: protocol.WriteAppend, Entries: ph})
	l.appendN(6, 20, 21) // seals the placeholders' segment
	for _, s := range l.s.Segments() {
		if s.Active || s.End <= leo || s.Base >= leo+30 {
			continue
		}
		res, err := l.s.CompactSegment(s.Base, func(e protocol.Entry) bool {
			if e.Type == protocol.EntryHole {
				t.Fatalf("drop was shown stored placeholder %d", e.Offset)
			}
			return false
		}, nil)
		if err != nil || !res.Swapped || res.Removed == 0 {
			t.Fatalf("a pass over stored placeholders [%d, %d): %+v, %v", s.Base, s.End, res, err)
		}
	}
	for i := range uint64(30) {
		removed[leo+i] = true // the model holds them as entries: they read as placeholders of the same epoch
	}
	checkCompacted(t, "stored placeholders removed", l, removed)
}

// TestMemoryCompactReadsAsTheDirStore: Memory.Compact over a sealed
// segment's range reads back exactly as DirStore.CompactSegment leaves the
// segment (placeholders of the same epochs and times, runs merged across a
// second pass and stored placeholders), so that the simulation's compacting
// store is the Dir's; a Crash keeps the compacted range, in deferred mode
// too; a range outside the log changes nothing.
func TestMemoryCompactReadsAsTheDirStore(t *testing.T) {
	l := newSegLog(t, tinySegment)
	for e := uint64(1); e <= 12; e += 2 {
		leo := l.s.LEO()
		batch := append(storagetest.Batch(leo, 10, e, 100), storagetest.Batch(leo+10, 10, e+1, 100)...)
		for i := range batch {
			batch[i].Time = int64(1000 + batch[i].Offset)
		}
		// A follower's stored placeholder, fetched from a compacted leader.
		batch[3] = protocol.Entry{Offset: batch[3].Offset, Epoch: batch[3].Epoch, Type: protocol.EntryHole, Time: batch[3].Time}
		l.apply(protocol.Write{Kind: protocol.WriteAppend, Entries: batch})
	}
	segs := l.s.Segments()
	if len(segs) < 3 {
		t.Fatalf("%d segments, want several", len(segs))
	}
	for pass, drop := range []func(protocol.Entry) bool{
		func(e protocol.Entry) bool { return e.Offset%3 == 1 },
		func(e protocol.Entry) bool { return e.Offset%2 == 0 },
	} {
		for _, s := range segs[:len(segs)-1] {
			dres, err := l.s.CompactSegment(s.Base, drop, nil)
			if err != nil {
				t.Fatal(err)
			}
			mres, err := l.model.Compact(s.Base, s.End, drop)
			if err != nil || mres.Swapped != dres.Swapped || mres.Kept != dres.Kept || mres.BytesRead != dres.BytesRead {
				t.Fatalf("pass %d, segment %d: Memory %+v %v; DirStore %+v", pass, s.Base, mres, err, dres)
			}
		}
		l.check("pass " + string(rune('1'+pass)))
		// Compare leaves out the time, which a placeholder takes from its run.
		got, want := readEvery(t, l.model), readEvery(t, l.s)
		for i := range want {
			if got[i].Time != want[i].Time || got[i].Type != want[i].Type {
				t.Fatalf("pass %d, offset %d: Memory has %+v; DirStore %+v", pass, want[i].Offset, got[i], want[i])
			}
		}
	}
	if got := readEvery(t, l.model); got[3].Type != protocol.EntryHole {
		t.Fatalf("offset 3: %+v, want a placeholder", got[3])
	}
	before := readEvery(t, l.model)
	l.model = l.model.Crash()
	if after := readEvery(t, l.model); len(after) != len(before) || after[5].Type != before[5].Type || after[4].Type != before[4].Type {
		t.Fatalf("a crash changed the compacted log")
	}
	if res, err := l.model.Compact(l.model.LEO()-2, l.model.LEO()+1, func(protocol.Entry) bool { return true }); err != nil || res.Swapped {
		t.Fatalf("a range past the LEO: %+v, %v", res, err)
	}

	d := storage.NewMemoryDeferred()
	if err := d.Append(storagetest.Batch(0, 6, 1, 10)); err != nil {
		t.Fatal(err)
	}
	if res, _ := d.Compact(0, 6, func(protocol.Entry) bool { return true }); res.Swapped {
		t.Fatal("compacted an unsynced range")
	}
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	if res, err := d.Compact(0, 5, func(e protocol.Entry) bool { return e.Offset == 2 }); err != nil || !res.Swapped || res.Removed != 1 {
		t.Fatalf("Compact: %+v, %v", res, err)
	}
	if es := readEvery(t, d.Crash()); es[2].Type != protocol.EntryHole || es[3].Type == protocol.EntryHole {
		t.Fatalf("after a crash in deferred mode: %+v", es)
	}
}

// TestMemoryCompactDeferredKeepsUnsyncedOut: in deferred mode a pass over
// a range whose visible entries are not the durable ones (a truncation and
// a new epoch's appends not synced yet) changes nothing: rewriting the
// durable range from the visible one would make unsynced entries durable,
// which a crash would then read back though they were never synced.
func TestMemoryCompactDeferredKeepsUnsyncedOut(t *testing.T) {
	d := storage.NewMemoryDeferred()
	if err := d.Append(storagetest.Batch(0, 6, 1, 10)); err != nil {
		t.Fatal(err)
	}
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := d.TruncateSuffix(3); err != nil {
		t.Fatal(err)
	}
	if err := d.Append(storagetest.Batch(3, 3, 2, 10)); err != nil {
		t.Fatal(err)
	}
	res, err := d.Compact(0, 6, func(e protocol.Entry) bool { return e.Offset == 1 })
	if err != nil {
		t.Fatal(err)
	}
	if res.Swapped {
		t.Fatalf("compacted a range whose visible entries are not yet durable: %+v", res)
	}
	es := readEvery(t, d.Crash())
	if len(es) != 6 {
		t.Fatalf("after a crash: %d entries, want the 6 synced", len(es))
	}
	for _, e := range es {
		if e.Epoch != 1 {
			t.Fatalf("after a crash, offset %d has epoch %d: an unsynced entry became durable", e.Offset, e.Epoch)
		}
	}
}
