package replica

import (
	"errors"
	"testing"
	"time"

	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/storage"
)

// transferLeader is a leader "l" of l, a, b with one committed entry
// (offset 0) that a holds; b has fetched only up to 0.
func transferLeader(t *testing.T) (*Replica, *storage.Memory) {
	t.Helper()
	r, store := leaderWith(t, []string{"l", "a", "b"}, nil, protocol.QuorumState{})
	// Forwarded by b (request 50), committed at 0 below.
	r.Step(protocol.Message{From: "b", To: "l", Body: &protocol.AppendRequest{RequestID: 50, Epoch: r.epoch, Records: [][]byte{[]byte("x")}}})
	settle(t, r, store)
	fetch(r, "a", 10, r.epoch, 1, r.epoch)
	fetch(r, "b", 20, r.epoch, 0, 0)
	if msgs, _ := settle(t, r, store); len(bodiesTo[*protocol.AppendResponse](msgs, "b")) != 1 || r.hw != 1 {
		t.Fatalf("setup: answers %v hw %d", bodiesTo[*protocol.AppendResponse](msgs, "b"), r.hw)
	}
	return r, store
}

// TestTransferLeadershipRefusals covers what TransferLeadership refuses
// at once (R59), each case with the call that succeeds next to it.
func TestTransferLeadershipRefusals(t *testing.T) {
	t.Run("not the leader: names the leader it follows", func(t *testing.T) {
		store := newStore(t, nil, protocol.QuorumState{Epoch: 1, LeaderID: "a"})
		r := newTestReplica(t, testConfig("f", "f", "a", "b"), store)
		var nle *NotLeaderError
		if err := r.TransferLeadership("b"); !errors.As(err, &nle) || nle.LeaderID != "a" {
			t.Fatalf("err %v, want NotLeaderError naming a", err)
		}
	})
	t.Run("successors", func(t *testing.T) {
		for _, tc := range []struct {
			to   string
			want error // nil: started
		}{
			{"l", ErrNoSuccessor},   // itself
			{"zz", ErrNoSuccessor},  // not a voter
			{"b", nil},              // a lagging voter: accepted, it waits
			{"a", nil},              // caught up
			{"", nil},               // the most caught-up voter
			{"obs", ErrNoSuccessor}, // an observer fetching from the leader
		} {
			r, store := transferLeader(t)
			fetchFrom(r, "obs", "obs", 30, 1, r.epoch)
			settle(t, r, store)
			if err := r.TransferLeadership(tc.to); !errors.Is(err, tc.want) || (err == nil) != (tc.want == nil) {
				t.Errorf("to %q: err %v, want %v", tc.to, err, tc.want)
			}
			if started := r.transferring(); started != (tc.want == nil) {
				t.Errorf("to %q: transferring %v", tc.to, started)
			}
		}
	})
	t.Run("no other voter fetches", func(t *testing.T) {
		r, _ := leaderWith(t, []string{"l", "a", "b"}, nil, protocol.QuorumState{})
		if err := r.TransferLeadership(""); !errors.Is(err, ErrNoSuccessor) {
			t.Fatalf("err %v, want ErrNoSuccessor", err)
		}
		fetch(r, "b", 1, r.epoch, 0, 0)
		if err := r.TransferLeadership(""); err != nil || r.leader.transfer.to != "b" {
			t.Fatalf("after b fetched: err %v", err)
		}
	})
	t.Run("a voter silent for FetchTimeout is not picked", func(t *testing.T) {
		r, _ := transferLeader(t) // a at 1, b at 0
		r.Tick(t0.Add(time.Second))
		fetch(r, "b", 21, r.epoch, 1, r.epoch)
		r.Tick(t0.Add(2500 * time.Millisecond)) // a last fetched at t0
		if err := r.TransferLeadership(""); err != nil || r.leader.transfer.to != "b" {
			t.Fatalf("err %v, to %v: want b", err, r.leader.transfer)
		}
	})
	t.Run("a voter whose connection closed since its last fetch is not picked (R69)", func(t *testing.T) {
		r, _ := transferLeader(t) // a at 1, b at 0, both fetched just now
		r.PeerDown("a")
		if err := r.TransferLeadership(""); err != nil || r.leader.transfer.to != "b" {
			t.Fatalf("err %v, to %v: want b (a's connection closed)", err, r.leader.transfer)
		}
		r2, _ := transferLeader(t)
		r2.PeerDown("a")
		r2.PeerDown("b")
		if err := r2.TransferLeadership(""); !errors.Is(err, ErrNoSuccessor) {
			t.Fatalf("both connections closed: err %v, want ErrNoSuccessor", err)
		}
		// A fetch after the close is news again.
		r2.Tick(t0.Add(time.Millisecond))
		fetch(r2, "a", 11, r2.epoch, 1, r2.epoch)
		if err := r2.TransferLeadership(""); err != nil || r2.leader.transfer.to != "a" {
			t.Fatalf("a fetched again: err %v, want a", err)
		}
	})
	t.Run("the most caught-up voter, first in voter order on a tie", func(t *testing.T) {
		r, _ := transferLeader(t)
		if err := r.TransferLeadership(""); err != nil || r.leader.transfer.to != "a" {
			t.Fatalf("err %v, want a (at 1, b at 0)", err)
		}
		r2, _ := transferLeader(t)
		fetch(r2, "b", 21, r2.epoch, 1, r2.epoch)
		if err := r2.TransferLeadership(""); err != nil || r2.leader.transfer.to != "a" {
			t.Fatalf("tie: err %v, want a", err)
		}
	})
	t.Run("a single voter has nobody to hand over to", func(t *testing.T) {
		store := newStore(t, nil, protocol.QuorumState{})
		r := newTestReplica(t, testConfig("l", "l"), store)
		settle(t, r, store)
		if r.role != RoleLeader {
			t.Fatal("setup: not leader")
		}
		if err := r.TransferLeadership(""); !errors.Is(err, ErrNoSuccessor) {
			t.Fatalf("err %v, want ErrNoSuccessor", err)
		}
	})
	t.Run("one transfer at a time; the same one is joined", func(t *testing.T) {
		r, _ := transferLeader(t)
		if err := r.TransferLeadership("b"); err != nil {
			t.Fatal(err)
		}
		if err := r.TransferLeadership("a"); !errors.Is(err, ErrTransferInProgress) {
			t.Fatalf("another successor: err %v, want ErrTransferInProgress", err)
		}
		if err := r.TransferLeadership("b"); err != nil {
			t.Fatalf("the same successor: %v", err)
		}
		if err := r.TransferLeadership(""); err != nil {
			t.Fatalf("any successor: %v", err)
		}
	})
	t.Run("halted", func(t *testing.T) {
		r, _ := transferLeader(t)
		r.halt(ErrCommittedTruncation)
		if err := r.TransferLeadership("a"); !errors.Is(err, ErrCommittedTruncation) {
			t.Fatalf("err %v", err)
		}
	})
}

// TestTransferHoldsProposals is R59's leader side: while transferring it
// appends nothing (local proposals, barriers, voter changes, forwarded
// appends are held, unanswered); when it hands over they are refused as
// never appended, naming the successor, and a copy of a held forwarded
// request gets the same refusal; what it had appended is committed and
// acknowledged first. Positive control: an abandoned transfer appends
// what it held, in order.
func TestTransferHoldsProposals(t *testing.T) {
	hold := func(t *testing.T) (*Replica, *storage.Memory, *protocol.AppendRequest) {
		t.Helper()
		r, store := transferLeader(t)
		r.Propose(2, [][]byte{[]byte("in flight")}) // offset 1: appended, not committed
		settle(t, r, store)
		if err := r.TransferLeadership("a"); err != nil {
			t.Fatal(err)
		}
		leo := r.log.LEO()
		r.Propose(3, [][]byte{[]byte("held")})
		r.ProposeBarrier(4)
		r.ProposeVoterChange(5, protocol.VoterChange{Add: true, NodeID: "a"}) // a votes already: done at once
		req := &protocol.AppendRequest{RequestID: 77, Epoch: r.epoch, Records: [][]byte{[]byte("fwd")}}
		r.Step(protocol.Message{From: "b", To: "l", Body: req})
		r.Step(protocol.Message{From: "b", To: "l", Body: req}) // a copy while held
		msgs, acks := settle(t, r, store)
		if r.log.LEO() != leo || len(acks) != 0 || len(bodiesTo[*protocol.AppendResponse](msgs, "b")) != 0 {
			t.Fatalf("while transferring: leo %d (want %d), acks %v, answers %v", r.log.LEO(), leo, acks, bodiesTo[*protocol.AppendResponse](msgs, "b"))
		}
		return r, store, req
	}

	t.Run("handed over: held refused as never appended", func(t *testing.T) {
		r, store, req := hold(t)
		fetch(r, "a", 11, r.epoch, 2, r.epoch) // a holds the whole log
		rd := r.Ready()
		if len(rd.Transfers) != 1 || rd.Transfers[0].Err != nil || rd.Transfers[0].To != "a" {
			t.Fatalf("transfers %+v", rd.Transfers)
		}
		byID := map[uint64]Ack{}
		for _, a := range rd.Acks {
			byID[a.ID] = a
		}
		if a := byID[2]; a.Err != nil || a.FirstOffset != 1 {
			t.Fatalf("the appended proposal: %+v, want committed at 1", a)
		}
		for _, id := range []uint64{3, 4, 5} {
			var nle *NotLeaderError
			if !errors.As(byID[id].Err, &nle) || nle.LeaderID != "a" {
				t.Fatalf("held proposal %d: %+v, want NotLeaderError naming a", id, byID[id])
			}
		}
		resps := bodiesTo[*protocol.AppendResponse](rd.Messages, "b")
		if len(resps) != 1 || resps[0].Error != protocol.AppendNotLeader || resps[0].LeaderID != "a" || resps[0].RequestID != 77 {
			t.Fatalf("forwarded answers %v", resps)
		}
		for _, to := range []string{"a", "b"} {
			ee := bodiesTo[*protocol.EndEpoch](rd.Messages, to)
			if len(ee) != 1 || ee[0].Successor != "a" || ee[0].LeaderID != "l" || ee[0].Epoch != r.epoch {
				t.Fatalf("EndEpoch to %s: %v", to, ee)
			}
		}
		if r.role != RoleFollower || r.leaderID != "" || !r.lastLeaderContact.IsZero() || r.log.LEO() != 2 {
			t.Fatalf("after: role %v leader %q contact %v leo %d", r.role, r.leaderID, r.lastLeaderContact, r.log.LEO())
		}
		applyWrites(t, store, rd.Writes)
		r.Persisted(rd.Writes[len(rd.Writes)-1].Seq)
		r.Step(protocol.Message{From: "b", To: "l", Body: req}) // a late copy
		msgs, _ := settle(t, r, store)
		if resps := bodiesTo[*protocol.AppendResponse](msgs, "b"); len(resps) != 1 || resps[0].Error != protocol.AppendNotLeader {
			t.Fatalf("late copy: %v, want not-leader again", resps)
		}
		// Requests of the epoch handed over that arrive after it: never
		// appended, in that epoch and after the next one began; a copy of
		// one it appended is answered from memory (committed).
		handed := r.epoch
		late := func(id uint64) *protocol.AppendResponse {
			t.Helper()
			r.Step(protocol.Message{From: "b", To: "l", Body: &protocol.AppendRequest{RequestID: id, Epoch: handed, Records: [][]byte{[]byte("late")}}})
			msgs, _ := settle(t, r, store)
			resps := bodiesTo[*protocol.AppendResponse](msgs, "b")
			if len(resps) != 1 {
				t.Fatalf("request %d: answers %v", id, resps)
			}
			return resps[0]
		}
		if a := late(78); a.Error != protocol.AppendNotLeader {
			t.Fatalf("a request arriving after the hand-over: %v, want not-leader", a)
		}
		if a := late(50); a.Error != protocol.AppendOK || a.FirstOffset != 0 {
			t.Fatalf("a copy of a request appended before: %v, want its ack from memory", a)
		}
		r.Step(protocol.Message{From: "a", To: "l", Body: &protocol.BeginEpoch{Epoch: handed + 1, LeaderID: "a"}})
		settle(t, r, store)
		if a := late(79); a.Error != protocol.AppendNotLeader || a.LeaderID != "a" {
			t.Fatalf("after the next epoch began: %v, want not-leader naming a", a)
		}
	})
	t.Run("waits until what it appended is committed", func(t *testing.T) {
		r, store := transferLeader(t)
		r.Propose(2, [][]byte{[]byte("in flight")}) // offset 1, not yet durable here
		rd := r.Ready()
		if err := r.TransferLeadership("a"); err != nil {
			t.Fatal(err)
		}
		fetch(r, "a", 11, r.epoch, 2, r.epoch) // a holds it; a majority does not
		if rd := r.Ready(); len(rd.Transfers) != 0 || r.hw != 1 {
			t.Fatalf("handed over with offset 1 uncommitted (hw %d): %+v", r.hw, rd.Transfers)
		}
		applyWrites(t, store, rd.Writes)
		r.Persisted(rd.Writes[len(rd.Writes)-1].Seq)
		rd = r.Ready()
		if len(rd.Transfers) != 1 || rd.Transfers[0].Err != nil || len(rd.Acks) != 1 || rd.Acks[0].Err != nil {
			t.Fatalf("transfers %+v acks %+v: want handed over, 2 acknowledged", rd.Transfers, rd.Acks)
		}
	})
	t.Run("leadership lost otherwise: held refused, naming the new leader", func(t *testing.T) {
		r, _, _ := hold(t)
		r.Step(protocol.Message{From: "b", To: "l", Body: &protocol.BeginEpoch{Epoch: r.epoch + 1, LeaderID: "b"}})
		rd := r.Ready()
		var nle *NotLeaderError
		if len(rd.Transfers) != 1 || !errors.As(rd.Transfers[0].Err, &nle) || nle.LeaderID != "b" {
			t.Fatalf("transfers %+v", rd.Transfers)
		}
		for _, a := range rd.Acks {
			switch a.ID {
			case 2: // appended: the usual outcome
				if !errors.Is(a.Err, ErrUnknownOutcome) {
					t.Fatalf("ack %+v", a)
				}
			default:
				if !errors.As(a.Err, &nle) || nle.LeaderID != "b" {
					t.Fatalf("ack %+v", a)
				}
			}
		}
		if len(rd.Acks) != 4 {
			t.Fatalf("acks %+v", rd.Acks)
		}
		if resps := bodiesTo[*protocol.AppendResponse](rd.Messages, "b"); len(resps) != 1 || resps[0].Error != protocol.AppendNotLeader {
			t.Fatalf("forwarded answer %v", resps)
		}
	})
	t.Run("abandoned: held appended in order", func(t *testing.T) {
		r, store, _ := hold(t)
		r.Tick(t0.Add(r.cfg.FetchTimeout - time.Millisecond))
		if rd := r.Ready(); len(rd.Transfers) != 0 {
			t.Fatalf("abandoned early: %+v", rd.Transfers)
		}
		fetch(r, "a", 11, r.epoch, 1, r.epoch) // alive, not caught up
		fetch(r, "b", 21, r.epoch, 1, r.epoch)
		r.Tick(t0.Add(r.cfg.FetchTimeout))
		rd := r.Ready()
		if len(rd.Transfers) != 1 || !errors.Is(rd.Transfers[0].Err, ErrTransferTimedOut) {
			t.Fatalf("transfers %+v", rd.Transfers)
		}
		if r.role != RoleLeader || r.transferring() {
			t.Fatalf("role %v transferring %v: want leading on", r.role, r.transferring())
		}
		applyWrites(t, store, rd.Writes)
		r.Persisted(rd.Writes[len(rd.Writes)-1].Seq)
		es, err := store.Entries(2, 0, 1<<20)
		if err != nil || len(es) != 3 || string(es[0].Data) != "held" || es[1].Type != protocol.EntryControl || string(es[2].Data) != "fwd" {
			t.Fatalf("appended after the transfer was abandoned: %s (%v)", fmtEntries(es), err)
		}
		fetch(r, "a", 12, r.epoch, 5, r.epoch)
		msgs, acks := settle(t, r, store)
		acks = append(rd.Acks, acks...)
		if len(acks) != 4 {
			t.Fatalf("acks %+v, want 2, 3, 4 and 5", acks)
		}
		for _, a := range acks {
			if a.Err != nil {
				t.Fatalf("ack %+v", a)
			}
		}
		if resps := bodiesTo[*protocol.AppendResponse](msgs, "b"); len(resps) != 1 || resps[0].Error != protocol.AppendOK || resps[0].FirstOffset != 4 {
			t.Fatalf("forwarded answer %v", resps)
		}
	})
}

// TestEndEpochRules is R59's voter side: only EndEpoch from the leader of
// the receiver's epoch, naming that epoch, counts. It makes a voter
// forget its leader contact and stop following the leader, so that it
// grants the successor's vote at once (without it the vote request is
// disregarded: R24), while keeping the proposals it forwarded to the
// leader for the leader's answer; the successor becomes a candidate at
// once, with no pre-vote round.
func TestEndEpochRules(t *testing.T) {
	end := func(epoch uint64, leader, successor string) *protocol.EndEpoch {
		return &protocol.EndEpoch{Epoch: epoch, LeaderID: leader, Successor: successor}
	}
	for _, tc := range []struct {
		name   string
		epoch  uint64 // the receiver's epoch, led by l
		from   string
		msg    *protocol.EndEpoch
		taken  bool
		voters []string // default f, l, s
	}{
		{name: "from the epoch's leader", epoch: 1, from: "l", msg: end(1, "l", "s"), taken: true},
		{name: "of an older epoch", epoch: 2, from: "l", msg: end(1, "l", "s")},
		{name: "of a later epoch", epoch: 1, from: "l", msg: end(2, "l", "s")},
		{name: "from another voter", epoch: 1, from: "s", msg: end(1, "s", "s")},
		{name: "naming another leader than its sender", epoch: 1, from: "s", msg: end(1, "l", "s")},
		{name: "from a non-voter", epoch: 1, from: "x", msg: end(1, "x", "s")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := newStore(t, nil, protocol.QuorumState{Epoch: tc.epoch, LeaderID: "l"})
			r := newTestReplica(t, testConfig("f", "f", "l", "s"), store)
			settle(t, r, store)
			r.Propose(7, [][]byte{[]byte("fwd")}) // forwarded to l
			settle(t, r, store)
			r.Step(protocol.Message{From: tc.from, To: "f", Body: tc.msg})
			_, acks := settle(t, r, store)
			if len(acks) != 0 {
				t.Fatalf("acks %+v: the forwarded proposal is l's to answer", acks)
			}
			forgot := r.leaderID == "" && r.lastLeaderContact.IsZero()
			if forgot != tc.taken {
				t.Fatalf("leader %q contact %v: taken %v, want %v", r.leaderID, r.lastLeaderContact, forgot, tc.taken)
			}
			if tc.taken {
				// l's refusal of what it held, sent before EndEpoch
				// (delivered after it here): not appended, retry at s.
				r.Step(protocol.Message{From: "l", To: "f", Body: &protocol.AppendResponse{
					RequestID: r.nextRequestID - 1, Error: protocol.AppendNotLeader, LeaderID: "s",
				}})
				_, acks = settle(t, r, store)
				var nle *NotLeaderError
				if len(acks) != 1 || !errors.As(acks[0].Err, &nle) || nle.LeaderID != "s" {
					t.Fatalf("acks %+v, want the forwarded proposal refused naming s", acks)
				}
			}
			// The successor's vote request, for the next epoch.
			r.Step(protocol.Message{From: "s", To: "f", Body: &protocol.VoteRequest{
				Epoch: tc.epoch + 1, CandidateID: "s", CandidateDirID: "s", VoterDirID: "f", Round: 3,
			}})
			msgs, _ := settle(t, r, store)
			votes := bodiesTo[*protocol.VoteResponse](msgs, "s")
			if granted := len(votes) == 1 && votes[0].Granted; granted != tc.taken {
				t.Fatalf("vote answers %v: granted %v, want %v (disregarded while the leader is alive)", votes, granted, tc.taken)
			}
		})
	}
	t.Run("the successor stands at once, without a pre-vote", func(t *testing.T) {
		store := newStore(t, []uint64{1}, protocol.QuorumState{Epoch: 1, LeaderID: "l"})
		r := newTestReplica(t, testConfig("s", "f", "l", "s"), store)
		settle(t, r, store)
		r.Step(protocol.Message{From: "l", To: "s", Body: end(1, "l", "s")})
		msgs, _ := settle(t, r, store)
		if r.role != RoleCandidate || r.epoch != 2 || r.votedFor != "s" {
			t.Fatalf("role %v epoch %d voted %q: want a candidate of epoch 2", r.role, r.epoch, r.votedFor)
		}
		for _, to := range []string{"f", "l"} {
			reqs := bodiesTo[*protocol.VoteRequest](msgs, to)
			if len(reqs) != 1 || reqs[0].PreVote || reqs[0].Epoch != 2 || reqs[0].LEO != 1 {
				t.Fatalf("vote requests to %s: %v", to, reqs)
			}
		}
	})
	t.Run("an observer ignores it", func(t *testing.T) {
		store := newStore(t, nil, protocol.QuorumState{Epoch: 1, LeaderID: "l"})
		r := newTestReplica(t, testConfig("o", "f", "l", "s"), store)
		r.Step(protocol.Message{From: "l", To: "o", Body: end(1, "l", "o")})
		settle(t, r, store)
		if r.role != RoleObserver || r.leaderID != "l" {
			t.Fatalf("role %v leader %q", r.role, r.leaderID)
		}
	})
}
