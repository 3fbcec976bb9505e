package replica

import (
	"testing"

	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/storage"
)

// TestPipelinedFetchWithoutDurableOffset (R70): the leader counts
// min(FetchOffset, DurableOffset) for a fetch that carries a durable
// offset, and the fetch offset for one that does not (decoded below wire
// version 8, as from the previous release, whose fetch offset is
// durable).
func TestPipelinedFetchWithoutDurableOffset(t *testing.T) {
	// The leader leads epoch 3 with its control entry at 4: LEO 5, and the
	// HW moves only past 4 (R32).
	for _, c := range []struct {
		name       string
		has        bool
		durable    uint64
		wantRemote uint64
		wantHW     uint64
	}{
		{"no durable offset: the fetch offset counts", false, 0, 5, 5},
		{"durable offset at the fetch offset", true, 5, 5, 5},
		{"durable offset behind: it counts, the HW waits", true, 4, 4, 0},
		{"durable offset 0", true, 0, 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, store := leaderWith(t, []string{"l", "f", "g"}, []uint64{1, 1, 2, 2}, protocol.QuorumState{Epoch: 2})
			r.Step(protocol.Message{From: "f", To: "l", Body: &protocol.FetchRequest{
				FetchID: 7, ReplicaID: "f", ReplicaDirID: "f", CurrentEpoch: 3, FetchOffset: 5, LastFetchedEpoch: 3,
				MaxBytes: 1 << 20, MaxWaitMs: 500, HasDurableOffset: c.has, DurableOffset: c.durable,
			}})
			settle(t, r, store)
			if got := r.leader.remote["f"]; got != c.wantRemote || r.hw != c.wantHW {
				t.Fatalf("remote LEO of f %d, HW %d; want %d, %d", got, r.hw, c.wantRemote, c.wantHW)
			}
			if got := r.leader.fetchOffset["f"]; got != c.wantRemote {
				t.Fatalf("the offset a voter change checks is %d, want %d", got, c.wantRemote)
			}
		})
	}
}

// pipeliningFollower returns follower f of leader L in epoch 1 at feature
// level 8 (as once the level entry is committed) and its first fetch.
func pipeliningFollower(t *testing.T) (*Replica, *storage.Memory, *protocol.FetchRequest) {
	t.Helper()
	store := newStore(t, nil, protocol.QuorumState{Epoch: 1, LeaderID: "L"})
	r := newTestReplica(t, testConfig("f", "f", "L"), store)
	r.level = protocol.FeatureLevelPipelinedFetch
	reqs := bodiesTo[*protocol.FetchRequest](r.Ready().Messages, "L")
	if len(reqs) != 1 || !reqs[0].HasDurableOffset || reqs[0].DurableOffset != 0 {
		t.Fatalf("first fetch %+v, want one with durable offset 0", reqs)
	}
	return r, store, reqs[0]
}

func okAnswer(req *protocol.FetchRequest, entries ...protocol.Entry) protocol.Message {
	return protocol.Message{From: "L", To: "f", Body: &protocol.FetchResponse{
		FetchID: req.FetchID, LeaderID: "L", Epoch: 1, Entries: entries,
	}}
}

// persistAll applies ws and reports them persisted.
func persistAll(t *testing.T, r *Replica, store *storage.Memory, ws []protocol.Write) {
	t.Helper()
	applyWrites(t, store, ws)
	r.Persisted(ws[len(ws)-1].Seq)
}

// TestPipelinedFetchWaitsForNonEntryWrites (R71): at level 8 a follower
// fetches with its entry append in flight, saying its durable offset; once
// that append is durable it sends one fresh fetch of the same offset that
// says so, and then nothing more while idle. A truncation or a new epoch
// in flight holds the next fetch until it is durable.
func TestPipelinedFetchWaitsForNonEntryWrites(t *testing.T) {
	t.Run("an append in flight: fetch at once, once more when durable", func(t *testing.T) {
		r, store, req := pipeliningFollower(t)
		r.Step(okAnswer(req, ents(0, 1, 1)...))
		rd := r.Ready()
		next := bodiesTo[*protocol.FetchRequest](rd.Messages, "L")
		if len(rd.Writes) != 1 || len(next) != 1 || next[0].FetchOffset != 2 || !next[0].HasDurableOffset || next[0].DurableOffset != 0 {
			t.Fatalf("writes %d, fetches %+v: want the append in flight and a fetch from 2 saying durable 0", len(rd.Writes), next)
		}
		if again := bodiesTo[*protocol.FetchRequest](r.Ready().Messages, ""); len(again) != 0 {
			t.Fatalf("a second fetch with nothing newly durable: %+v", again)
		}
		persistAll(t, r, store, rd.Writes)
		fresh := bodiesTo[*protocol.FetchRequest](r.Ready().Messages, "L")
		if len(fresh) != 1 || fresh[0].FetchOffset != 2 || fresh[0].DurableOffset != 2 || fresh[0].FetchID == next[0].FetchID {
			t.Fatalf("after the append is durable: %+v, want one fresh fetch from 2 saying durable 2", fresh)
		}
		if again := bodiesTo[*protocol.FetchRequest](r.Ready().Messages, ""); len(again) != 0 {
			t.Fatalf("more fetches at idle: %+v", again)
		}
		// An answer already on its way to the replaced fetch is taken.
		r.Step(okAnswer(next[0], ents(2, 1)...))
		if r.log.LEO() != 3 {
			t.Fatalf("LEO %d after the replaced fetch's answer, want 3 (late-answer rule)", r.log.LEO())
		}
	})
	t.Run("two answers in flight: no fetch until the first is durable", func(t *testing.T) {
		r, store, req := pipeliningFollower(t)
		r.Step(okAnswer(req, ents(0, 1, 1)...))
		rd1 := r.Ready()
		f2 := bodiesTo[*protocol.FetchRequest](rd1.Messages, "L")
		if len(f2) != 1 || f2[0].FetchOffset != 2 {
			t.Fatalf("fetches %+v, want one from 2", f2)
		}
		r.Step(okAnswer(f2[0], ents(2, 1, 1)...))
		rd2 := r.Ready()
		if f := bodiesTo[*protocol.FetchRequest](rd2.Messages, ""); len(rd2.Writes) != 1 || len(f) != 0 {
			t.Fatalf("writes %d, fetches %+v: want the second append and no fetch while two are in flight", len(rd2.Writes), f)
		}
		persistAll(t, r, store, rd1.Writes)
		f3 := bodiesTo[*protocol.FetchRequest](r.Ready().Messages, "L")
		if len(f3) != 1 || f3[0].FetchOffset != 4 || f3[0].DurableOffset != 2 {
			t.Fatalf("after the first append is durable: %+v, want a fetch from 4 saying durable 2", f3)
		}
	})
	t.Run("a truncation in flight holds the next fetch", func(t *testing.T) {
		r, store, req := pipeliningFollower(t)
		r.Step(okAnswer(req, ents(0, 1, 1)...))
		rd := r.Ready()
		next := bodiesTo[*protocol.FetchRequest](rd.Messages, "L")
		if len(next) != 1 {
			t.Fatalf("fetches %+v, want one", next)
		}
		r.Step(protocol.Message{From: "L", To: "f", Body: &protocol.FetchResponse{
			FetchID: next[0].FetchID, LeaderID: "L", Epoch: 1, Error: protocol.FetchDivergingEpoch,
			DivergingEpoch: 1, DivergingEndOffset: 1,
		}})
		rd2 := r.Ready()
		if len(rd2.Writes) != 1 || rd2.Writes[0].Kind != protocol.WriteTruncate {
			t.Fatalf("writes %+v, want the truncation", rd2.Writes)
		}
		if f := bodiesTo[*protocol.FetchRequest](rd2.Messages, ""); len(f) != 0 {
			t.Fatalf("fetch %+v sent with the truncation in flight", f)
		}
		persistAll(t, r, store, rd.Writes)
		if f := bodiesTo[*protocol.FetchRequest](r.Ready().Messages, ""); len(f) != 0 {
			t.Fatalf("fetch %+v sent with the truncation still in flight", f)
		}
		persistAll(t, r, store, rd2.Writes)
		f := bodiesTo[*protocol.FetchRequest](r.Ready().Messages, "L")
		if len(f) != 1 || f[0].FetchOffset != 1 || f[0].DurableOffset != 1 {
			t.Fatalf("after the truncation is durable: %+v, want a fetch from 1 saying durable 1", f)
		}
	})
	t.Run("a new epoch in flight holds the next fetch", func(t *testing.T) {
		r, store, req := pipeliningFollower(t)
		r.Step(protocol.Message{From: "L", To: "f", Body: &protocol.FetchResponse{
			FetchID: req.FetchID, LeaderID: "L", Epoch: 2, Error: protocol.FetchNotLeader,
		}})
		rd := r.Ready()
		if r.epoch != 2 || len(rd.Writes) == 0 {
			t.Fatalf("epoch %d, writes %+v: want epoch 2 being written", r.epoch, rd.Writes)
		}
		if f := bodiesTo[*protocol.FetchRequest](rd.Messages, ""); len(f) != 0 {
			t.Fatalf("fetch %+v sent with the new epoch in flight", f)
		}
		persistAll(t, r, store, rd.Writes)
		if f := bodiesTo[*protocol.FetchRequest](r.Ready().Messages, ""); len(f) != 1 || f[0].CurrentEpoch != 2 {
			t.Fatalf("after the epoch is durable: %+v, want one fetch in epoch 2", f)
		}
	})
	t.Run("below level 8 no fetch with the append in flight", func(t *testing.T) {
		r, store, req := pipeliningFollower(t)
		r.level = protocol.FeatureLevelJournal
		r.Step(okAnswer(req, ents(0, 1, 1)...))
		rd := r.Ready()
		if f := bodiesTo[*protocol.FetchRequest](rd.Messages, ""); len(f) != 0 {
			t.Fatalf("fetch %+v sent at level 7 with the append in flight", f)
		}
		persistAll(t, r, store, rd.Writes)
		f := bodiesTo[*protocol.FetchRequest](r.Ready().Messages, "L")
		if len(f) != 1 || f[0].FetchOffset != 2 || f[0].DurableOffset != 2 {
			t.Fatalf("after the append is durable: %+v, want a fetch from 2", f)
		}
	})
}

// TestPipelinedFreshFetchIsNotSentTheEntriesAgain (R71): the leader
// answered a fetch that was ahead of its durable offset with entries;
// the follower's fresh fetch of the same offset (the next FetchID), sent
// when its durable end reached that offset, gets the HW without the
// entries (the earlier answer carries them), and a fetch after that gets
// them again (a lost answer costs one fetch). A repeat of a fetch that
// was not ahead is answered as always, with the entries.
func TestPipelinedFreshFetchIsNotSentTheEntriesAgain(t *testing.T) {
	answer := func(t *testing.T, r *Replica, store *storage.Memory, id, durable uint64) *protocol.FetchResponse {
		t.Helper()
		r.Step(protocol.Message{From: "f", To: "l", Body: &protocol.FetchRequest{
			FetchID: id, ReplicaID: "f", ReplicaDirID: "f", CurrentEpoch: 3, FetchOffset: 2, LastFetchedEpoch: 1,
			MaxBytes: 1 << 20, MaxWaitMs: 500, HasDurableOffset: true, DurableOffset: durable,
		}})
		msgs, _ := settle(t, r, store)
		resps := bodiesTo[*protocol.FetchResponse](msgs, "f")
		if len(resps) != 1 || resps[0].FetchID != id || resps[0].Error != protocol.FetchOK {
			t.Fatalf("fetch %d: answers %+v, want one OK", id, resps)
		}
		return resps[0]
	}
	t.Run("ahead, then the fresh fetch", func(t *testing.T) {
		r, store := leaderWith(t, []string{"l", "f", "g"}, []uint64{1, 1, 2, 2}, protocol.QuorumState{Epoch: 2})
		if got := answer(t, r, store, 7, 1); len(got.Entries) != 3 {
			t.Fatalf("the fetch ahead of its durable offset got %d entries, want 3", len(got.Entries))
		}
		if got := answer(t, r, store, 8, 2); len(got.Entries) != 0 {
			t.Fatalf("the fresh fetch got %d entries again, want none", len(got.Entries))
		}
		if got := answer(t, r, store, 9, 2); len(got.Entries) != 3 {
			t.Fatalf("the fetch after the fresh one got %d entries, want 3", len(got.Entries))
		}
	})
	t.Run("a repeat of a fetch that was not ahead", func(t *testing.T) {
		r, store := leaderWith(t, []string{"l", "f", "g"}, []uint64{1, 1, 2, 2}, protocol.QuorumState{Epoch: 2})
		answer(t, r, store, 7, 2)
		if got := answer(t, r, store, 8, 2); len(got.Entries) != 3 {
			t.Fatalf("a repeated fetch got %d entries, want 3", len(got.Entries))
		}
	})
}
