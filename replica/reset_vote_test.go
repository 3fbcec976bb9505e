package replica

import (
	"testing"

	"github.com/replog-io/replog/protocol"
)

// TestResetLogComparesInElections: a follower reset to its leader's log
// start (R53) holds no entries, but it stands for the committed log below
// that start: with the epoch of the leader's entry below it
// (FetchResponse.LogStartEpoch) as its one epoch row, in its view and in
// its store, it refuses a candidate whose log ends below the start and
// grants one that reaches it (R21), also after a restart. Without it, the
// empty log compared as epoch 0 and granted anyone (sim seed 80201032
// x5000: a candidate lacking committed entries was elected). Both reset
// paths: an out-of-range answer, and a diverging answer below the log
// start (which truncates first).
func TestResetLogComparesInElections(t *testing.T) {
	for _, truncate := range []bool{false, true} {
		store := newStore(t, []uint64{1, 1, 1}, protocol.QuorumState{Epoch: 2})
		r := newTestReplica(t, testConfig("f", "l", "f", "g"), store)
		settle(t, r, store)
		start := uint64(61)
		if truncate {
			start = 2 // what we hold at and above 2 is of epochs the leader lacks
		}
		r.resetLog(start, truncate, nil, 1)
		settle(t, r, store)
		if got := store.EpochMap(); len(got) != 1 || got[0] != (protocol.EpochStart{Epoch: 1, StartOffset: start}) {
			t.Fatalf("truncate %v: store epoch map %v, want {1 %d}", truncate, got, start)
		}
		vote := func(r *Replica, leo uint64, round uint64) bool {
			r.Step(protocol.Message{From: "g", To: "f", Body: &protocol.VoteRequest{Epoch: 3, CandidateID: "g", CandidateDirID: "g",
				VoterDirID: "f", LastEpoch: 1, LEO: leo, PreVote: true, Round: round}})
			msgs, _ := settle(t, r, store)
			resps := bodiesTo[*protocol.VoteResponse](msgs, "g")
			return len(resps) == 1 && resps[0].Granted
		}
		for _, restarted := range []bool{false, true} {
			if restarted {
				var err error
				if r, err = New(testConfig("f", "l", "f", "g"), bound(store, []string{"l", "f", "g"}), t0); err != nil {
					t.Fatal(err)
				}
				settle(t, r, store)
			}
			if vote(r, start-1, 1) {
				t.Errorf("truncate %v, restarted %v: granted a candidate whose log ends at %d, below the log start %d", truncate, restarted, start-1, start)
			}
			if !vote(r, start, 2) {
				t.Errorf("truncate %v, restarted %v: refused a candidate whose log reaches the log start %d (positive control)", truncate, restarted, start)
			}
		}
	}
}
