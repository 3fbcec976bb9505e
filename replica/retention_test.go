package replica

import (
	"errors"
	"testing"

	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/storage"
)

// TestLeaderDeleteBefore (R51): the leader moves its log start, never to or
// above its HW or its durable LEO, and never to the first offset of an
// epoch (it keeps the entry before, and so the epoch a follower caught up to
// there fetches with); the log start travels in fetch answers, and a fetch
// below it is answered out of range. A non-leader refuses.
func TestLeaderDeleteBefore(t *testing.T) {
	r, store := leaderWith(t, []string{"l", "f", "g"}, []uint64{1, 1, 2, 2, 2, 2}, protocol.QuorumState{Epoch: 2})
	// f catches up fully: the HW moves past the epoch start (offset 6).
	primeFetch(t, r, "f", 7, 3)
	if r.hw != 7 {
		t.Fatalf("setup: hw %d, want 7", r.hw)
	}
	// Below the HW 7 is 6, epoch 3's first offset: 5.
	if got, err := r.DeleteBefore(100); err != nil || got != 5 {
		t.Fatalf("DeleteBefore(100) = %d, %v; want 5", got, err)
	}
	settle(t, r, store)
	if store.LogStart() != 5 || r.Status().LogStart != 5 {
		t.Fatalf("store log start %d, status %d; want 5", store.LogStart(), r.Status().LogStart)
	}
	if rows := r.log.epochs; len(rows) != 2 || rows[0] != (protocol.EpochStart{Epoch: 2, StartOffset: 5}) {
		t.Fatalf("epoch rows %v, want epoch 2's moved up to the log start, then epoch 3's", rows)
	}
	// Positive control first: a fetch at the log start is served and
	// names it; then one below it is out of range.
	fetch(r, "g", 0, r.epoch, 5, 2)
	resp := bodiesTo[*protocol.FetchResponse](r.Ready().Messages, "g")
	if len(resp) != 1 || resp[0].Error != protocol.FetchOK || resp[0].LogStartOffset != 5 {
		t.Fatalf("fetch at the log start: %+v", resp)
	}
	fetch(r, "g", 1, r.epoch, 2, 1)
	resp = bodiesTo[*protocol.FetchResponse](r.Ready().Messages, "g")
	if len(resp) != 1 || resp[0].Error != protocol.FetchOffsetOutOfRange || resp[0].LogStartOffset != 5 {
		t.Fatalf("fetch below the log start: %+v", resp)
	}
	// Never backwards.
	if got, _ := r.DeleteBefore(3); got != 5 || len(r.Ready().Writes) != 0 {
		t.Fatalf("DeleteBefore(3) after 5: log start %d", got)
	}

	fstore := newStore(t, []uint64{1}, protocol.QuorumState{Epoch: 1, LeaderID: "l"})
	f := newTestReplica(t, testConfig("f", "l", "f", "g"), fstore)
	var nl *NotLeaderError
	if _, err := f.DeleteBefore(1); !errors.As(err, &nl) || nl.LeaderID != "l" {
		t.Fatalf("DeleteBefore on a follower: %v, want NotLeaderError naming l", err)
	}
}

// followerAt returns a follower "f" of leader "L" in epoch 2 with a log of
// epochs, its HW at hw, and its first fetch.
func followerAt(t *testing.T, epochs []uint64, hw uint64) (*Replica, *storage.Memory, *protocol.FetchRequest) {
	t.Helper()
	store := newStore(t, epochs, protocol.QuorumState{Epoch: 2, LeaderID: "L"})
	if err := store.SetHWCheckpoint(hw); err != nil {
		t.Fatal(err)
	}
	r := newTestReplica(t, testConfig("f", "f", "L", "x"), store)
	reqs := bodiesTo[*protocol.FetchRequest](r.Ready().Messages, "L")
	if len(reqs) != 1 {
		t.Fatalf("setup: fetches %v", reqs)
	}
	return r, store, reqs[0]
}

// LogReaderStore is what these tests need of a store.
type LogReaderStore interface {
	LogReader
	Apply([]protocol.Write) error
}

// answer steps the leader's answer resp to req and settles; it returns the
// next fetch.
func answer(t *testing.T, r *Replica, store LogReaderStore, req *protocol.FetchRequest, resp protocol.FetchResponse) *protocol.FetchRequest {
	t.Helper()
	resp.FetchID, resp.LeaderID, resp.Epoch = req.FetchID, "L", 2
	r.Step(protocol.Message{From: "L", To: "f", Body: &resp})
	var msgs []protocol.Message
	for range 10 {
		rd := r.Ready()
		msgs = append(msgs, rd.Messages...)
		if len(rd.Writes) == 0 {
			break
		}
		if err := store.Apply(rd.Writes); err != nil {
			t.Fatal(err)
		}
		r.Persisted(rd.Writes[len(rd.Writes)-1].Seq)
	}
	reqs := bodiesTo[*protocol.FetchRequest](msgs, "L")
	if len(reqs) != 1 {
		t.Fatalf("%d fetches after an answer, want 1", len(reqs))
	}
	return reqs[0]
}

// TestFollowerFollowsLogStart (R52): a follower moves its log start to its
// leader's, never to its own HW.
func TestFollowerFollowsLogStart(t *testing.T) {
	r, store, req := followerAt(t, []uint64{1, 1, 1, 1, 1, 1}, 2)
	req = answer(t, r, store, req, protocol.FetchResponse{HighWatermark: 4, LogStartOffset: 5})
	if r.hw != 4 || store.LogStart() != 3 || r.log.logStart != 3 {
		t.Fatalf("hw %d, log start %d (store %d); want 4, 3: below its HW", r.hw, r.log.logStart, store.LogStart())
	}
	answer(t, r, store, req, protocol.FetchResponse{HighWatermark: 6, LogStartOffset: 5})
	if store.LogStart() != 5 || r.Status().LogStart != 5 {
		t.Fatalf("log start %d, want the leader's 5", store.LogStart())
	}
}

// TestFollowerResetsBelowLogStart (R53): a follower whose fetch offset is
// below the leader's log start empties its log and restarts it there, then
// fetches from there with no last epoch; its HW does not move until the
// leader answers that fetch.
func TestFollowerResetsBelowLogStart(t *testing.T) {
	r, store, req := followerAt(t, []uint64{1, 1, 2}, 1)
	r.Step(protocol.Message{From: "L", To: "f", Body: &protocol.FetchResponse{FetchID: req.FetchID, LeaderID: "L", Epoch: 2,
		Error: protocol.FetchOffsetOutOfRange, HighWatermark: 40, LogStartOffset: 30}})
	rd := r.Ready()
	if r.hw != 1 || r.ReadableHW() > 1 {
		t.Fatalf("hw %d (readable %d) before the reset is durable, want 1: the store still holds the old entries", r.hw, r.ReadableHW())
	}
	applyWrites(t, store, rd.Writes)
	r.Persisted(rd.Writes[len(rd.Writes)-1].Seq)
	if r.hw != 30 {
		t.Fatalf("hw %d once the reset is durable, want the log start 30 (committed below it)", r.hw)
	}
	if store.LogStart() != 30 || store.LEO() != 30 || len(store.EpochMap()) != 0 {
		t.Fatalf("store after reset: start %d LEO %d map %v; want 30, 30, empty", store.LogStart(), store.LEO(), store.EpochMap())
	}
	next := bodiesTo[*protocol.FetchRequest](r.Ready().Messages, "L")
	if len(next) != 1 {
		t.Fatalf("fetches after the reset: %v", next)
	}
	req = next[0]
	if req.FetchOffset != 30 || req.LastFetchedEpoch != 0 {
		t.Fatalf("next fetch offset %d last epoch %d; want 30, 0", req.FetchOffset, req.LastFetchedEpoch)
	}
	answer(t, r, store, req, protocol.FetchResponse{HighWatermark: 40, LogStartOffset: 30, Entries: []protocol.Entry{
		{Offset: 30, Epoch: 1, Type: protocol.EntryData, Data: []byte("a")},
	}})
	if store.LEO() != 31 || r.hw != 31 {
		t.Fatalf("after catching up from the log start: LEO %d hw %d; want 31, 31", store.LEO(), r.hw)
	}
	// Positive control: an out-of-range answer naming a log start at or
	// below our LEO changes nothing.
	r2, store2, req2 := followerAt(t, []uint64{1, 1, 2}, 1)
	answer(t, r2, store2, req2, protocol.FetchResponse{Error: protocol.FetchOffsetOutOfRange, HighWatermark: 3, LogStartOffset: 3})
	if store2.LEO() != 3 || store2.LogStart() != 0 {
		t.Fatalf("out of range at our LEO: start %d LEO %d; want 0, 3", store2.LogStart(), store2.LEO())
	}
}

// TestDivergingBelowLeaderLogStartTruncatesToHW: a leader whose log starts
// after every epoch it could compare answers diverging epoch 0 at its log
// start. The follower never truncates below that log start (it may hold
// committed entries there; sim seeds 38 and 547 x1500 truncated them to
// the HW): with its HW below it, it resets to it (R53: nothing left below,
// nothing of its own epochs above), its HW rising to it once that is durable; with its
// HW at it, it keeps the committed log up to it and drops what is above.
// Either way it fetches from the leader's log start with an empty log.
func TestDivergingBelowLeaderLogStartTruncatesToHW(t *testing.T) {
	r, store, req := followerAt(t, []uint64{1, 1, 1, 1, 1, 1}, 4)
	// The plain rule would truncate to min(5, our end for epoch 0 = our log
	// start 0), below the HW 4.
	req = answer(t, r, store, req, protocol.FetchResponse{Error: protocol.FetchDivergingEpoch, DivergingEpoch: 0, DivergingEndOffset: 5, HighWatermark: 4, LogStartOffset: 5})
	// Once the reset is durable its HW is the leader's log start (below it
	// everything was committed).
	if r.Err() != nil || store.LogStart() != 5 || store.LEO() != 5 || r.hw != 5 || req.FetchOffset != 5 || req.LastFetchedEpoch != 0 {
		t.Fatalf("err %v, store [%d, %d), hw %d, next fetch at %d last epoch %d; want no error, [5, 5), 5, 5, 0",
			r.Err(), store.LogStart(), store.LEO(), r.hw, req.FetchOffset, req.LastFetchedEpoch)
	}
	// HW at the leader's log start (which R51 never puts at an epoch's
	// first offset, so this answer comes only from a leader that does):
	// what is above it goes, the committed log below stays, and the log
	// start follows the leader's as a follower's does (below its HW).
	r, store, req = followerAt(t, []uint64{1, 1, 1, 1, 1, 1, 1}, 5)
	answer(t, r, store, req, protocol.FetchResponse{Error: protocol.FetchDivergingEpoch, DivergingEpoch: 0, DivergingEndOffset: 5, HighWatermark: 5, LogStartOffset: 5})
	if r.Err() != nil || store.LogStart() != 4 || store.LEO() != 5 || r.hw != 5 {
		t.Fatalf("err %v, store [%d, %d) map %v, hw %d; want no error, [4, 5), 5",
			r.Err(), store.LogStart(), store.LEO(), store.EpochMap(), r.hw)
	}
	// Without a leader log start to explain it, the same answer is a
	// violation and halts (R43; TestRefusesCommittedTruncation).
}

// TestDeleteRecords (R54): any replica may ask. A follower sends its leader
// one DeleteRecords naming the epoch; a replica with no leader refuses. The
// leader takes a member's request in its own epoch (bounded by its HW, as
// DeleteBefore) and drops one of another epoch or from a non-member.
func TestDeleteRecords(t *testing.T) {
	r, _, _ := followerAt(t, []uint64{1, 1, 1}, 2)
	r.Ready()
	if err := r.RequestDeleteBefore(2); err != nil {
		t.Fatalf("RequestDeleteBefore on a follower: %v", err)
	}
	asks := bodiesTo[*protocol.DeleteRecords](r.Ready().Messages, "L")
	if len(asks) != 1 || asks[0].Offset != 2 || asks[0].Epoch != 2 {
		t.Fatalf("follower sent %v, want one DeleteRecords{epoch 2, before 2} to L", asks)
	}
	lone := newTestReplica(t, testConfig("f", "f", "L", "x"), newStore(t, nil, protocol.QuorumState{Epoch: 1}))
	var nl *NotLeaderError
	if err := lone.RequestDeleteBefore(1); !errors.As(err, &nl) {
		t.Fatalf("RequestDeleteBefore with no leader: %v, want NotLeaderError", err)
	}

	l, store := leaderWith(t, []string{"l", "f", "g"}, []uint64{1, 1, 1, 1}, protocol.QuorumState{Epoch: 1})
	primeFetch(t, l, "f", 5, 2)
	if l.hw != 5 {
		t.Fatalf("setup: hw %d", l.hw)
	}
	ask := func(from string, epoch, offset uint64) uint64 {
		l.Step(protocol.Message{From: from, To: "l", Body: &protocol.DeleteRecords{Epoch: epoch, Offset: offset}})
		settle(t, l, store)
		return l.Status().LogStart
	}
	if got := ask("z", l.epoch, 3); got != 0 {
		t.Fatalf("a non-member's request moved the log start to %d", got)
	}
	if got := ask("f", l.epoch-1, 3); got != 0 {
		t.Fatalf("a request of an earlier epoch moved the log start to %d", got)
	}
	if got := ask("f", l.epoch, 3); got != 3 || store.LogStart() != 3 {
		t.Fatalf("a member's request: log start %d (store %d), want 3", got, store.LogStart())
	}
	// Past the HW 5: below it is 4, epoch 2's first offset; 3 it is.
	if got := ask("g", l.epoch, 99); got != 3 {
		t.Fatalf("a request past the HW: log start %d, want 3", got)
	}
}

// TestTruncationBelowTheLogStartEmptiesTheLog: a diverging answer whose
// truncation point is below the follower's log start means "everything it
// holds diverges": the follower empties its log at its log start, which
// is no truncation below its HW when the HW is that log start (a restart
// between a reset's deletion and its truncation leaves exactly that: sim
// seed 46000525 x20000 halted here). Entries above a higher HW still halt
// (TestRefusesCommittedTruncation).
func TestTruncationBelowTheLogStartEmptiesTheLog(t *testing.T) {
	store := newStore(t, []uint64{1, 1, 1, 1, 1, 2, 2, 2}, protocol.QuorumState{Epoch: 3, LeaderID: "L"})
	applyWrites(t, store, []protocol.Write{{Kind: protocol.WriteDeletePrefix, Offset: 5}, {Kind: protocol.WriteHWCheckpoint, Offset: 5}})
	r := newTestReplica(t, testConfig("f", "f", "L", "x"), store)
	if r.hw != 5 || r.log.logStart != 5 {
		t.Fatalf("setup: hw %d log start %d", r.hw, r.log.logStart)
	}
	req := bodiesTo[*protocol.FetchRequest](r.Ready().Messages, "L")[0]
	r.Step(protocol.Message{From: "L", To: "f", Body: &protocol.FetchResponse{FetchID: req.FetchID, LeaderID: "L", Epoch: 3,
		Error: protocol.FetchDivergingEpoch, DivergingEpoch: 2, DivergingEndOffset: 3, HighWatermark: 6, LogStartOffset: 2}})
	settle(t, r, store)
	if r.Err() != nil || store.LEO() != 5 || store.LogStart() != 5 {
		t.Fatalf("err %v, store [%d, %d); want no error and an empty log at 5", r.Err(), store.LogStart(), store.LEO())
	}
}

// TestDeletionBounds (R51): a leader's deletion stops below its HW when
// the HW is behind its durable LEO (followers lagging), and below its
// durable LEO when the HW is ahead of it (followers hold entries the
// leader's own write has not yet made durable). Each bound alone would
// delete what the other protects.
func TestDeletionBounds(t *testing.T) {
	t.Run("HW behind the durable LEO", func(t *testing.T) {
		r, store := leaderWith(t, []string{"l", "f", "g"}, []uint64{1, 1, 2, 2, 2, 2}, protocol.QuorumState{Epoch: 2})
		primeFetch(t, r, "f", 7, 3) // HW 7: the epoch start committed
		r.Propose(1, [][]byte{[]byte("a"), []byte("b"), []byte("c")})
		settle(t, r, store) // durable LEO 10, HW still 7
		if r.hw != 7 || r.log.durableEnd != 10 {
			t.Fatalf("setup: hw %d durable %d", r.hw, r.log.durableEnd)
		}
		if got, _ := r.DeleteBefore(100); got >= 7 || got == 0 {
			t.Fatalf("log start %d, want below the HW 7 (and moved)", got)
		}
	})
	t.Run("durable LEO behind the HW", func(t *testing.T) {
		r, store := leaderWith(t, []string{"l", "f", "g"}, []uint64{1, 1, 2, 2, 2, 2}, protocol.QuorumState{Epoch: 2})
		primeFetch(t, r, "f", 7, 3)
		primeFetch(t, r, "g", 7, 3)
		r.Propose(1, [][]byte{[]byte("a"), []byte("b"), []byte("c")})
		r.Ready() // the append is issued, not persisted: durable LEO 7
		fetch(r, "f", 1, r.epoch, 10, 3)
		fetch(r, "g", 1, r.epoch, 10, 3)
		r.Ready()
		// Two followers hold 10: a majority without the leader's own write.
		if r.hw != 10 || r.log.durableEnd != 7 {
			t.Fatalf("setup: hw %d durable %d, want 10 and 7", r.hw, r.log.durableEnd)
		}
		if got, _ := r.DeleteBefore(100); got >= 7 || got == 0 {
			t.Fatalf("log start %d, want below the durable LEO 7 (and moved)", got)
		}
		_ = store
	})
}
