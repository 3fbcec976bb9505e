package replica

import (
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
