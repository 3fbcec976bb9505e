package replica

import (
	"slices"
	"testing"

	"github.com/replog-io/replog/protocol"
)

// compactionEntry returns an entry at off with entry key k (none if "") and data.
func compactionEntry(off uint64, typ protocol.EntryType, k, data string, ms int64) protocol.Entry {
	e := protocol.Entry{Offset: off, Epoch: 1, Type: typ, Time: ms, Data: []byte(data)}
	if typ == protocol.EntryKeyed {
		var h []byte
		if k != "" {
			h = protocol.EncodeKeyHeader(protocol.KeyHeader{Key: protocol.Key{Producer: 1, Seq: off, EntryKey: k}, N: 1})
		}
		e.Data = protocol.KeyedData(h, []byte(data))
	}
	return e
}

// TestCompactionPlan (R103): below the point a pass drops a keyed entry
// that is not its key's newest, and a tombstone at or before
// TombstoneBefore; it keeps the newest of each key, a younger tombstone,
// an entry without an entry key (plain data, a keyed batch without one),
// every control entry, and everything at or above the point (a key's
// newer entry above the point does not make one below it go).
func TestCompactionPlan(t *testing.T) {
	es := []protocol.Entry{
		compactionEntry(0, protocol.EntryControl, "", "", 100),
		compactionEntry(1, protocol.EntryKeyed, "a", "a1", 100),    // superseded by 4
		compactionEntry(2, protocol.EntryKeyed, "b", "", 100),      // b's newest: an old tombstone
		compactionEntry(3, protocol.EntryData, "", "plain", 100),   // no key
		compactionEntry(4, protocol.EntryKeyed, "a", "a2", 200),    // a's newest below the point
		compactionEntry(5, protocol.EntryKeyed, "", "idem", 200),   // keyed batch, no entry key
		compactionEntry(6, protocol.EntryKeyed, "c", "", 900),      // c's newest: a young tombstone
		compactionEntry(7, protocol.EntryState, "", "cursor", 100), // control
		compactionEntry(8, protocol.EntryKeyed, "d", "d1", 100),    // d's newest below the point
		compactionEntry(9, protocol.EntryKeyed, "d", "d2", 100),    // at the point: never dropped
		compactionEntry(10, protocol.EntryKeyed, "a", "a3", 100),   // above it
	}
	p := NewCompactionPlan(9, 500)
	for _, e := range es {
		p.Observe(e)
	}
	want := map[uint64]bool{1: true, 2: true}
	for _, e := range es {
		if got := p.Drop(e); got != want[e.Offset] {
			t.Errorf("Drop(entry %d) = %v, want %v", e.Offset, got, want[e.Offset])
		}
	}
	if p.Keys() != 4 {
		t.Errorf("Keys() = %d, want 4 (a, b, c, d below the point)", p.Keys())
	}
}

// TestChooseCompaction (R103): which segments a pass takes as clean (the
// checkpoint summarises them, same range, below its point, before the
// first that is not) and whether it runs at all (the dirty share against
// the minimum ratio; 0 or below: always).
func TestChooseCompaction(t *testing.T) {
	segs := []CompactionSegment{{0, 100, 10}, {100, 200, 10}, {200, 300, 30}, {300, 400, 50}}
	sum := func(base, end uint64) protocol.SegmentSummary {
		return protocol.SegmentSummary{Base: base, End: end, Keys: []uint64{base}}
	}
	ck := &protocol.CleanerCheckpoint{Point: 200, Segments: []protocol.SegmentSummary{sum(0, 100), sum(100, 200)}}
	cases := []struct {
		name           string
		ck             *protocol.CleanerCheckpoint
		leo            uint64
		ratio          float64
		run            bool
		dirty          uint64
		clean          int
		cleanB, dirtyB int64
	}{
		{"no checkpoint: all dirty", nil, 500, 0.5, true, 0, 0, 0, 100},
		{"half clean, dirty 80%", ck, 500, 0.5, true, 200, 2, 20, 80},
		{"dirty 80% under a 0.9 ratio", ck, 500, 0.9, false, 200, 2, 20, 80},
		{"ratio 0: always", ck, 500, 0, true, 200, 2, 20, 80},
		{"checkpoint above the LEO: a cut log, all dirty", &protocol.CleanerCheckpoint{Point: 600, Segments: ck.Segments}, 500, 0.5, true, 0, 0, 0, 100},
		{"a summary past the point is not clean", &protocol.CleanerCheckpoint{Point: 150, Segments: ck.Segments}, 500, 0.5, true, 100, 1, 10, 90},
		{"another range is not clean", &protocol.CleanerCheckpoint{Point: 200, Segments: []protocol.SegmentSummary{sum(0, 100), sum(100, 150)}}, 500, 0.5, true, 100, 1, 10, 90},
		{"a gap ends the clean part", &protocol.CleanerCheckpoint{Point: 300, Segments: []protocol.SegmentSummary{sum(0, 100), sum(200, 300)}}, 500, 0.5, true, 100, 1, 10, 90},
		{"all clean: nothing dirty, no pass", &protocol.CleanerCheckpoint{Point: 400, Segments: []protocol.SegmentSummary{sum(0, 100), sum(100, 200), sum(200, 300), sum(300, 400)}}, 500, 0.5, false, 400, 4, 100, 0},
		{"all clean, ratio 0: a pass (tombstones may expire)", &protocol.CleanerCheckpoint{Point: 400, Segments: []protocol.SegmentSummary{sum(0, 100), sum(100, 200), sum(200, 300), sum(300, 400)}}, 500, 0, true, 400, 4, 100, 0},
	}
	for _, c := range cases {
		got := ChooseCompaction(segs, c.ck, c.leo, c.ratio)
		if got.Run != c.run || got.Dirty != c.dirty || len(got.Clean) != c.clean || got.CleanBytes != c.cleanB || got.DirtyBytes != c.dirtyB {
			t.Errorf("%s: got run=%v dirty=%d clean=%d bytes %d/%d; want run=%v dirty=%d clean=%d bytes %d/%d",
				c.name, got.Run, got.Dirty, len(got.Clean), got.CleanBytes, got.DirtyBytes, c.run, c.dirty, c.clean, c.cleanB, c.dirtyB)
		}
		for i, s := range got.Clean {
			if s.Base != segs[i].Base || s.End != segs[i].End {
				t.Errorf("%s: clean summary %d is [%d, %d), segment [%d, %d)", c.name, i, s.Base, s.End, segs[i].Base, segs[i].End)
			}
		}
	}
	if got := ChooseCompaction(nil, ck, 500, 0); got.Run {
		t.Errorf("no segment: a pass runs")
	}
}

// TestCompactionRewritesOnlyWhatChanged (R103): a plan over the dirty part
// only (Clean set) drops a clean entry whose key the dirty part
// supersedes and keeps one it does not (its key's newest), drops an
// expired tombstone in the clean part; it rewrites a clean segment whose
// summary holds a superseded key or an expired tombstone and no other;
// DropKeeping's summary holds the kept keys once, sorted, and the oldest
// kept tombstone. Teeth: replog_bug_compact_skip_superseded.
func TestCompactionRewritesOnlyWhatChanged(t *testing.T) {
	clean := []protocol.Entry{
		compactionEntry(0, protocol.EntryKeyed, "a", "a1", 100), // superseded by 5
		compactionEntry(1, protocol.EntryKeyed, "b", "b1", 100), // b's newest: untouched
		compactionEntry(2, protocol.EntryKeyed, "c", "", 100),   // an old tombstone, c not in the dirty part
		compactionEntry(3, protocol.EntryKeyed, "d", "", 900),   // a young tombstone
	}
	dirty := []protocol.Entry{
		compactionEntry(4, protocol.EntryData, "", "plain", 1000),
		compactionEntry(5, protocol.EntryKeyed, "a", "a2", 1000),
		compactionEntry(6, protocol.EntryKeyed, "e", "e1", 1000), // superseded by 7
		compactionEntry(7, protocol.EntryKeyed, "e", "e2", 1000),
	}
	p := NewCompactionPlan(8, 500)
	p.Clean = 4
	for _, e := range append(append([]protocol.Entry(nil), clean...), dirty...) {
		p.Observe(e) // the clean part is not taken in
	}
	if p.Keys() != 2 {
		t.Errorf("Keys() = %d, want 2 (a and e, from the dirty part)", p.Keys())
	}
	want := map[uint64]bool{0: true, 2: true, 6: true}
	b := NewSegmentSummarizer(0, 8)
	drop := p.DropKeeping(b)
	for _, e := range append(append([]protocol.Entry(nil), clean...), dirty...) {
		if got := drop(e); got != want[e.Offset] {
			t.Errorf("Drop(entry %d) = %v, want %v", e.Offset, got, want[e.Offset])
		}
	}
	s := b.Summary()
	wantKeys := []uint64{protocol.EntryKeyHash("a"), protocol.EntryKeyHash("b"), protocol.EntryKeyHash("d"), protocol.EntryKeyHash("e")}
	slices.Sort(wantKeys)
	if !slices.Equal(s.Keys, wantKeys) || s.Tombstone != 900 {
		t.Errorf("summary keys %x tombstone %d; want %x and 900", s.Keys, s.Tombstone, wantKeys)
	}
	h := protocol.EntryKeyHash
	for _, c := range []struct {
		name string
		s    protocol.SegmentSummary
		want bool
	}{
		{"holds a superseded key", protocol.SegmentSummary{Keys: []uint64{h("b"), h("a")}}, true},
		{"holds only keys the dirty part leaves alone", protocol.SegmentSummary{Keys: []uint64{h("b"), h("x")}}, false},
		{"an expired tombstone", protocol.SegmentSummary{Keys: []uint64{h("c")}, Tombstone: 100}, true},
		{"a young tombstone", protocol.SegmentSummary{Keys: []uint64{h("d")}, Tombstone: 900}, false},
		{"empty", protocol.SegmentSummary{}, false},
	} {
		if got := p.Rewrites(c.s); got != c.want {
			t.Errorf("Rewrites(%s) = %v, want %v", c.name, got, c.want)
		}
	}
}
