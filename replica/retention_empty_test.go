package replica

import (
	"testing"
	"time"

	"github.com/replog-io/replog/protocol"
)

// TestEmptyFollowerAboveLeaderLogStart (R53): a follower whose log is
// empty (last epoch 0: it reset to an earlier leader's log start) fetches
// at an offset above this leader's log start, which had not caught up
// with that leader's. It holds nothing that can diverge and everything
// below its offset was committed, so the leader serves it from there.
// Answering "diverging at epoch 0, end = my log start" made it truncate
// below its own log start (a write its store refuses: the node stops), or
// fetch in a loop (simulation seed 45 x1500).
func TestEmptyFollowerAboveLeaderLogStart(t *testing.T) {
	r, store := leaderWith(t, []string{"l", "f", "g"}, []uint64{1, 1, 1, 1, 1, 1}, protocol.QuorumState{Epoch: 1})
	primeFetch(t, r, "f", 7, 2) // the HW passes the epoch start (offset 6)
	if got, err := r.DeleteBefore(4); err != nil || got != 4 {
		t.Fatalf("setup: DeleteBefore(4) = %d, %v", got, err)
	}
	settle(t, r, store)

	fetch(r, "g", 1, r.epoch, 5, 0)
	resp := bodiesTo[*protocol.FetchResponse](r.Ready().Messages, "g")
	if len(resp) != 1 || resp[0].Error != protocol.FetchOK || len(resp[0].Entries) == 0 || resp[0].Entries[0].Offset != 5 {
		t.Fatalf("an empty follower at 5, above the log start 4: %+v; want OK with the entries from 5", resp)
	}
	// Controls: a last epoch this leader never had diverges as before,
	// and so does an empty follower beyond this leader's LEO.
	fetch(r, "g", 2, r.epoch, 5, 3)
	if resp := bodiesTo[*protocol.FetchResponse](r.Ready().Messages, "g"); len(resp) != 1 || resp[0].Error != protocol.FetchDivergingEpoch {
		t.Fatalf("a follower at 5 with last epoch 3: %+v; want diverging", resp)
	}
	fetch(r, "g", 3, r.epoch, r.log.LEO()+1, 0)
	if resp := bodiesTo[*protocol.FetchResponse](r.Ready().Messages, "g"); len(resp) != 1 || resp[0].Error != protocol.FetchDivergingEpoch {
		t.Fatalf("an empty follower past the leader's LEO: %+v; want diverging", resp)
	}
}

// TestEmptiedLogKeepsItsLastEpochForVotes (R21, R52): a voter that deleted
// every entry it held (a follower following its leader's log start up to
// its LEO) is as up to date as before: its vote and its own requests
// compare the epoch of the row covering its log start (the last deleted
// entry's), not 0. Comparing 0 granted a lagging candidate that lacked
// committed entries above the candidate's log start, which then led
// without them (simulation seed 95003504 x1500). A reset log (R53, no row
// left) still compares 0.
func TestEmptiedLogKeepsItsLastEpochForVotes(t *testing.T) {
	voter := func(t *testing.T, deleteTo uint64) *Replica {
		store := newStore(t, []uint64{1, 1, 1, 1, 1, 1}, protocol.QuorumState{Epoch: 1})
		if err := store.SetHWCheckpoint(6); err != nil {
			t.Fatal(err)
		}
		if err := store.DeletePrefix(deleteTo); err != nil {
			t.Fatal(err)
		}
		r := newTestReplica(t, testConfig("v", "v", "c", "d"), store)
		settle(t, r, store)
		return r
	}
	ask := func(t *testing.T, r *Replica, lastEpoch, leo uint64) bool {
		t.Helper()
		r.Step(protocol.Message{From: "c", To: "v", Body: &protocol.VoteRequest{Epoch: 2, CandidateID: "c", CandidateDirID: "c", VoterDirID: "v", PreVote: true, LastEpoch: lastEpoch, LEO: leo}})
		resp := bodiesTo[*protocol.VoteResponse](r.Ready().Messages, "c")
		if len(resp) != 1 {
			t.Fatalf("%d answers", len(resp))
		}
		return resp[0].Granted
	}
	r := voter(t, 6) // emptied: log start = LEO = 6, row (1, 6) left
	if ask(t, r, 1, 3) {
		t.Fatal("a voter whose entries up to 6 (epoch 1) were deleted granted a candidate with (epoch 1, LEO 3)")
	}
	if !ask(t, r, 1, 6) || !ask(t, r, 2, 1) {
		t.Fatal("it refused a candidate as up to date as it is, or of a later epoch")
	}
	r.becomeProspective()
	reqs := bodiesTo[*protocol.VoteRequest](r.Ready().Messages, "c")
	if len(reqs) != 1 || reqs[0].LastEpoch != 1 || reqs[0].LEO != 6 {
		t.Fatalf("its own pre-vote request %+v, want last epoch 1 at LEO 6", reqs)
	}
	// A reset log (no row): nothing to compare but its LEO.
	r = voter(t, 9)
	if !ask(t, r, 1, 3) {
		t.Fatal("a reset voter (no epoch row) refused a candidate with entries")
	}
}

// TestRetentionKeepsTheLastCommittedEntry (R51, R52): a deletion keeps the
// last committed, durable entry and never starts the log at the first
// offset of an epoch. A follower that had deleted up to its HW and then
// truncated what it held above it (entries a new leader did not have) was
// left with no entry and no epoch row: its elections compared last epoch
// 0 and it granted a candidate that lacked committed entries above that
// candidate's log start (simulation seed 95102495 x5000: "leader of epoch 6
// has {epoch=6 control} at offset 16, the entry committed there in epoch 3
// is {epoch=3 control}"). And a follower caught up exactly to a leader's
// log start at an epoch's first offset fetched with the previous epoch,
// which that leader no longer had: diverging answers, forever.
func TestRetentionKeepsTheLastCommittedEntry(t *testing.T) {
	// Entries 6 and 7 (epoch 2) are above the HW 6.
	r, store, req := followerAt(t, []uint64{1, 1, 1, 1, 1, 1, 2, 2}, 6)
	req = answer(t, r, store, req, protocol.FetchResponse{HighWatermark: 6, LogStartOffset: 6})
	if store.LogStart() != 5 || r.Status().LogStart != 5 {
		t.Errorf("log start %d (core %d) after following 6 with HW 6; want 5: the last committed entry stays", store.LogStart(), r.Status().LogStart)
	}
	// The leader has no epoch 2 at 6: truncate to 6.
	answer(t, r, store, req, protocol.FetchResponse{Error: protocol.FetchDivergingEpoch, DivergingEpoch: 1, DivergingEndOffset: 6, HighWatermark: 6, LogStartOffset: 6})
	if store.LEO() != 6 || store.LogStart() != 5 || len(store.EpochMap()) != 1 {
		t.Errorf("after the truncation: store [%d, %d) map %v; want [5, 6) and epoch 1's row", store.LogStart(), store.LEO(), store.EpochMap())
	}
	r.lastLeaderContact = time.Time{} // it has not heard from its leader for long
	r.Step(protocol.Message{From: "x", To: "f", Body: &protocol.VoteRequest{Epoch: 3, CandidateID: "x", CandidateDirID: "x", VoterDirID: "f", PreVote: true, LastEpoch: 1, LEO: 3}})
	for _, v := range bodiesTo[*protocol.VoteResponse](r.Ready().Messages, "x") {
		if v.Granted {
			t.Fatal("it granted a candidate (epoch 1, LEO 3) that lacks the committed entries 3..5")
		}
	}

	// A leader whose HW is the first offset of its epoch keeps the entry
	// before it: a follower caught up to there is served.
	l, lstore := leaderWith(t, []string{"l", "f", "g"}, []uint64{1, 1, 1, 2, 2, 2}, protocol.QuorumState{Epoch: 2})
	primeFetch(t, l, "f", 7, 3) // HW 7; epoch 3 starts at 6
	if got, _ := l.DeleteBefore(6); got != 5 {
		t.Fatalf("DeleteBefore(6) with epoch 3 starting at 6: log start %d, want 5", got)
	}
	settle(t, l, lstore)
	fetch(l, "g", 1, l.epoch, 6, 2)
	if resp := bodiesTo[*protocol.FetchResponse](l.Ready().Messages, "g"); len(resp) != 1 || resp[0].Error != protocol.FetchOK {
		t.Fatalf("a follower at 6 with last epoch 2: %+v; want OK", resp)
	}
}
