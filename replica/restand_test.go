package replica

import (
	"testing"

	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/storage"
)

// TestFencedLeaderStandsAgain is R20's fencing fetch: a voter whose failed
// candidacy left it in a later epoch fetches from the leader the others
// name, asking it to stand again. The leader steps down, and stands at once
// in the epoch after the voter's if its log is at least as up to date; its
// followers take its vote request although they hear from it (R24/R46: it
// is their leader's own). Without the request, or when the voter's log is
// ahead, the leader only steps down.
func TestFencedLeaderStandsAgain(t *testing.T) {
	cases := []struct {
		name      string
		restand   bool
		offset    uint64 // the fetcher's LEO; the leader's is 3
		wantRole  Role
		wantEpoch uint64
	}{
		{"asked, log as up to date: stands again", true, 3, RoleCandidate, 5},
		{"asked, log behind the fetcher's: steps down only", true, 4, RoleFollower, 4},
		{"not asked: steps down only", false, 3, RoleFollower, 4},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, store := leaderWith(t, []string{"l", "a", "b"}, []uint64{1, 1}, protocol.QuorumState{Epoch: 1})
			if r.epoch != 2 || r.log.LEO() != 3 {
				t.Fatalf("setup: epoch %d leo %d", r.epoch, r.log.LEO())
			}
			r.Step(protocol.Message{From: "b", To: "l", Body: &protocol.FetchRequest{
				FetchID: 9, ReplicaID: "b", ReplicaDirID: "b", CurrentEpoch: 4, FetchOffset: c.offset, LastFetchedEpoch: 2, Restand: c.restand,
			}})
			msgs, _ := settle(t, r, store)
			if r.role != c.wantRole || r.epoch != c.wantEpoch {
				t.Fatalf("role %v epoch %d, want %v in %d", r.role, r.epoch, c.wantRole, c.wantEpoch)
			}
			votes := bodiesTo[*protocol.VoteRequest](msgs, "a")
			if c.wantRole == RoleCandidate && (len(votes) != 1 || votes[0].PreVote || votes[0].Epoch != 5) {
				t.Fatalf("vote requests to a: %v, want one for epoch 5, no pre-vote", votes)
			}
		})
	}
}

// TestOwnLeadersVoteRequestIsTaken: a follower in contact with its leader
// disregards vote requests for a later epoch (R46), except its leader's own
// (a fenced leader standing again, R20).
func TestOwnLeadersVoteRequestIsTaken(t *testing.T) {
	for _, from := range []string{"l", "c"} {
		store := newStore(t, []uint64{1}, protocol.QuorumState{Epoch: 1, LeaderID: "l"})
		r := newTestReplica(t, testConfig("f", "f", "l", "c"), store)
		settle(t, r, store)
		r.lastLeaderContact = r.now
		if !r.leaderAlive() {
			t.Fatal("setup: leader not alive")
		}
		r.Step(protocol.Message{From: from, To: "f", Body: &protocol.VoteRequest{Epoch: 3, CandidateID: from, CandidateDirID: from, VoterDirID: "f", LastEpoch: 1, LEO: 1, Round: 1}})
		msgs, _ := settle(t, r, store)
		resps := bodiesTo[*protocol.VoteResponse](msgs, from)
		granted := len(resps) == 1 && resps[0].Granted
		if from == "l" && (!granted || r.epoch != 3 || r.votedFor != "l") {
			t.Fatalf("its leader's request: answers %v, epoch %d voted %q; want a grant in 3", resps, r.epoch, r.votedFor)
		}
		if from == "c" && (len(resps) != 0 || r.epoch != 1) {
			t.Fatalf("another candidate while the leader is alive: answers %v epoch %d; want it disregarded", resps, r.epoch)
		}
	}
}

// TestRemovedVoterInALaterEpochIsHeard: a voter removed while a failed
// candidacy had left it in a later epoch can follow no leader of an epoch
// below its own, so it never fetches its removal (sim seed 92067076
// x1500). Its Restand fetch makes the leader stand again in the epoch
// after its, as R20 does for a voter; then it can follow. Anyone else
// outside the set still moves no epoch (R45): without Restand, at another
// directory, a node no set held, or a fetcher whose log is ahead. Fails
// with replog_bug_removed_stuck.
func TestRemovedVoterInALaterEpochIsHeard(t *testing.T) {
	v := func(id, dir string) protocol.Voter { return protocol.Voter{ID: id, DirID: dir} }
	cases := []struct {
		name          string
		from, dir     string
		restand       bool
		offset, epoch uint64 // the fetcher's LEO and last epoch
		stands        bool
	}{
		{"removed voter, asked", "b", "b", true, 1, 1, true},
		{"removed voter, not asked", "b", "b", false, 1, 1, false},
		{"another incarnation of it", "b", "b2", true, 1, 1, false},
		{"never a voter", "o", "o", true, 1, 1, false},
		{"removed voter, log ahead", "b", "b", true, 9, 9, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			store := storage.NewMemory()
			applyWrites(t, store, []protocol.Write{{Kind: protocol.WriteAppend, Entries: []protocol.Entry{
				votersEntry(0, 1, v("l", "l"), v("a", "a"), v("b", "b")),
				votersEntry(1, 1, v("l", "l"), v("a", "a")),
			}}, {Kind: protocol.WriteHWCheckpoint, Offset: 2}, {Kind: protocol.WriteQuorumState, Quorum: protocol.QuorumState{Epoch: 1}}})
			r := electOn(t, testConfig("l", "l", "a", "b"), store, t0, "a")
			if r.epoch != 2 {
				t.Fatalf("setup: epoch %d", r.epoch)
			}
			r.Step(protocol.Message{From: c.from, To: "l", Body: &protocol.FetchRequest{
				FetchID: 9, ReplicaID: c.from, ReplicaDirID: c.dir, CurrentEpoch: 4, FetchOffset: c.offset, LastFetchedEpoch: c.epoch, Restand: c.restand,
			}})
			msgs, _ := settle(t, r, store)
			if c.stands {
				votes := bodiesTo[*protocol.VoteRequest](msgs, "a")
				if r.role != RoleCandidate || r.epoch != 5 || len(votes) != 1 || votes[0].PreVote || votes[0].Epoch != 5 {
					t.Fatalf("role %v epoch %d, votes to a %v; want a candidate in 5 asking a", r.role, r.epoch, votes)
				}
				return
			}
			resps := bodiesTo[*protocol.FetchResponse](msgs, c.from)
			if r.role != RoleLeader || r.epoch != 2 || len(resps) != 1 || resps[0].Error != protocol.FetchNotLeader || resps[0].Epoch != 2 {
				t.Fatalf("role %v epoch %d, answers %v; want the leader unmoved in 2, answering not-leader", r.role, r.epoch, resps)
			}
		})
	}
}
