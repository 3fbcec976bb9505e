package replica

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/storage"
)

// TestStaleSetFollowsTheNamedLeader: a voter whose own set lacks the
// leader (it appended the set removing it, never committed) learns the
// leader from a voter's refusal of its pre-vote, which names the leader of
// the voter's epoch, not of the epoch the pre-vote asked for: it follows
// that leader in that epoch and fetches from it (sim bug L, seed 1009695
// x1500: the refusal vouched for the epoch after, so the replica refused
// to follow the leader in its own epoch, and dropped its not-leader
// answers naming it too, for ever).
func TestStaleSetFollowsTheNamedLeader(t *testing.T) {
	store := newStore(t, []uint64{1}, protocol.QuorumState{Epoch: 1})
	// f's set: f, a, b (the leader L removed by f's uncommitted entry).
	r := newTestReplica(t, testConfig("f", "f", "a", "b"), store)
	settle(t, r, store)
	r.Tick(t0.Add(time.Hour)) // no leader for ever: prospective
	if r.role != RoleProspective {
		t.Fatalf("setup: role %v, want prospective", r.role)
	}
	msgs, _ := settle(t, r, store)
	pre := bodiesTo[*protocol.VoteRequest](msgs, "a")
	if len(pre) != 1 || !pre[0].PreVote || pre[0].Epoch != 2 {
		t.Fatalf("setup: pre-votes to a %v", pre)
	}
	// a refuses, naming L, the leader of its (and our) epoch 1.
	r.Step(protocol.Message{From: "a", To: "f", Body: &protocol.VoteResponse{
		Epoch: 1, VoterID: "a", VoterDirID: "a", LeaderID: "L", PreVote: true, RequestEpoch: 2, Round: pre[0].Round}})
	if r.role != RoleFollower || r.leaderID != "L" || r.epoch != 1 {
		t.Fatalf("a voter's refusal naming L of epoch 1: role %v leader %q epoch %d, want a follower of L in 1", r.role, r.leaderID, r.epoch)
	}
	msgs, _ = settle(t, r, store)
	reqs := bodiesTo[*protocol.FetchRequest](msgs, "L")
	if len(reqs) != 1 {
		t.Fatalf("no fetch to the named leader L: %v", msgs)
	}
	// L's answer is taken: its entries are appended.
	r.Step(protocol.Message{From: "L", To: "f", Body: &protocol.FetchResponse{
		FetchID: reqs[0].FetchID, LeaderID: "L", Epoch: 1, HighWatermark: 2,
		Entries: []protocol.Entry{{Offset: 1, Epoch: 1, Type: protocol.EntryData, Data: []byte("x")}}}})
	settle(t, r, store)
	if r.log.LEO() != 2 {
		t.Fatalf("L's answer not taken: LEO %d, want 2", r.log.LEO())
	}
	// Negative control: a refusal naming L as the leader of an epoch that
	// is not the responder's own vouches for nothing in ours.
	r2 := newTestReplica(t, testConfig("f", "f", "a", "b"), newStore(t, []uint64{1}, protocol.QuorumState{Epoch: 1}))
	r2.Tick(t0.Add(time.Hour))
	r2.Step(protocol.Message{From: "a", To: "f", Body: &protocol.VoteResponse{
		Epoch: 3, VoterID: "a", VoterDirID: "a", LeaderID: "L", PreVote: true, RequestEpoch: 2, Round: r2.round}})
	if r2.mayLead("L", 1) || r2.mayLead("L", 2) {
		t.Fatalf("a refusal naming L in epoch 3 vouched for L in epochs 1 or 2: %v", r2.vouched)
	}
}

// TestWipedNodeCannotRefuseItsEpoch: a node whose directory was wiped may
// have led, on its old disk, the epoch it has since learned of (R47's
// record of it was on that disk): a late copy of a forwarded append
// naming that epoch gets an unknown outcome, never a final not-leader
// (sim bug K, seed 1000409 x1500: the old disk had appended it). A node
// that can tell (it knows the epoch's leader, or the set in force records
// it at its directory) still refuses for good.
func TestWipedNodeCannotRefuseItsEpoch(t *testing.T) {
	answer := func(r *Replica, store storage.Store) protocol.AppendError {
		t.Helper()
		r.Step(protocol.Message{From: "a", To: r.id, Body: &protocol.AppendRequest{RequestID: 5, Epoch: r.epoch, Records: [][]byte{[]byte("x")}}})
		msgs, _ := settle(t, r, store)
		resps := bodiesTo[*protocol.AppendResponse](msgs, "a")
		if len(resps) != 1 {
			t.Fatalf("answers %v, want one", resps)
		}
		return resps[0].Error
	}
	// The wiped node: an empty store, in epoch 3 with no leader known.
	fresh := storage.NewMemory()
	w, err := New(Config{ID: "l", DirID: "l.d1", Voters: []string{"l", "a", "b"},
		FetchTimeout: 2 * time.Second, ElectionTimeout: 500 * time.Millisecond, FetchMaxWait: 500 * time.Millisecond}, fresh, t0)
	if err != nil {
		t.Fatal(err)
	}
	w.becomeFollower(3, "")
	settle(t, w, fresh)
	if got := answer(w, fresh); got != protocol.AppendUnknown {
		t.Fatalf("wiped node in epoch 3, no leader known: %v, want unknown", got)
	}
	// Once it knows the leader of its epoch, the refusal is final.
	w.becomeFollower(3, "b")
	settle(t, w, fresh)
	if got := answer(w, fresh); got != protocol.AppendNotLeader {
		t.Fatalf("wiped node in epoch 3 led by b: %v, want not-leader", got)
	}
	// Positive control: a voter recorded at its directory, in an epoch
	// with no leader known, never led it (else its store would say so).
	store := newStore(t, []uint64{1}, protocol.QuorumState{Epoch: 3})
	v := newTestReplica(t, testConfig("l", "l", "a", "b"), store)
	settle(t, v, store)
	if v.epochLeader != "" || v.epoch != 3 {
		t.Fatalf("setup: epoch %d leader %q", v.epoch, v.epochLeader)
	}
	if got := answer(v, store); got != protocol.AppendNotLeader {
		t.Fatalf("recorded voter in epoch 3, no leader known: %v, want not-leader", got)
	}
}

// TestReplacementCompletedPastTheLogStart: the second step of an automatic
// replacement is read from the set in force, which owes the node its
// place (R58), and retention keeps that set's row: once the log start
// passes the entry that removed the wiped voter, the row below it still
// owes it, in the store (a leader elected after a restart) and in the
// core's own view (the leader that deleted it), and the node is added back
// at its new directory (sim bug J, seed 19702 x1500). Positive control:
// the removed incarnation itself is not added back.
func TestReplacementCompletedPastTheLogStart(t *testing.T) {
	set := func(ids ...string) []protocol.Voter {
		vs := make([]protocol.Voter, len(ids))
		for i, id := range ids {
			vs[i] = protocol.Voter{ID: id, DirID: id}
		}
		return vs
	}
	for _, c := range []struct {
		name       string
		storeStart uint64 // log start of the store at restart
		leaderTo   uint64 // then moved by the leader (0: not)
		dir        string
	}{
		{"store pruned before the restart", 4, 0, "b2"},
		{"deleted by the leader itself", 0, 4, "b2"},
		{"the removed incarnation", 4, 0, "b"},
	} {
		t.Run(c.name, func(t *testing.T) {
			store := storage.NewMemory()
			es := []protocol.Entry{votersEntry(0, 1, set("l", "a", "b")...), owingEntry(1, 1, set("b"), set("l", "a")...)}
			for o := uint64(2); o < 6; o++ {
				es = append(es, protocol.Entry{Offset: o, Epoch: 1, Type: protocol.EntryData, Data: []byte{byte(o)}})
			}
			ws := []protocol.Write{{Kind: protocol.WriteAppend, Entries: es}, {Kind: protocol.WriteHWCheckpoint, Offset: 6},
				{Kind: protocol.WriteQuorumState, Quorum: protocol.QuorumState{Epoch: 1}}}
			if c.storeStart > 0 {
				ws = append(ws, protocol.Write{Kind: protocol.WriteDeletePrefix, Offset: c.storeStart})
			}
			applyWrites(t, store, ws)
			r := electOn(t, testConfig("l", "l", "a", "b"), store, t0, "a")
			// Commit an entry of the epoch (a only: b is no voter).
			for i := range 2 {
				fetchFrom(r, "a", "a", uint64(10+i), r.log.LEO(), r.epoch)
				settle(t, r, store)
			}
			if c.leaderTo > 0 {
				if _, err := r.DeleteBefore(c.leaderTo); err != nil {
					t.Fatal(err)
				}
				settle(t, r, store)
				fetchFrom(r, "a", "a", 12, r.log.LEO(), r.epoch)
				settle(t, r, store)
			}
			if r.log.logStart < 2 || len(r.voters) != 2 {
				t.Fatalf("setup: log start %d (want past the removal at 1), voters %v", r.log.logStart, r.voters)
			}
			for i := range 3 {
				fetchFrom(r, "a", "a", uint64(20+i), r.log.LEO(), r.epoch)
				fetchFrom(r, "b", c.dir, uint64(30+i), r.log.LEO(), r.epoch)
				settle(t, r, store)
			}
			added := r.voterDir("b") == "b2"
			if added != (c.dir == "b2") {
				t.Fatalf("b fetching from %q past the log start %d: voters %v (rows %v); want b added back only at a new directory",
					c.dir, r.log.logStart, r.voterSet(), r.log.voterSets)
			}
		})
	}
}

// TestResetRecordsTheLeadersVoterSets: a leader's out-of-range answer
// carries its voter-set rows below its log start, and a follower that
// resets to that log start records them, in the deletion's write: it is
// never without the set in force (R53, R55). Without them a wiped voter
// reset to the log start held no set until it fetched the leader's copy
// above it, took itself for a bootstrap voter, and with the leader lost no
// leader was ever elected again (sim bug I, seed 3424 x1500).
func TestResetRecordsTheLeadersVoterSets(t *testing.T) {
	// The leader: its set (l, f, g at offset 0, the harness's) below a log
	// start of 5.
	l, lstore := leaderWith(t, []string{"l", "f", "g"}, []uint64{1, 1, 2, 2, 2, 2}, protocol.QuorumState{Epoch: 2})
	primeFetch(t, l, "f", 7, 3)
	if got, err := l.DeleteBefore(100); err != nil || got != 5 {
		t.Fatalf("setup: DeleteBefore = %d, %v", got, err)
	}
	settle(t, l, lstore)
	fetch(l, "g", 1, l.epoch, 0, 0)
	resps := bodiesTo[*protocol.FetchResponse](l.Ready().Messages, "g")
	want := []protocol.VotersAt{{Offset: 0, Voters: []protocol.Voter{{ID: "l", DirID: "l"}, {ID: "f", DirID: "f"}, {ID: "g", DirID: "g"}}}}
	if len(resps) != 1 || resps[0].Error != protocol.FetchOffsetOutOfRange || fmt.Sprint(resps[0].LogStartVoters) != fmt.Sprint(want) {
		t.Fatalf("out-of-range answer %+v, want the rows %v", resps, want)
	}

	// The follower: g wiped, an empty store with no set (bootstrap).
	gstore := storage.NewMemory()
	cfg := testConfig("g", "l", "f", "g")
	cfg.DirID = "g"
	g, err := New(cfg, gstore, t0)
	if err != nil {
		t.Fatal(err)
	}
	settle(t, g, gstore)
	if !g.bootstrap {
		t.Fatal("setup: a fresh store is not in the bootstrap set")
	}
	// It follows l in epoch 3 and fetches from offset 0.
	g.becomeFollower(l.epoch, "l")
	msgs, _ := settle(t, g, gstore)
	reqs := bodiesTo[*protocol.FetchRequest](msgs, "l")
	if len(reqs) != 1 {
		t.Fatalf("setup: fetches %v", msgs)
	}
	resp := *resps[0]
	resp.FetchID = reqs[0].FetchID
	g.Step(protocol.Message{From: "l", To: "g", Body: &resp})
	settle(t, g, gstore)
	if g.log.logStart != 5 || g.bootstrap || fmt.Sprint(g.voterSet()) != fmt.Sprint(want[0].Voters) || !g.voter {
		t.Fatalf("after the reset: log start %d, bootstrap %v, voters %v (voter %v); want 5 and the leader's set, g a voter",
			g.log.logStart, g.bootstrap, g.voterSet(), g.voter)
	}
	if got := fmt.Sprint(gstore.VoterSets()); got != fmt.Sprint(want) {
		t.Fatalf("the store's rows after the reset: %s, want %v", got, want)
	}
	// A restart reads them back.
	g2, err := New(cfg, gstore, t0)
	if err != nil {
		t.Fatal(err)
	}
	if g2.bootstrap || g2.electionQuorum() != 2 {
		t.Fatalf("after a restart: bootstrap %v, election quorum %d; want the recorded set, a majority of 3", g2.bootstrap, g2.electionQuorum())
	}
}

// TestReplacementOwedThroughOtherChanges is sim bug J2 end to end (seed
// 85200728 x5000): an automatic replacement removes b's old incarnation,
// the new one stays away past FetchTimeout, another change (add c) is
// made, retention deletes past every voter-set entry, and a leader elected
// after a restart must still add b back when it returns. The set that
// removed b owes it its place, and every set after carries the debt on
// (R58); read from the history of changes instead, the removal was pruned
// away and b was never added back. Fails with replog_bug_drop_owed.
func TestReplacementOwedThroughOtherChanges(t *testing.T) {
	v := func(id string) protocol.Voter { return protocol.Voter{ID: id, DirID: id} }
	store := storage.NewMemory()
	applyWrites(t, store, []protocol.Write{{Kind: protocol.WriteAppend, Entries: []protocol.Entry{
		votersEntry(0, 1, v("l"), v("a"), v("b")),
	}}, {Kind: protocol.WriteHWCheckpoint, Offset: 1}, {Kind: protocol.WriteQuorumState, Quorum: protocol.QuorumState{Epoch: 1}}})
	cfg := testConfig("l", "l", "a", "b")
	now := t0
	var r *Replica
	lead := func(grants ...string) {
		t.Helper()
		r = electOn(t, cfg, store, now, grants...)
	}
	fetchID := uint64(100)
	// round: time passes by d; the given incarnations fetch at the LEO.
	round := func(d time.Duration, who ...protocol.Voter) {
		t.Helper()
		now = now.Add(d)
		r.Tick(now)
		for range 2 {
			for _, w := range who {
				fetchID++
				fetchFrom(r, w.ID, w.DirID, fetchID, r.log.LEO(), r.epoch)
				settle(t, r, store)
			}
		}
	}
	lead("a")
	round(0, v("a"), v("b"))
	// b is wiped: b2 fetches, and the old b stays silent for FetchTimeout.
	for i := 0; len(r.owed) == 0; i++ {
		if i == 20 {
			t.Fatalf("setup: b not replaced: voters %v", r.voterSet())
		}
		w := v("a")
		if i%2 == 1 {
			w = protocol.Voter{ID: "b", DirID: "b2"}
		}
		round(cfg.FetchTimeout/8, w)
	}
	round(0, v("a")) // commits the removal; b2 is gone from here on
	if r.voterDir("b") != "" || !slices.Equal(r.owed, []protocol.Voter{v("b")}) || r.hw <= r.votersOffset {
		t.Fatalf("setup: voters %v owed %v (hw %d, set at %d); want b removed, owed, committed", r.voterSet(), r.owed, r.hw, r.votersOffset)
	}
	// b2 goes away for longer than FetchTimeout; c is added meanwhile.
	for range 6 {
		round(cfg.FetchTimeout/4, v("a"), v("c"))
	}
	if acks := changeAck(t, r, store, 1, protocol.VoterChange{Add: true, NodeID: "c"}); len(acks) != 0 || r.voterDir("c") != "c" {
		t.Fatalf("setup: add of c: acks %+v voters %v", acks, r.voterSet())
	}
	r.Propose(2, [][]byte{[]byte("x")})
	settle(t, r, store)
	round(0, v("a"), v("c"))
	// Retention passes every voter-set entry (the leader copies the set in
	// force above the log start, R55).
	if _, err := r.DeleteBefore(r.hw); err != nil {
		t.Fatal(err)
	}
	settle(t, r, store)
	round(0, v("a"), v("c"))
	if rows := store.VoterSets(); len(rows) == 0 || rows[0].Offset >= store.LogStart() || slices.ContainsFunc(rows, func(x protocol.VotersAt) bool {
		return slices.ContainsFunc(x.Voters, func(y protocol.Voter) bool { return y.ID == "b" })
	}) {
		t.Fatalf("setup: rows %v (log start %d); want the rows that held b pruned", rows, store.LogStart())
	}
	// A new leader, after a restart; b comes back with its new directory.
	now = now.Add(cfg.FetchTimeout)
	lead("a", "c")
	for range 3 {
		round(cfg.FetchTimeout/4, v("a"), v("c"), protocol.Voter{ID: "b", DirID: "b2"})
	}
	if r.voterDir("b") != "b2" || len(r.owed) != 0 {
		t.Fatalf("b back at b2 after other changes and retention: voters %v owed %v (rows %v); want b added back, nothing owed",
			r.voterSet(), r.owed, r.log.voterSets)
	}
}
