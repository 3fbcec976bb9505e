package replog

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/replog-io/replog/internal/shell"
	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/replica"
)

func TestHistogramBuckets(t *testing.T) {
	h := histogram{bounds: []time.Duration{time.Millisecond, 10 * time.Millisecond}}
	for _, d := range []time.Duration{0, time.Millisecond, time.Millisecond + 1, 10 * time.Millisecond, time.Second} {
		h.observe(d)
	}
	s := h.snapshot()
	// Upper bounds are inclusive, as Prometheus' "le" is.
	if want := []uint64{2, 2, 1}; fmt.Sprint(s.Counts) != fmt.Sprint(want) {
		t.Fatalf("counts %v, want %v", s.Counts, want)
	}
	if s.Count != 5 || s.Sum != 2*time.Millisecond+1+10*time.Millisecond+time.Second {
		t.Fatalf("count %d sum %v", s.Count, s.Sum)
	}
	s.Bounds[0], s.Counts[0] = 0, 99 // the snapshot is the caller's
	if h.bounds[0] != time.Millisecond || h.counts[0] != 2 {
		t.Fatal("the snapshot shares memory with the histogram")
	}
	if e := (&histogram{bounds: commitBounds}).snapshot(); len(e.Counts) != len(commitBounds)+1 {
		t.Fatalf("an empty histogram has %d buckets, want %d", len(e.Counts), len(commitBounds)+1)
	}
}

// TestLoopStatsRounds feeds loopStats the rounds of a leader by hand: a
// proposal and its ack, a fetch and its answer, a forwarded append, a
// follower that falls behind and catches up.
func TestLoopStatsRounds(t *testing.T) {
	var s loopStats
	voters := []protocol.Voter{{ID: "n1", DirID: "d1"}, {ID: "n2", DirID: "d2"}, {ID: "n3", DirID: "d3"}}
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	leader := func(leo uint64, remote map[string]uint64) replica.Status {
		return replica.Status{ID: "n1", Role: replica.RoleLeader, Epoch: 2, LeaderID: "n1", LEO: leo, RemoteLEO: remote, Voters: voters}
	}
	fetch := func(from string, id, off uint64) shell.Event {
		return shell.Message(protocol.Message{From: from, To: "n1", Body: &protocol.FetchRequest{FetchID: id, ReplicaID: from, FetchOffset: off}})
	}
	answer := func(to string, id uint64) protocol.Message {
		return protocol.Message{From: "n1", To: to, Body: &protocol.FetchResponse{FetchID: id}}
	}

	// A candidate round, then leadership.
	s.round(at(0), nil, &shell.Output{Status: replica.Status{ID: "n1", Role: replica.RoleCandidate, Epoch: 2}})
	s.round(at(1), nil, &shell.Output{Status: leader(10, nil)})
	// n2 fetches at the LEO (caught up), n3 far behind; a proposal of two
	// records (7 bytes) and a forwarded append arrive.
	s.round(at(2), []shell.Event{
		fetch("n2", 1, 10),
		fetch("n3", 1, 4),
		shell.Propose(1, [][]byte{[]byte("abc"), []byte("defg")}),
		shell.Message(protocol.Message{From: "n2", To: "n1", Body: &protocol.AppendRequest{RequestID: 1, Epoch: 2}}),
	}, &shell.Output{Status: leader(12, map[string]uint64{"n2": 10, "n3": 4})})
	// 30 ms later n2's fetch is answered (n3's stays parked), the
	// proposal commits, and one proposal that was never seen resolves
	// (ignored).
	s.round(at(32), nil, &shell.Output{
		Status:   leader(12, map[string]uint64{"n2": 10, "n3": 4}),
		Messages: []protocol.Message{answer("n2", 1), answer("n3", 7)},
		Resolved: []shell.Resolved{{ID: 1, Offset: 10}, {ID: 99}},
	})

	st := s.snapshotForTest(at(32))
	if st.ElectionsStarted != 1 || st.LeaderChanges != 1 {
		t.Errorf("elections %d, leader changes %d; want 1 and 1", st.ElectionsStarted, st.LeaderChanges)
	}
	if st.Appends != 2 || st.AppendBytes != 7 || st.CommitLatency.Count != 1 || st.CommitLatency.Sum != 30*time.Millisecond {
		t.Errorf("appends %d (%d bytes), commit latency %+v; want 2, 7 bytes, one of 30ms", st.Appends, st.AppendBytes, st.CommitLatency)
	}
	if st.ForwardedAppendsReceived != 1 || st.ForwardedAppendsSent != 0 {
		t.Errorf("forwarded received %d sent %d, want 1 and 0", st.ForwardedAppendsReceived, st.ForwardedAppendsSent)
	}
	// Both answers count as served; only n2's matched a fetch (n3's
	// FetchID is another), so one wait of 30 ms.
	if st.FetchesServed != 2 || st.FetchWait.Count != 1 || st.FetchWait.Sum != 30*time.Millisecond {
		t.Errorf("fetches served %d, fetch wait %+v; want 2 and one of 30ms", st.FetchesServed, st.FetchWait)
	}
	lag := map[string]FollowerStats{}
	for _, f := range st.Followers {
		lag[f.ID] = f
	}
	if n2 := lag["n2"]; !n2.Known || n2.LagEntries != 2 || n2.LagTime != 30*time.Millisecond {
		t.Errorf("n2 %+v: want 2 entries behind, last caught up at its fetch 30ms ago", n2)
	}
	if n3 := lag["n3"]; n3.LagEntries != 8 || n3.LagTime != 31*time.Millisecond {
		t.Errorf("n3 %+v: want 8 entries behind, never caught up since the leadership began 31ms ago", n3)
	}

	// n3 fetches up to the LEO the leader had at its previous fetch (10):
	// caught up as of that fetch. n2 fetches at the LEO: caught up now.
	s.round(at(50), []shell.Event{fetch("n3", 2, 10), fetch("n2", 2, 12)},
		&shell.Output{Status: leader(12, map[string]uint64{"n2": 12, "n3": 10})})
	st = s.snapshotForTest(at(60))
	for _, f := range st.Followers {
		switch {
		case f.ID == "n2" && (f.LagEntries != 0 || f.LagTime != 0):
			t.Errorf("n2 %+v: caught up, want no lag", f)
		case f.ID == "n3" && (f.LagEntries != 2 || f.LagTime != 58*time.Millisecond):
			t.Errorf("n3 %+v: want 2 entries, caught up as of its fetch at 2ms (58ms ago)", f)
		}
	}

	// The voter set changes under the same leadership: n3 removed, n4
	// added. n4 is tracked from the round it joined (caught up then), n3
	// no longer; n2 keeps its record (caught up at its fetch at 50ms).
	voters = []protocol.Voter{{ID: "n1", DirID: "d1"}, {ID: "n2", DirID: "d2"}, {ID: "n4", DirID: "d4"}}
	s.round(at(62), nil, &shell.Output{Status: leader(13, map[string]uint64{"n2": 12})})
	st = s.snapshotForTest(at(65))
	if len(st.Followers) != 2 || st.Followers[0].ID != "n2" || st.Followers[1].ID != "n4" ||
		st.Followers[0].LagTime != 15*time.Millisecond || st.Followers[1].Known || st.Followers[1].LagTime != 3*time.Millisecond {
		t.Errorf("after the voter change the followers are %+v; want n2 (caught up at 50ms) and n4 (new, since 62ms)", st.Followers)
	}

	// Losing the leadership forgets the followers; a new leader in a new
	// epoch is a leader change.
	s.round(at(70), nil, &shell.Output{Status: replica.Status{ID: "n1", Role: replica.RoleFollower, Epoch: 3, LeaderID: "n2"}})
	st = s.snapshotForTest(at(70))
	if st.Followers != nil || st.LeaderChanges != 2 {
		t.Errorf("after stepping down: followers %v, leader changes %d; want none and 2", st.Followers, st.LeaderChanges)
	}

	// Errors by kind.
	for i, err := range []error{
		&NotLeaderError{LeaderID: "n2"},
		fmt.Errorf("%w: leader changed", ErrUnknownOutcome),
		ErrTooLarge,
		errors.New("halted"),
	} {
		s.round(at(80+i), []shell.Event{shell.Propose(uint64(10+i), [][]byte{[]byte("x")})},
			&shell.Output{Status: replica.Status{ID: "n1", Role: replica.RoleFollower, Epoch: 3, LeaderID: "n2"},
				Resolved: []shell.Resolved{{ID: uint64(10 + i), Err: err}}})
	}
	s.round(at(90), nil, &shell.Output{Halted: errors.New("halt"), Status: replica.Status{ID: "n1", Role: replica.RoleFollower}})
	s.round(at(91), nil, &shell.Output{Halted: errors.New("halt"), Status: replica.Status{ID: "n1", Role: replica.RoleFollower}})
	for kind, want := range map[int]uint64{errKindAppendNotLeader: 1, errKindAppendUnknown: 1, errKindAppendTooLarge: 1, errKindAppendFailed: 1, errKindHalt: 1} {
		if got := s.errs[kind].Load(); got != want {
			t.Errorf("errors[%s] = %d, want %d", errKindNames[kind], got, want)
		}
	}
	if len(s.proposals) != 0 {
		t.Errorf("%d proposals still tracked after they resolved", len(s.proposals))
	}
}

// snapshotForTest is the loop-side part of Log.Stats, at now.
func (s *loopStats) snapshotForTest(now time.Time) Stats {
	var out Stats
	s.fill(&out, now, 0)
	return out
}

// TestStatsMoveAsTheClusterWorks: appends through a follower and the
// leader show in the counters of each; the leader sees its followers
// catch up, and one that is down fall behind.
func TestStatsMoveAsTheClusterWorks(t *testing.T) {
	c := newCluster(t, 3, nil)
	lid := c.leader(30 * time.Second)
	var fid, other string
	for id := range c.nodes {
		if id != lid {
			if fid == "" {
				fid = id
			} else {
				other = id
			}
		}
	}
	leader, follower := c.nodes[lid], c.nodes[fid]
	before := map[string]Stats{lid: leader.Stats(), fid: follower.Stats()}
	for id, s := range before {
		if len(s.Errors) != numErrKinds+1 {
			t.Errorf("%s: %d error kinds %v, want every kind", id, len(s.Errors), s.Errors)
		}
		if s.LeaderChanges < 1 || s.LeaderID != lid || s.StorageBytes == 0 {
			t.Errorf("%s: leader changes %d, leader %q, storage %d bytes; want >= 1, %s, > 0", id, s.LeaderChanges, s.LeaderID, s.StorageBytes, lid)
		}
	}

	ctx, cancel := appendCtx(t)
	defer cancel()
	const n = 5
	for i := range n {
		for _, l := range []*Log{leader, follower} {
			if _, err := l.Append(ctx, fmt.Appendf(nil, "record-%d", i)); err != nil { // 8 bytes
				t.Fatal(err)
			}
		}
	}
	for _, id := range []string{lid, fid} {
		s, b := c.nodes[id].Stats(), before[id]
		if s.Appends-b.Appends != n || s.AppendBytes-b.AppendBytes != 8*n || s.CommitLatency.Count-b.CommitLatency.Count != n {
			t.Errorf("%s: %d appends, %d bytes, %d commit latencies since before; want %d, %d, %d",
				id, s.Appends-b.Appends, s.AppendBytes-b.AppendBytes, s.CommitLatency.Count-b.CommitLatency.Count, n, 8*n, n)
		}
		if s.StorageCommitLatency.Count <= b.StorageCommitLatency.Count || s.HighWatermark <= b.HighWatermark {
			t.Errorf("%s: storage commits %d -> %d, HW %d -> %d; both must grow", id,
				b.StorageCommitLatency.Count, s.StorageCommitLatency.Count, b.HighWatermark, s.HighWatermark)
		}
	}
	ls, fs := leader.Stats(), follower.Stats()
	if fs.ForwardedAppendsSent-before[fid].ForwardedAppendsSent < n || ls.ForwardedAppendsReceived-before[lid].ForwardedAppendsReceived < n {
		t.Errorf("forwarded: %s sent %d, %s received %d; want >= %d each", fid, fs.ForwardedAppendsSent, lid, ls.ForwardedAppendsReceived, n)
	}
	if ls.FetchesServed <= before[lid].FetchesServed || ls.FetchWait.Count <= before[lid].FetchWait.Count {
		t.Errorf("leader served %d fetches (%d waits), no more than before", ls.FetchesServed, ls.FetchWait.Count)
	}
	if ls.ElectionsStarted < 1 || ls.Role != "leader" || fs.Followers != nil {
		t.Errorf("leader: %d elections, role %q; follower's followers %v", ls.ElectionsStarted, ls.Role, fs.Followers)
	}
	waitFor(t, "the leader sees both followers caught up", 30*time.Second, func() bool {
		s := leader.Stats()
		return len(s.Followers) == 2 && s.Followers[0].LagEntries == 0 && s.Followers[1].LagEntries == 0 &&
			s.Followers[0].LagTime == 0 && s.Followers[1].LagTime == 0
	})

	// One follower goes down; the other keeps the majority. The leader
	// sees the dead one fall behind, in entries and in time.
	c.nodes[other].crash()
	delete(c.nodes, other)
	if _, err := leader.Append(ctx, []byte("while down")); err != nil {
		t.Fatal(err)
	}
	lagOf := func() FollowerStats {
		for _, f := range leader.Stats().Followers {
			if f.ID == other {
				return f
			}
		}
		t.Fatalf("the leader's stats lost follower %s", other)
		return FollowerStats{}
	}
	waitFor(t, other+" lags", 30*time.Second, func() bool { f := lagOf(); return f.LagEntries > 0 && f.LagTime > 0 })
	first := lagOf()
	waitFor(t, other+"'s lag time grows", 30*time.Second, func() bool { return lagOf().LagTime > first.LagTime })
}

// BenchmarkLoopStatsRound is the counting a leader's loop does per round:
// a proposal, two fetches and their answers, a follower update.
func BenchmarkLoopStatsRound(b *testing.B) {
	var s loopStats
	voters := []protocol.Voter{{ID: "n1", DirID: "d1"}, {ID: "n2", DirID: "d2"}, {ID: "n3", DirID: "d3"}}
	st := replica.Status{ID: "n1", Role: replica.RoleLeader, Epoch: 2, LeaderID: "n1", LEO: 10, RemoteLEO: map[string]uint64{"n2": 10, "n3": 9}, Voters: voters}
	now := time.Unix(1000, 0)
	// The same inputs every round (the proposal resolves in its round, the
	// fetches are answered), so that only the counting is measured.
	events := []shell.Event{
		shell.Propose(1, [][]byte{[]byte("record")}),
		shell.Message(protocol.Message{From: "n2", To: "n1", Body: &protocol.FetchRequest{FetchID: 1, FetchOffset: 10}}),
		shell.Message(protocol.Message{From: "n3", To: "n1", Body: &protocol.FetchRequest{FetchID: 1, FetchOffset: 9}}),
	}
	out := shell.Output{Status: st, Resolved: []shell.Resolved{{ID: 1, Offset: 10}}, Messages: []protocol.Message{
		{From: "n1", To: "n2", Body: &protocol.FetchResponse{FetchID: 1}},
		{From: "n1", To: "n3", Body: &protocol.FetchResponse{FetchID: 1}},
	}}
	b.ReportAllocs()
	for range b.N {
		now = now.Add(time.Millisecond)
		s.round(now, events, &out)
	}
}

// BenchmarkStats is one Log.Stats call on a single node (the data
// directory's size included).
func BenchmarkStats(b *testing.B) {
	l, err := Open(Options{Dir: b.TempDir(), NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	if _, err := l.Append(context.Background(), []byte("x")); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for range b.N {
		_ = l.Stats()
	}
}

// BenchmarkPublish is a leader's loop publishing its round's Status (LEO
// and HW moved, nothing else) with no reader waiting.
func BenchmarkPublish(b *testing.B) {
	l := &Log{hwChanged: make(chan struct{})}
	voters := []protocol.Voter{{ID: "n1", DirID: "d1"}, {ID: "n2", DirID: "d2"}, {ID: "n3", DirID: "d3"}}
	cs := replica.Status{ID: "n1", Role: replica.RoleLeader, Epoch: 2, LeaderID: "n1", RemoteLEO: map[string]uint64{"n2": 10, "n3": 9},
		CaughtUp: map[string]bool{"n1": true, "n2": true, "n3": true}, Voters: voters}
	b.ReportAllocs()
	for i := range b.N {
		cs.LEO, cs.HighWatermark = uint64(10+i), uint64(9+i)
		l.publish(cs, cs.HighWatermark, true)
	}
}
