package replica

import (
	"testing"

	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/storage"
)

func ents(first uint64, epochs ...uint64) []protocol.Entry {
	var out []protocol.Entry
	for i, e := range epochs {
		out = append(out, protocol.Entry{Offset: first + uint64(i), Epoch: e, Type: protocol.EntryData, Data: []byte{byte(first) + byte(i)}})
	}
	return out
}

// TestLogViewPendingTruncation: a truncation emitted while earlier writes
// are in flight masks the store at once; the durable end only moves when
// the writes carrying entries are persisted, and the view matches the store
// whatever prefix of the writes has been applied.
func TestLogViewPendingTruncation(t *testing.T) {
	store := newStore(t, []uint64{1, 1, 1}, protocol.QuorumState{})
	l := newLogView(store)
	// seq 1: append 3,4 (epoch 2); seq 2: truncate to 1 (below the durable
	// end); seq 3: append 1,2 (epoch 3).
	l.append(ents(3, 2, 2), 1)
	l.truncate(1)
	if l.LEO() != 1 || l.durableEnd != 1 || l.LastEntryEpoch() != 1 {
		t.Fatalf("after truncate: leo %d durable %d", l.LEO(), l.durableEnd)
	}
	l.append(ents(1, 3, 3), 3)
	if e, end := l.EndOffsetForEpoch(2); e != 1 || end != 1 {
		t.Fatalf("EndOffsetForEpoch(2) = %d,%d, want 1,1 (epoch 2 is gone)", e, end)
	}
	// The store still has the old entries and seq 1 is applied: the view
	// must not read them.
	if err := store.Append(ents(3, 2, 2)); err != nil {
		t.Fatal(err)
	}
	if l.persisted(1) {
		t.Fatal("persisting the truncated append moved the durable end")
	}
	es, err := l.read(0, 1<<20)
	if err != nil || len(es) != 3 || es[1].Epoch != 3 || es[2].Epoch != 3 {
		t.Fatalf("read = %v, %v: want 1@e1 then the new tail", es, err)
	}
	if err := store.TruncateSuffix(1); err != nil {
		t.Fatal(err)
	}
	if err := store.Append(ents(1, 3, 3)); err != nil {
		t.Fatal(err)
	}
	if !l.persisted(3) || l.durableEnd != 3 || len(l.tail) != 0 {
		t.Fatalf("after all persisted: durable %d tail %d", l.durableEnd, len(l.tail))
	}
	if got := store.EpochMap(); len(got) != len(l.epochs) || got[1] != l.epochs[1] {
		t.Fatalf("epoch maps differ: store %v view %v", got, l.epochs)
	}
}

// TestLogViewTruncateInTail: truncating inside the unpersisted tail clips
// the write marks, and later appends never overwrite entries a reader got.
func TestLogViewTruncateInTail(t *testing.T) {
	store := newStore(t, []uint64{1}, protocol.QuorumState{})
	l := newLogView(store)
	l.append(ents(1, 1, 1, 1), 1)
	held, err := l.read(1, 1<<20)
	if err != nil || len(held) != 3 {
		t.Fatal(held, err)
	}
	l.truncate(2)
	l.append(ents(2, 2), 2)
	if held[1].Epoch != 1 {
		t.Fatal("an append overwrote entries handed to a reader")
	}
	if err := store.Append(ents(1, 1, 1, 1)); err != nil {
		t.Fatal(err)
	}
	l.persisted(1)
	if l.durableEnd != 2 || l.LEO() != 3 {
		t.Fatalf("durable %d leo %d, want 2 and 3", l.durableEnd, l.LEO())
	}
	es, _ := l.read(0, 1<<20)
	if len(es) != 3 || es[2].Epoch != 2 {
		t.Fatalf("read %v", es)
	}
}

// TestLogViewReadBounds: every entry costs len(Data) + EntryOverhead
// against the byte bound (so empty records are bounded too) and one read
// returns at most maxReadEntries.
func TestLogViewReadBounds(t *testing.T) {
	store := storage.NewMemory()
	empty := func(first uint64, n int) []protocol.Entry {
		es := make([]protocol.Entry, n)
		for i := range es {
			es[i] = protocol.Entry{Offset: first + uint64(i), Epoch: 1, Type: protocol.EntryControl}
		}
		return es
	}
	if err := store.Append(empty(0, 5000)); err != nil {
		t.Fatal(err)
	}
	l := newLogView(store)
	l.append(empty(5000, 5000), 1)
	for _, c := range []struct {
		from     uint64
		maxBytes int
		want     int
	}{
		{0, 1 << 20, maxReadEntries},    // store part, count cap
		{5000, 1 << 20, maxReadEntries}, // tail part, count cap
		{4990, 1 << 20, maxReadEntries}, // across both
		{0, 1024, 1024 / protocol.EntryOverhead},
		{5000, 1024, 1024 / protocol.EntryOverhead},
		{4990, 1024, 1024 / protocol.EntryOverhead},
		{5000, 1, 1}, // the first entry always comes
	} {
		es, err := l.read(c.from, c.maxBytes)
		if err != nil || len(es) != c.want {
			t.Errorf("read(%d, %d) = %d entries, %v; want %d", c.from, c.maxBytes, len(es), err, c.want)
		}
		for i, e := range es {
			if e.Offset != c.from+uint64(i) {
				t.Fatalf("read(%d): entry %d has offset %d", c.from, i, e.Offset)
			}
		}
	}
}

// Every store satisfies the core's read-only view of the log.
var (
	_ LogReader = (*storage.DirStore)(nil)
	_ LogReader = (*storage.Memory)(nil)
	_ LogReader = storage.Store(nil)
)

// TestLogViewLatePersistedAfterTruncation (R72): with entry writes in
// flight (a pipelining follower's), a truncation inside or below the tail
// lowers the durable end at once if it is below it, and a Persisted that
// arrives later for a write issued before the truncation moves the durable
// end only over entries that write carried and the truncation kept: never
// over entries appended after it by later writes, not yet durable.
func TestLogViewLatePersistedAfterTruncation(t *testing.T) {
	type op struct {
		first uint64 // append from first (epoch, count), with seq
		epoch uint64
		n     int
		trunc int64 // ≥ 0: truncate to it instead
		seq   uint64
	}
	app := func(first, epoch uint64, n int, seq uint64) op {
		return op{first: first, epoch: epoch, n: n, trunc: -1, seq: seq}
	}
	trunc := func(to uint64, seq uint64) op { return op{trunc: int64(to), seq: seq} }
	for _, c := range []struct {
		name string
		ops  []op
		// after persisted(seq), the durable end
		steps [][2]uint64
	}{
		{"inside the tail", []op{app(3, 2, 4, 1), trunc(5, 2), app(5, 3, 3, 3)},
			[][2]uint64{{1, 5}, {2, 5}, {3, 8}}},
		{"below the durable end", []op{app(3, 2, 4, 1), trunc(2, 2), app(2, 3, 2, 3)},
			[][2]uint64{{1, 2}, {2, 2}, {3, 4}}},
		{"at the durable end", []op{app(3, 2, 3, 1), trunc(3, 2), app(3, 3, 2, 3)},
			[][2]uint64{{1, 3}, {2, 3}, {3, 5}}},
		{"inside the first of two", []op{app(3, 2, 2, 1), app(5, 2, 3, 2), trunc(4, 3), app(4, 3, 2, 4)},
			[][2]uint64{{2, 4}, {3, 4}, {4, 6}}},
		{"inside the second of two", []op{app(3, 2, 2, 1), app(5, 2, 3, 2), trunc(6, 3), app(6, 3, 3, 4)},
			[][2]uint64{{1, 5}, {2, 6}, {3, 6}, {4, 9}}},
		{"twice", []op{app(3, 2, 4, 1), trunc(6, 2), app(6, 3, 2, 3), trunc(5, 4), app(5, 4, 2, 5)},
			[][2]uint64{{1, 5}, {3, 5}, {4, 5}, {5, 7}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			store := newStore(t, []uint64{1, 1, 1}, protocol.QuorumState{})
			l := newLogView(store)
			// want[off] is the epoch the view must hold at off.
			want := map[uint64]uint64{0: 1, 1: 1, 2: 1}
			for _, o := range c.ops {
				if o.trunc >= 0 {
					l.truncate(uint64(o.trunc))
					for off := range want {
						if off >= uint64(o.trunc) {
							delete(want, off)
						}
					}
					continue
				}
				es := make([]protocol.Entry, o.n)
				for i := range es {
					es[i] = protocol.Entry{Offset: o.first + uint64(i), Epoch: o.epoch, Type: protocol.EntryData}
					want[es[i].Offset] = o.epoch
				}
				l.append(es, o.seq)
			}
			leo := l.LEO()
			for _, s := range c.steps {
				l.persisted(s[0])
				if l.durableEnd != s[1] || l.LEO() != leo {
					t.Fatalf("after persisted(%d): durable end %d, LEO %d; want %d, %d", s[0], l.durableEnd, l.LEO(), s[1], leo)
				}
				for i, e := range l.tail {
					if off := l.durableEnd + uint64(i); e.Offset != off || e.Epoch != want[off] {
						t.Fatalf("after persisted(%d): tail entry %d is %d@e%d, want %d@e%d", s[0], i, e.Offset, e.Epoch, off, want[off])
					}
				}
			}
		})
	}
}
