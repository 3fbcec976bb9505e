package kv_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/replog-io/replog"
	"github.com/replog-io/replog/kv"
)

// TestCompactedLogReplaysToTheSameState (R105): a random workload of
// Puts, Deletes, Creates and Updates over a few keys (and cold keys
// written early only) on a compacted log
// (tombstones kept for ever, as the KV with conditional writes needs),
// compacted; a KV opened on it from the start, which replays only what
// compaction left, holds exactly the state of the KV that applied every
// entry: the same keys, values and revisions. The pass must have removed
// entries, and have compacted past the cold keys' last writes.
func TestCompactedLogReplaysToTheSameState(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			dir := t.TempDir()
			o := replog.Options{Dir: dir, NoSync: true, SegmentBytes: 256 << 10, DedupWindow: time.Millisecond,
				Compaction: replog.Compaction{Enabled: true, Lag: time.Millisecond, TombstoneRetention: -1, Interval: time.Hour}}
			l, err := replog.Open(o)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			ctx := testCtx(t)
			if err := l.WaitReady(ctx); err != nil {
				t.Fatal(err)
			}
			for l.Status().FeatureLevel < replog.FeatureLevelKeys {
				time.Sleep(20 * time.Millisecond)
			}
			live := openKV(t, l, kv.Options{})
			rng := rand.New(rand.NewPCG(seed, 9))
			var coldEnd uint64        // past the cold keys' last write
			pad := make([]byte, 2000) // the commit journal moves writes into segments once 2 MiB wait
			for i := range 2500 {
				key := fmt.Sprintf("k%d", rng.IntN(30))
				if i < 300 && rng.IntN(3) == 0 {
					// Cold keys, written in the first 300 only: their
					// newest entries lie in what the pass compacts.
					key = fmt.Sprintf("cold%d", rng.IntN(10))
				}
				val := append(fmt.Appendf(nil, "%d:", i), pad...)
				switch r := rng.IntN(10); {
				case r < 5:
					_, err = live.Put(ctx, key, val)
				case r < 7:
					_, err = live.Delete(ctx, key)
				case r < 8:
					_, err = live.Create(ctx, key, val)
				default:
					expected := uint64(0)
					if e, gerr := live.Get(key); gerr == nil && rng.IntN(3) > 0 {
						expected = e.Revision // right two times in three
					} else if gerr == nil {
						expected = e.Revision + 1
					}
					_, err = live.Update(ctx, key, val, expected)
				}
				if key[0] == 'c' {
					coldEnd = l.Status().HighWatermark
				}
				var mismatch *kv.RevisionMismatchError
				if err != nil && !errors.Is(err, kv.ErrExists) && !errors.As(err, &mismatch) {
					t.Fatal(err)
				}
			}
			// The commit journal moves the writes into segments in the
			// background: pass until one finds sealed segments.
			var st replog.Stats
			for range 100 {
				if err := l.Compact(); err != nil {
					t.Fatal(err)
				}
				if st = l.Stats(); st.CompactionEntriesRemoved > 0 && st.CompactionPoint >= coldEnd {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			if st.CompactionEntriesRemoved == 0 || st.CompactionPoint < coldEnd {
				t.Fatalf("the pass removed %d entries below %d, not past the cold keys' writes (%d)", st.CompactionEntriesRemoved, st.CompactionPoint, coldEnd)
			}
			replayed := openKV(t, l, kv.Options{})
			if err := replayed.Barrier(ctx); err != nil {
				t.Fatal(err)
			}
			if err := live.Barrier(ctx); err != nil {
				t.Fatal(err)
			}
			keys, again := live.Keys(""), replayed.Keys("")
			if !slices.Equal(keys, again) {
				t.Fatalf("keys %v, replayed %v", keys, again)
			}
			for _, k := range keys {
				a, err1 := live.Get(k)
				b, err2 := replayed.Get(k)
				if err1 != nil || err2 != nil || a.Revision != b.Revision || string(a.Value) != string(b.Value) {
					t.Fatalf("key %s: live %d (%v), replayed %d (%v)", k, a.Revision, err1, b.Revision, err2)
				}
			}
			if rs := replayed.Stats(); rs.Applied >= live.Stats().Applied {
				t.Fatalf("the replay applied %d entries, the live KV %d: nothing was compacted away", rs.Applied, live.Stats().Applied)
			}
			// History names only what the log still holds: at least the
			// current value.
			for _, k := range keys {
				h, err := replayed.History(ctx, k)
				if err != nil || len(h) == 0 || h[len(h)-1].Revision != mustGet(t, live, k).Revision {
					t.Fatalf("History(%s) = %v, %v", k, h, err)
				}
			}
		})
	}
}

func mustGet(t *testing.T, s *kv.KV, k string) kv.Entry {
	t.Helper()
	e, err := s.Get(k)
	if err != nil {
		t.Fatal(err)
	}
	return e
}
