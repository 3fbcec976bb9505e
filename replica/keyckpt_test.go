package replica

import (
	"fmt"
	"math/rand"
	"reflect"
	"slices"
	"testing"

	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/storage"
)

// ckptLog is a test replica's log (bound's synthetic voter row) with the
// store's key checkpoint (R76).
type ckptLog struct {
	LogReader
	m *storage.Memory
}

func (c ckptLog) KeyCheckpoint() (protocol.KeyCheckpoint, bool, error) { return c.m.KeyCheckpoint() }

// openKeyed is New on store; withCkpt: the store's key checkpoint is
// offered (else the table replays the log from its start).
func openKeyed(t *testing.T, store *storage.Memory, withCkpt bool) *Replica {
	t.Helper()
	cfg := testConfig("f", "l", "f")
	cfg.KeyCheckpointBytes = -1 // no new checkpoint: the stored one stays
	var log LogReader = bound(store, cfg.Voters)
	if withCkpt {
		log = ckptLog{log, store}
	}
	r, err := New(cfg, log, t0)
	if err != nil {
		t.Fatal(err)
	}
	settle(t, r, store)
	return r
}

// keyedLog returns n entries from offset from in epoch, of every kind the
// table reads: keyed batches of one and more records (producers 1 to 6,
// some with caller IDs), cursor commits, copies of a producer's state and
// of IDs (R66), level entries, plain data. Times rise with the offset.
func keyedLog(rng *rand.Rand, seqs map[uint64]uint64, from, epoch uint64, n int) []protocol.Entry {
	var es []protocol.Entry
	add := func(typ protocol.EntryType, data []byte) {
		off := from + uint64(len(es))
		es = append(es, protocol.Entry{Offset: off, Epoch: epoch, Time: t0.UnixMilli() + int64(off), Type: typ, Data: data})
	}
	for len(es) < n {
		off := from + uint64(len(es))
		p := uint64(1 + rng.Intn(6))
		switch k := rng.Intn(10); {
		case k < 5: // a keyed batch
			seqs[p]++
			recs := 1 + rng.Intn(3)
			key := protocol.Key{Producer: p, Seq: seqs[p], Low: lowOf(seqs[p])}
			if rng.Intn(3) == 0 {
				key.ID = fmt.Sprintf("id-%d", rng.Intn(40))
			}
			for i := range recs - 1 {
				add(protocol.EntryKeyed, protocol.KeyedData(nil, fmt.Appendf(nil, "r%d", i)))
			}
			h := protocol.EncodeKeyHeader(protocol.KeyHeader{Key: key, N: uint64(recs)})
			add(protocol.EntryKeyed, protocol.KeyedData(h, []byte("last")))
		case k < 7: // a cursor commit
			seqs[p]++
			h := protocol.EncodeKeyHeader(protocol.KeyHeader{Key: protocol.Key{Producer: p, Seq: seqs[p], Low: lowOf(seqs[p])}, N: 1})
			cur := protocol.EncodeStateRecords(nil, protocol.StateRecord{Kind: protocol.StateCursor, Name: fmt.Sprintf("c%d", rng.Intn(4)), Next: off})
			add(protocol.EntryState, protocol.KeyedData(h, cur))
		case k < 8: // a copy (R66)
			s := seqs[p]
			recs := protocol.EncodeStateRecords(nil,
				protocol.StateRecord{Kind: protocol.StateProducer, Producer: p, Low: lowOf(s), Time: t0.UnixMilli() + int64(off),
					Seqs: []protocol.SeqAt{{Seq: max(1, s) - min(s, 1), First: off / 2, N: 1}, {Seq: max(1, s), First: off / 2, N: 1}}},
				protocol.StateRecord{Kind: protocol.StateID, Name: fmt.Sprintf("id-%d", rng.Intn(40)), First: off / 3, N: 1, Time: t0.UnixMilli() + int64(off)})
			add(protocol.EntryState, protocol.KeyedData(nil, recs))
		case k < 9:
			add(protocol.EntryFeature, protocol.EncodeFeatureLevel(uint8(protocol.BaseFeatureLevel)))
		case rng.Intn(2) == 0: // a log change (R80), or a copy of one (R81)
			lr := protocol.StateRecord{Kind: protocol.StateLog, Name: fmt.Sprintf("log-%d", rng.Intn(5))}
			if rng.Intn(3) > 0 {
				lr.Data = fmt.Appendf(nil, "spec-%d", off)
			}
			if rng.Intn(4) == 0 && len(lr.Data) > 0 {
				lr.First = off / 2
				add(protocol.EntryState, protocol.KeyedData(nil, protocol.EncodeStateRecords(nil, lr)))
				break
			}
			seqs[p]++
			h := protocol.EncodeKeyHeader(protocol.KeyHeader{Key: protocol.Key{Producer: p, Seq: seqs[p], Low: lowOf(seqs[p])}, N: 1})
			add(protocol.EntryState, protocol.KeyedData(h, protocol.EncodeStateRecords(nil, lr)))
		default:
			add(protocol.EntryData, []byte("plain"))
		}
	}
	return es
}

// lowOf is a producer's low when its newest sequence number is s: it
// rises with s, as a producer's does.
func lowOf(s uint64) uint64 { return max(1, s-min(s, 3)) }

// tableOf is what a key table answers from, undo records from off on.
type tableOf struct {
	Applied   uint64
	Producers map[uint64]producerState
	IDs       map[string]idState
	Cursors   map[string]cursorState
	Logs      map[string]logState
	Levels    []levelRow
	Undo      []keyUndo
}

func snapshot(t *keyTable, undoFrom uint64) tableOf {
	s := tableOf{Applied: t.applied, Producers: map[uint64]producerState{}, IDs: map[string]idState{}, Cursors: map[string]cursorState{}, Logs: map[string]logState{}, Levels: slices.Clone(t.levels)}
	for k, v := range t.logs {
		s.Logs[k] = *v
	}
	for k, v := range t.producers {
		s.Producers[k] = *v
	}
	for k, v := range t.ids {
		s.IDs[k] = *v
	}
	for k, v := range t.cursors {
		s.Cursors[k] = *v
	}
	for _, u := range t.undo {
		if u.off < undoFrom {
			continue
		}
		if u.created {
			// What it undoes is the producer's deletion: its previous
			// activity is moot (a replay from a later log start never saw
			// it).
			u.prevLast, u.prevAt = 0, 0
		}
		if len(u.moved) == 0 {
			u.moved = nil
		}
		s.Undo = append(s.Undo, u)
	}
	return s
}

func sameTable(t *testing.T, what string, got, want *keyTable, undoFrom uint64) {
	t.Helper()
	g, w := snapshot(got, undoFrom), snapshot(want, undoFrom)
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("%s: the restored table differs from the replayed one:\nrestored %+v\nreplayed %+v", what, g, w)
	}
}

// buildCheckpointed makes a store of about 600 entries (about 300 in epoch
// 1, then about 300 in epoch 2) with a key checkpoint at the end of epoch
// 1's, O (300 to 302: a batch is not cut), made by a replica
// whose HW was 200, and an HW checkpoint at 200.
func buildCheckpointed(t *testing.T) (*storage.Memory, protocol.KeyCheckpoint) {
	t.Helper()
	store := storage.NewMemory()
	cfg := testConfig("f", "l", "f")
	cfg.KeyCheckpointBytes = 1
	r, err := New(cfg, ckptLog{bound(store, cfg.Voters), store}, t0)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(7))
	seqs := map[uint64]uint64{}
	r.appendEntries(keyedLog(rng, seqs, 0, 1, 300))
	r.hw = 200
	for range 10 {
		rd := r.Ready()
		if rd.KeyCheckpoint != nil {
			if err := store.SaveKeyCheckpoint(*rd.KeyCheckpoint); err != nil {
				t.Fatal(err)
			}
		}
		if len(rd.Writes) == 0 {
			break
		}
		applyWrites(t, store, rd.Writes)
		r.Persisted(rd.Writes[len(rd.Writes)-1].Seq)
	}
	cp, ok, err := store.KeyCheckpoint()
	if err != nil || !ok || cp.Offset != r.log.LEO() || cp.Epoch != 1 {
		t.Fatalf("key checkpoint at %d of epoch %d, %v, %v; want one at %d of epoch 1", cp.Offset, cp.Epoch, ok, err, r.log.LEO())
	}
	r.appendEntries(keyedLog(rng, seqs, r.log.LEO(), 2, 300))
	settle(t, r, store) // the next checkpoint is not kept
	applyWrites(t, store, []protocol.Write{{Kind: protocol.WriteHWCheckpoint, Offset: 200}})
	return store, cp
}

// TestKeyCheckpointHoldsTheReplayedTable (R76): a replica opened on a store
// with a key checkpoint at O holds the table, and answers, of one that
// replayed the whole log: producers, caller IDs, cursors, level rows and
// the undo records above the HW; and after truncations above and below O
// (undone through the checkpoint's undo records) it still does. With the
// log's prefix deleted below O (retention after the checkpoint), the
// restored table drops what only the deleted entries recorded, as the
// replay from the new log start never saw it.
func TestKeyCheckpointHoldsTheReplayedTable(t *testing.T) {
	for _, deleteTo := range []uint64{0, 100} {
		t.Run(fmt.Sprintf("log start %d", deleteTo), func(t *testing.T) {
			store, cp := buildCheckpointed(t)
			if deleteTo > 0 {
				applyWrites(t, store, []protocol.Write{{Kind: protocol.WriteDeletePrefix, Offset: deleteTo}})
			}
			// Two copies of the store's contents (Crash: the same durable
			// state through a new handle), one for each replica.
			sR, sP := store.Crash(), store.Crash()
			restored := openKeyed(t, sR, true)
			if off, ok := restored.KeyCheckpointRestored(); !ok || off != cp.Offset {
				t.Fatalf("KeyCheckpointRestored = %d, %v; want %d, true", off, ok, cp.Offset)
			}
			replayed := openKeyed(t, sP, false)
			if _, ok := replayed.KeyCheckpointRestored(); ok {
				t.Fatal("restored without a checkpoint offered")
			}
			if len(replayed.keys.producers) == 0 || len(replayed.keys.ids) == 0 || len(replayed.keys.cursors) == 0 || len(replayed.keys.logs) == 0 || len(replayed.keys.undo) == 0 {
				t.Fatalf("the log built a thin table (%d producers, %d IDs, %d cursors, %d logs, %d undo records): the test proves little",
					len(replayed.keys.producers), len(replayed.keys.ids), len(replayed.keys.cursors), len(replayed.keys.logs), len(replayed.keys.undo))
			}
			sameTable(t, "after the restart", &restored.keys, &replayed.keys, 200)
			for _, to := range []uint64{450, 250} {
				restored.truncate(to)
				replayed.truncate(to)
				settle(t, restored, sR)
				settle(t, replayed, sP)
				sameTable(t, fmt.Sprintf("after a truncation to %d", to), &restored.keys, &replayed.keys, 200)
			}
		})
	}
}

// TestStaleKeyCheckpointIsIgnored (R76): a checkpoint that does not
// describe the log is not used, and the table is the replayed one: its
// offset above the LEO (a truncation below it), the log's entry at O-1 of
// another epoch (truncated below O and appended again in a later epoch:
// the stale table would hold the removed entries' keys), its offset at or
// below the log start, data that does not decode. The positive control: the
// store as it was, restored.
func TestStaleKeyCheckpointIsIgnored(t *testing.T) {
	cases := []struct {
		name    string
		change  func(t *testing.T, s *storage.Memory, cp protocol.KeyCheckpoint)
		restore bool
	}{
		{"unchanged", func(*testing.T, *storage.Memory, protocol.KeyCheckpoint) {}, true},
		{"above the LEO", func(t *testing.T, s *storage.Memory, _ protocol.KeyCheckpoint) {
			applyWrites(t, s, []protocol.Write{{Kind: protocol.WriteTruncate, Offset: 250}})
		}, false},
		{"re-appended in a later epoch", func(t *testing.T, s *storage.Memory, _ protocol.KeyCheckpoint) {
			applyWrites(t, s, []protocol.Write{{Kind: protocol.WriteTruncate, Offset: 250}})
			rng := rand.New(rand.NewSource(99))
			applyWrites(t, s, []protocol.Write{{Kind: protocol.WriteAppend, Entries: keyedLog(rng, map[uint64]uint64{1: 1000, 2: 1000, 3: 1000, 4: 1000, 5: 1000, 6: 1000}, 250, 3, 200)}})
		}, false},
		{"below the log start", func(t *testing.T, s *storage.Memory, cp protocol.KeyCheckpoint) {
			applyWrites(t, s, []protocol.Write{{Kind: protocol.WriteDeletePrefix, Offset: cp.Offset}})
		}, false},
		{"malformed", func(t *testing.T, s *storage.Memory, cp protocol.KeyCheckpoint) {
			cp.Data = cp.Data[:len(cp.Data)-1]
			if err := s.SaveKeyCheckpoint(cp); err != nil {
				t.Fatal(err)
			}
		}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			store, cp := buildCheckpointed(t)
			tc.change(t, store, cp)
			restored := openKeyed(t, store.Crash(), true)
			if _, ok := restored.KeyCheckpointRestored(); ok != tc.restore {
				t.Fatalf("KeyCheckpointRestored = %v, want %v", ok, tc.restore)
			}
			replayed := openKeyed(t, store.Crash(), false)
			sameTable(t, tc.name, &restored.keys, &replayed.keys, 200)
		})
	}
}

// TestKeyTableEncodingRoundTrips: decode(encode(t)) is t, for a table the
// log above built; every shorter prefix of its data is refused.
func TestKeyTableEncodingRoundTrips(t *testing.T) {
	store, _ := buildCheckpointed(t)
	r := openKeyed(t, store, false)
	data := r.keys.encode()
	got, err := decodeKeyTable(data)
	if err != nil {
		t.Fatal(err)
	}
	sameTable(t, "decoded", &got, &r.keys, 0)
	if !slices.Equal(got.encode(), data) {
		t.Fatal("the decoded table encodes to other bytes")
	}
	for n := range len(data) {
		if _, err := decodeKeyTable(data[:n]); err == nil {
			t.Fatalf("a prefix of %d of %d bytes decoded", n, len(data))
		}
	}
}
