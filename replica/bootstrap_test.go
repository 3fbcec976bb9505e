package replica

import (
	"math/rand"
	"slices"
	"testing"
	"time"

	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/storage"
)

// TestFormedAnswer: a replica tells a bootstrapping candidate (a request
// that records no directory for it) that a cluster exists when its voter
// set does not record the candidate at the directory it has now (a new
// node, or a wiped voter's new incarnation: sim seed 84206751 x5000, where
// members restarted with HW 0 would otherwise have let a wiped sole
// bootstrap voter fork), whatever its HW; not when its set records the
// candidate as it is (a voter that lacks the set's entries: R57 keeps it
// from bootstrapping past the voters that hold them, and an observer
// holding a lost first set alone kept every bootstrap voter observing:
// sim seed 82042895 x1500); not when it holds no set and was told nothing.
func TestFormedAnswer(t *testing.T) {
	cases := []struct {
		name       string
		set        bool
		cand, dir  string
		wantFormed bool
	}{
		{"set records the candidate as it is", true, "a", "a", false},
		{"set records another incarnation", true, "a", "a2", true},
		{"candidate not in the set", true, "n", "n", true},
		{"no set", false, "a", "a2", false},
	}
	for _, c := range cases {
		store := storage.NewMemory()
		if c.set {
			applyWrites(t, store, []protocol.Write{{Kind: protocol.WriteAppend, Entries: []protocol.Entry{
				votersEntry(0, 1, protocol.Voter{ID: "a", DirID: "a"}, protocol.Voter{ID: "b", DirID: "b"}),
			}}})
		}
		r, err := New(testConfig("o", "a", "b"), store, t0) // an observer, HW 0
		if err != nil {
			t.Fatal(err)
		}
		settle(t, r, store)
		r.Step(protocol.Message{From: c.cand, To: "o", Body: &protocol.VoteRequest{Epoch: 1, CandidateID: c.cand, CandidateDirID: c.dir, PreVote: true, Round: 7}})
		msgs, _ := settle(t, r, store)
		resps := bodiesTo[*protocol.VoteResponse](msgs, c.cand)
		if len(resps) != 1 || resps[0].Formed != c.wantFormed {
			t.Errorf("%s: answers %v, want formed %v", c.name, resps, c.wantFormed)
		}
	}
}

// TestBootstrapRoundAsksAgain: a bootstrap round needs every bootstrap
// voter and every asked member (R57, R60), so it asks again, every quarter
// of ElectionTimeout, those that have not answered: one lost message must
// not cost the round (sim seed 82044721 x1500: seven voters and two
// observers failed round after round). Those that answered are not asked
// again.
func TestBootstrapRoundAsksAgain(t *testing.T) {
	store := storage.NewMemory()
	cfg := testConfig("a", "a", "b", "c")
	cfg.Members = []string{"o"}
	r, err := New(cfg, store, t0)
	if err != nil {
		t.Fatal(err)
	}
	settle(t, r, store)
	r.becomeProspective()
	msgs, _ := settle(t, r, store)
	asked := func(msgs []protocol.Message) []string {
		var to []string
		for _, m := range msgs {
			if _, ok := m.Body.(*protocol.VoteRequest); ok {
				to = append(to, m.To)
			}
		}
		slices.Sort(to)
		return to
	}
	if got := asked(msgs); !slices.Equal(got, []string{"b", "c", "o"}) {
		t.Fatalf("first requests to %v, want b, c and the member o", got)
	}
	round := r.round
	r.Step(protocol.Message{From: "b", To: "a", Body: &protocol.VoteResponse{Epoch: 0, VoterID: "b", VoterDirID: "b", Granted: true, PreVote: true, RequestEpoch: 1, Round: round}})
	r.Tick(t0.Add(cfg.ElectionTimeout / 8))
	if msgs, _ := settle(t, r, store); len(asked(msgs)) != 0 {
		t.Fatalf("asked again before a quarter of ElectionTimeout: %v", asked(msgs))
	}
	r.Tick(t0.Add(cfg.ElectionTimeout / 4))
	msgs, _ = settle(t, r, store)
	if got := asked(msgs); !slices.Equal(got, []string{"c", "o"}) || r.round != round || r.role != RoleProspective {
		t.Fatalf("after a quarter of ElectionTimeout: asked %v in round %d (was %d, role %v); want c and o again, same round", got, r.round, round, r.role)
	}
	// The answers complete the same round.
	r.Step(protocol.Message{From: "o", To: "a", Body: &protocol.VoteResponse{Epoch: 0, VoterID: "o", VoterDirID: "o", PreVote: true, RequestEpoch: 1, Round: round}})
	r.Step(protocol.Message{From: "c", To: "a", Body: &protocol.VoteResponse{Epoch: 0, VoterID: "c", VoterDirID: "c", Granted: true, PreVote: true, RequestEpoch: 1, Round: round}})
	settle(t, r, store)
	if r.role != RoleCandidate {
		t.Fatalf("after every answer: role %v, want candidate", r.role)
	}
}

// TestAddNeedsAFetchNow: a node is added only if its last fetch is at most
// FetchMaxWait plus ElectionTimeout old (a live replica fetches that
// often): one wiped just after it last fetched was added at its dead
// directory within FetchTimeout, and with one more voter lost the new set
// could never elect (sim seed 82044543 x1500). Positive control: after a
// fresh fetch the add is taken.
func TestAddNeedsAFetchNow(t *testing.T) {
	r, store := leaderWith(t, []string{"l", "a", "b"}, nil, protocol.QuorumState{})
	r.Propose(1, [][]byte{[]byte("x")})
	settle(t, r, store)
	fetchFrom(r, "a", "a", 10, r.log.LEO(), r.epoch)
	settle(t, r, store)
	leo := r.log.LEO()
	fetchFrom(r, "c", "dir-c", 20, leo, r.epoch)
	settle(t, r, store)
	r.Tick(r.now.Add(r.cfg.FetchMaxWait + r.cfg.ElectionTimeout))
	fetchFrom(r, "a", "a", 11, leo, r.epoch) // the leader keeps its quorum
	settle(t, r, store)
	wantErr(t, "add a node silent for FetchMaxWait+ElectionTimeout", changeAck(t, r, store, 2, protocol.VoterChange{Add: true, NodeID: "c"}), ErrUnknownNode)
	fetchFrom(r, "c", "dir-c", 21, leo, r.epoch)
	settle(t, r, store)
	if acks := changeAck(t, r, store, 3, protocol.VoterChange{Add: true, NodeID: "c"}); len(acks) != 0 || r.voterDir("c") != "dir-c" {
		t.Fatalf("add after a fresh fetch: acks %+v, voters %v; want it appended", acks, r.voterSet())
	}
}

// TestReplacementBlocksOtherChanges: the set in force owes b its place
// (an automatic replacement removed b's old incarnation, R58). While b is
// away nothing is blocked, and a change carries the debt on (sim bug J2:
// a change made between the two steps hid the removal from later
// leaders). Once b fetches from another directory, the leader takes no
// other change until b is added back, and the set that adds it owes
// nothing more. Positive controls: b's add is taken, and once it is in, so
// is another change; with ManualVoterChanges nothing is blocked and b is
// not added back by the leader.
func TestReplacementBlocksOtherChanges(t *testing.T) {
	v := func(id string) protocol.Voter { return protocol.Voter{ID: id, DirID: id} }
	for _, manual := range []bool{false, true} {
		store := storage.NewMemory()
		applyWrites(t, store, []protocol.Write{{Kind: protocol.WriteAppend, Entries: []protocol.Entry{
			votersEntry(0, 1, v("l"), v("a"), v("b")),
			owingEntry(1, 1, []protocol.Voter{v("b")}, v("l"), v("a")),
		}}, {Kind: protocol.WriteHWCheckpoint, Offset: 2}, {Kind: protocol.WriteQuorumState, Quorum: protocol.QuorumState{Epoch: 1}}})
		cfg := testConfig("l", "l", "a", "b")
		cfg.ManualVoterChanges = manual
		r := electOn(t, cfg, store, t0, "a")
		// Commit an entry of the epoch (R58), a fetching.
		r.Propose(100, [][]byte{[]byte("x")})
		settle(t, r, store)
		fetchFrom(r, "a", "a", 10, r.log.LEO(), r.epoch)
		settle(t, r, store)
		fetchFrom(r, "a", "a", 11, r.log.LEO(), r.epoch)
		settle(t, r, store)
		if !r.changeCommitted() {
			t.Fatalf("manual %v: setup: no change possible yet (hw %d)", manual, r.hw)
		}
		// b away: c's add is taken, and its set still owes b.
		fetchFrom(r, "c", "c", 30, r.log.LEO(), r.epoch)
		settle(t, r, store)
		if acks := changeAck(t, r, store, 1, protocol.VoterChange{Add: true, NodeID: "c"}); len(acks) != 0 || r.voterDir("c") != "c" || !slices.Equal(r.owed, []protocol.Voter{v("b")}) {
			t.Fatalf("manual %v: add of c while b is away: acks %+v voters %v owed %v; want it taken, b still owed", manual, acks, r.voterSet(), r.owed)
		}
		for i := range uint64(3) {
			fetchFrom(r, "a", "a", 12+i, r.log.LEO(), r.epoch)
			fetchFrom(r, "c", "c", 31+i, r.log.LEO(), r.epoch)
			settle(t, r, store)
		}
		// b fetching from a new directory, not caught up yet: other
		// changes wait (unless manual); once it has caught up it is added
		// back.
		for i := range uint64(2) {
			fetchFrom(r, "b", "b2", 50+i, 0, 0)
			settle(t, r, store)
		}
		if r.voterDir("b") != "" {
			t.Fatalf("manual %v: setup: b added back before it caught up: %v", manual, r.voterSet())
		}
		acks := changeAck(t, r, store, 2, protocol.VoterChange{NodeID: "c"})
		if manual {
			if len(acks) != 0 || r.voterDir("c") != "" {
				t.Fatalf("manual: removal of c while b is owed: acks %+v voters %v; want it taken", acks, r.voterSet())
			}
			fetchFrom(r, "b", "b2", 20, r.log.LEO(), r.epoch)
			settle(t, r, store)
			if r.voterDir("b") != "" {
				t.Fatalf("manual: b added back by the leader: %v", r.voterSet())
			}
			continue
		}
		wantErr(t, "another change while b is owed its place and fetches", acks, ErrVoterChangePending)
		fetchFrom(r, "b", "b2", 20, r.log.LEO(), r.epoch)
		settle(t, r, store)
		if r.voterDir("b") != "b2" || len(r.owed) != 0 {
			t.Fatalf("b fetching from b2: voters %v owed %v, want b added back at b2, nothing owed", r.voterSet(), r.owed)
		}
		for i := range uint64(3) {
			fetchFrom(r, "a", "a", 20+i, r.log.LEO(), r.epoch)
			fetchFrom(r, "b", "b2", 21+i, r.log.LEO(), r.epoch)
			fetchFrom(r, "c", "c", 40+i, r.log.LEO(), r.epoch)
			settle(t, r, store)
		}
		if acks := changeAck(t, r, store, 3, protocol.VoterChange{NodeID: "c"}); len(acks) != 0 || r.voterDir("c") != "" {
			t.Fatalf("removal of c after b is back: acks %+v, voters %v; want it taken", acks, r.voterSet())
		}
	}
}

// TestObserverFollowsALeaderItsSetLacks: a replica that votes in no set of
// its own follows a leader its set does not hold (R42): its set may be one
// its log has only caught up to (sim seed 84027860 x1500: a wiped sole
// bootstrap voter, its log at the first set {itself at its old
// directory}, dropped every answer of the leader added since). It takes
// the leader hint, fetches, and takes the answer with the entries that
// follow. Positive control of R42's voter side: a voter of that set does
// not take the hint.
func TestObserverFollowsALeaderItsSetLacks(t *testing.T) {
	for _, wiped := range []bool{true, false} {
		store := storage.NewMemory()
		applyWrites(t, store, []protocol.Write{{Kind: protocol.WriteAppend, Entries: []protocol.Entry{
			votersEntry(0, 1, protocol.Voter{ID: "v", DirID: "v"}),
		}}, {Kind: protocol.WriteHWCheckpoint, Offset: 1}, {Kind: protocol.WriteQuorumState, Quorum: protocol.QuorumState{Epoch: 1}}})
		cfg := testConfig("v", "v")
		cfg.DirID = "v" // the incarnation the set records
		if wiped {
			cfg.DirID = "v2" // a new incarnation: an observer of its own set
		}
		r, err := New(cfg, store, t0)
		if err != nil {
			t.Fatal(err)
		}
		settle(t, r, store)
		if wiped != (r.role == RoleObserver) {
			t.Fatalf("wiped %v: role %v", wiped, r.role)
		}
		r.Hint(Hint{Kind: HintLeader, Node: "o", Epoch: 1})
		msgs, _ := settle(t, r, store)
		reqs := bodiesTo[*protocol.FetchRequest](msgs, "o")
		if !wiped {
			if len(reqs) != 0 {
				t.Fatalf("a voter of {v} fetched from o, not in its set: %v", reqs)
			}
			continue
		}
		if len(reqs) != 1 {
			t.Fatalf("the observer took no hint naming o: fetches %v", reqs)
		}
		// The first answer makes o its leader (a new leader's answer is
		// taken from the next fetch on); the next one brings the entries.
		next := protocol.EncodeVoters([]protocol.Voter{{ID: "v", DirID: "v"}, {ID: "o", DirID: "o"}})
		for range 2 {
			r.Step(protocol.Message{From: "o", To: "v", Body: &protocol.FetchResponse{FetchID: reqs[0].FetchID, LeaderID: "o", Epoch: 1, HighWatermark: 2,
				Entries: []protocol.Entry{{Offset: 1, Epoch: 1, Type: protocol.EntryVoters, Data: next}}}})
			msgs, _ = settle(t, r, store)
			if reqs = bodiesTo[*protocol.FetchRequest](msgs, "o"); len(reqs) != 1 && r.log.LEO() < 2 {
				t.Fatalf("no next fetch to o: %v", msgs)
			}
		}
		if r.log.LEO() != 2 || r.leaderID != "o" || r.hw != 2 {
			t.Fatalf("after o's answer: leo %d leader %q hw %d; want 2, o, 2", r.log.LEO(), r.leaderID, r.hw)
		}
	}
}

// TestOwedPlace: a node is owed its place when the set in force owes it
// at another directory than the one it fetches from (R58), whatever
// changes came since the removal. Not when it fetches from the owed
// (removed) directory, not for a node the set does not owe (an operator's
// removal owes nothing), and not once a newer set without the debt is in
// force.
func TestOwedPlace(t *testing.T) {
	v := func(id, dir string) protocol.Voter { return protocol.Voter{ID: id, DirID: dir} }
	owesB := []protocol.Voter{v("b", "b")}
	cases := []struct {
		name string
		es   []protocol.Entry
		dir  string
		want bool
	}{
		{"removed, then c added", []protocol.Entry{votersEntry(0, 1, v("l", "l"), v("a", "a"), v("b", "b")), owingEntry(1, 1, owesB, v("l", "l"), v("a", "a")), owingEntry(2, 1, owesB, v("l", "l"), v("a", "a"), v("c", "c"))}, "b2", true},
		{"fetching from the removed directory", []protocol.Entry{votersEntry(0, 1, v("l", "l"), v("b", "b")), owingEntry(1, 1, owesB, v("l", "l"))}, "b", false},
		{"removed by an operator", []protocol.Entry{votersEntry(0, 1, v("l", "l"), v("a", "a"), v("b", "b")), votersEntry(1, 1, v("l", "l"), v("a", "a"))}, "b2", false},
		{"added back since", []protocol.Entry{votersEntry(0, 1, v("l", "l"), v("b", "b")), owingEntry(1, 1, owesB, v("l", "l")), votersEntry(2, 1, v("l", "l"), v("b", "b2"))}, "b3", false},
		{"no fetch directory", []protocol.Entry{votersEntry(0, 1, v("l", "l"), v("b", "b")), owingEntry(1, 1, owesB, v("l", "l"))}, "", false},
	}
	for _, c := range cases {
		store := storage.NewMemory()
		applyWrites(t, store, []protocol.Write{{Kind: protocol.WriteAppend, Entries: c.es}})
		r, err := New(testConfig("l", "l"), store, t0)
		if err != nil {
			t.Fatal(err)
		}
		if got := r.owedPlace("b", c.dir); got != c.want {
			t.Errorf("%s: owedPlace(b, %q) = %v, want %v", c.name, c.dir, got, c.want)
		}
	}
}

// TestFirstElectionWithinElectionTimeout: a replica whose log holds no
// voter set and that knows no leader has no leader to protect: its first
// pre-vote round (R60's, asking everyone) starts within ElectionTimeout of
// New, not after FetchTimeout. A replica that remembers a leader still
// counts its restart as contact (R22) and waits out FetchTimeout.
func TestFirstElectionWithinElectionTimeout(t *testing.T) {
	fresh, err := New(testConfig("a", "a", "b", "c"), storage.NewMemory(), t0) // no voter set: bootstrapping
	if err != nil {
		t.Fatal(err)
	}
	fresh.Tick(t0.Add(fresh.cfg.ElectionTimeout))
	if fresh.role != RoleProspective {
		t.Fatalf("a fresh replica is %v an ElectionTimeout after New, want prospective (FetchTimeout is %v)", fresh.role, fresh.cfg.FetchTimeout)
	}
	if got := len(bodiesTo[*protocol.VoteRequest](fresh.Ready().Messages, "b")); got != 1 {
		t.Fatalf("%d pre-vote requests to b, want 1", got)
	}
	known, err := New(testConfig("a", "a", "b", "c"), newStore(t, nil, protocol.QuorumState{Epoch: 1, LeaderID: "b"}), t0)
	if err != nil {
		t.Fatal(err)
	}
	known.Tick(t0.Add(known.cfg.FetchTimeout * 99 / 100))
	if known.role != RoleFollower {
		t.Fatalf("a replica that remembers its leader is %v before FetchTimeout, want follower", known.role)
	}
}

// TestFirstCandidateCampaignsAtOnce (R108): a new log's FirstCandidate
// starts its first round (R60's, asking every member) at New, with no
// election timeout, and asks those that did not answer again after a
// sixteenth of ElectionTimeout; every other bootstrap voter waits a full
// ElectionTimeout more than it would without one, so that the
// candidate's round comes first; a FirstCandidate that is not a voter
// changes nothing. Fails with replog_bug_first_candidate_waits.
func TestFirstCandidateCampaignsAtOnce(t *testing.T) {
	preVotes := func(msgs []protocol.Message) []string {
		var to []string
		for _, m := range msgs {
			if v, ok := m.Body.(*protocol.VoteRequest); ok && v.PreVote {
				to = append(to, m.To)
			}
		}
		slices.Sort(to)
		return to
	}
	for seed := range int64(20) {
		cfg := testConfig("a", "a", "b", "c")
		cfg.Rand = rand.New(rand.NewSource(seed))
		cfg.FirstCandidate = "a"
		cfg.Members = []string{"o"}
		store := storage.NewMemory()
		r, err := New(cfg, store, t0)
		if err != nil {
			t.Fatal(err)
		}
		r.Tick(t0)
		msgs, _ := settle(t, r, store)
		if got := preVotes(msgs); r.role != RoleProspective || !slices.Equal(got, []string{"b", "c", "o"}) {
			t.Fatalf("seed %d: the first candidate at New: role %v, pre-votes to %v; want prospective, asking b, c and the member o", seed, r.role, got)
		}
		// Its replicas open about when it does: those that have not
		// answered are asked again after a sixteenth of ElectionTimeout,
		// not a quarter.
		round := r.round
		r.Step(protocol.Message{From: "b", To: "a", Body: &protocol.VoteResponse{Epoch: 0, VoterID: "b", VoterDirID: "b", Granted: true, PreVote: true, RequestEpoch: 1, Round: round}})
		r.Tick(t0.Add(cfg.ElectionTimeout / 16))
		msgs, _ = settle(t, r, store)
		if got := preVotes(msgs); !slices.Equal(got, []string{"c", "o"}) || r.round != round {
			t.Fatalf("seed %d: the first candidate a sixteenth of ElectionTimeout after New asked %v (round %d, was %d); want c and o again, same round", seed, got, r.round, round)
		}

		cfg = testConfig("b", "a", "b", "c")
		cfg.Rand = rand.New(rand.NewSource(seed))
		cfg.FirstCandidate = "a"
		store = storage.NewMemory()
		if r, err = New(cfg, store, t0); err != nil {
			t.Fatal(err)
		}
		settle(t, r, store)
		r.Tick(t0.Add(cfg.ElectionTimeout - time.Nanosecond))
		if msgs, _ := settle(t, r, store); r.role != RoleFollower || len(preVotes(msgs)) != 0 {
			t.Fatalf("seed %d: another voter campaigned within ElectionTimeout of New (role %v): the first round is the first candidate's", seed, r.role)
		}
		r.Tick(t0.Add(2 * cfg.ElectionTimeout))
		if settle(t, r, store); r.role != RoleProspective {
			t.Fatalf("seed %d: another voter, 2*ElectionTimeout after New: role %v, want prospective (the first candidate may be down)", seed, r.role)
		}
	}
	// Not a voter: every replica waits a random part of ElectionTimeout,
	// as without one (some seed of these draws it above 0).
	late := false
	for seed := range int64(20) {
		cfg := testConfig("a", "a", "b", "c")
		cfg.Rand = rand.New(rand.NewSource(seed))
		cfg.FirstCandidate = "z"
		store := storage.NewMemory()
		r, err := New(cfg, store, t0)
		if err != nil {
			t.Fatal(err)
		}
		if d := r.electionDeadline.Sub(t0); d >= cfg.ElectionTimeout {
			t.Fatalf("seed %d: with a first candidate that is not a voter, the first round waits %v, want under ElectionTimeout", seed, d)
		} else if d > 0 {
			late = true
		}
	}
	if !late {
		t.Fatal("with a first candidate that is not a voter, every replica campaigned at once")
	}
}
