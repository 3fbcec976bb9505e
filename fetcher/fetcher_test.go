package fetcher

import (
	"slices"
	"testing"
	"time"

	"github.com/replog-io/replog/protocol"
)

// testLog is a follower log described by its epoch map and LEO.
type testLog struct {
	leo    uint64
	start  uint64
	epochs []protocol.EpochStart
}

func (l testLog) LEO() uint64 { return l.leo }

func (l testLog) LastEntryEpoch() uint64 {
	if l.leo == 0 {
		return 0
	}
	var e uint64
	for _, r := range l.epochs {
		if r.StartOffset <= l.leo-1 {
			e = r.Epoch
		}
	}
	return e
}

func (l testLog) EndOffsetForEpoch(epoch uint64) (uint64, uint64) {
	for i := len(l.epochs) - 1; i >= 0; i-- {
		if l.epochs[i].Epoch <= epoch {
			end := l.leo
			if i+1 < len(l.epochs) {
				end = l.epochs[i+1].StartOffset
			}
			return l.epochs[i].Epoch, end
		}
	}
	return 0, l.start
}

func rows(pairs ...uint64) []protocol.EpochStart {
	var out []protocol.EpochStart
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, protocol.EpochStart{Epoch: pairs[i], StartOffset: pairs[i+1]})
	}
	return out
}

var now = time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)

func TestBuild(t *testing.T) {
	f := New("f", 1000, 500*time.Millisecond, 7)
	log := testLog{leo: 5, epochs: rows(1, 0, 3, 2)}
	req := f.Build("L", 4, log, now)
	want := protocol.FetchRequest{FetchID: 7, ReplicaID: "f", CurrentEpoch: 4, FetchOffset: 5, LastFetchedEpoch: 3, MaxBytes: 1000, MaxWaitMs: 500}
	if *req != want {
		t.Fatalf("Build = %+v, want %+v", *req, want)
	}
	if !f.Outstanding() || f.Target() != "L" || !f.SentAt().Equal(now) {
		t.Fatalf("outstanding=%v target=%q sentAt=%v", f.Outstanding(), f.Target(), f.SentAt())
	}
	if req2 := f.Build("L", 4, log, now); req2.FetchID != 8 {
		t.Fatalf("second fetch ID = %d, want 8 (IDs never repeat)", req2.FetchID)
	}
	empty := f.Build("L", 1, testLog{}, now)
	if empty.FetchOffset != 0 || empty.LastFetchedEpoch != 0 {
		t.Fatalf("empty log fetch = %+v", empty)
	}
}

func TestRoundRobin(t *testing.T) {
	f := New("b", 1, time.Second, 1)
	var got []string
	for range 4 {
		got = append(got, f.RoundRobin([]string{"a", "b", "c"}, "b"))
	}
	if want := []string{"a", "c", "a", "c"}; !slices.Equal(got, want) {
		t.Fatalf("round robin = %v, want %v", got, want)
	}
	if f.RoundRobin([]string{"b"}, "b") != "" {
		t.Fatal("round robin over only self must be empty")
	}
}

func TestHandle(t *testing.T) {
	// The follower's log: epoch 1 at 0, epoch 3 at 2, LEO 5.
	followerLog := testLog{leo: 5, epochs: rows(1, 0, 3, 2)}
	entries := []protocol.Entry{
		{Offset: 5, Epoch: 3, Type: protocol.EntryData, Data: []byte("x")},
		{Offset: 6, Epoch: 4, Type: protocol.EntryControl},
	}
	type tc struct {
		name   string
		from   string // default "L"
		resp   protocol.FetchResponse
		epoch  uint64 // follower's current epoch; default 4
		leader string // follower's known leader; default "L"
		log    *testLog
		want   Decision
	}
	cases := []tc{
		{
			name: "ok with entries",
			resp: protocol.FetchResponse{LeaderID: "L", Epoch: 4, HighWatermark: 3, LogStartOffset: 0, Entries: entries},
			want: Decision{Action: Append, Entries: entries, HighWatermark: 3},
		},
		{
			name: "ok with a voter set",
			resp: protocol.FetchResponse{LeaderID: "L", Epoch: 4, HighWatermark: 3, Entries: []protocol.Entry{
				{Offset: 5, Epoch: 4, Type: protocol.EntryVoters, Data: protocol.EncodeVoters([]protocol.Voter{{ID: "L", DirID: "d"}})},
			}},
			want: Decision{Action: Append, HighWatermark: 3, Entries: []protocol.Entry{
				{Offset: 5, Epoch: 4, Type: protocol.EntryVoters, Data: protocol.EncodeVoters([]protocol.Voter{{ID: "L", DirID: "d"}})},
			}},
		},
		{
			name: "a malformed voter set is never stored",
			resp: protocol.FetchResponse{LeaderID: "L", Epoch: 4, HighWatermark: 3, Entries: []protocol.Entry{
				{Offset: 5, Epoch: 4, Type: protocol.EntryVoters, Data: []byte{1, 1, 0}},
			}},
			want: Decision{Action: Drop},
		},
		{
			name: "an unknown entry type is never stored",
			resp: protocol.FetchResponse{LeaderID: "L", Epoch: 4, HighWatermark: 3, Entries: []protocol.Entry{
				{Offset: 5, Epoch: 4, Type: protocol.EntryType(9)},
			}},
			want: Decision{Action: Drop},
		},
		{
			name: "ok without entries carries the HW",
			resp: protocol.FetchResponse{LeaderID: "L", Epoch: 4, HighWatermark: 5},
			want: Decision{Action: Append, HighWatermark: 5},
		},
		{
			name: "stale fetch ID",
			resp: protocol.FetchResponse{FetchID: 99, LeaderID: "L", Epoch: 4},
			want: Decision{Action: Drop},
		},
		{
			name: "response from another node than the target",
			from: "X",
			resp: protocol.FetchResponse{LeaderID: "X", Epoch: 4},
			want: Decision{Action: Drop},
		},
		{
			name:   "leader answer from a node that is not our leader",
			leader: "M",
			resp:   protocol.FetchResponse{LeaderID: "L", Epoch: 4},
			want:   Decision{Action: Drop},
		},
		{
			name: "OK claiming another leader than the sender",
			resp: protocol.FetchResponse{LeaderID: "M", Epoch: 4},
			want: Decision{Action: Drop},
		},
		{
			name: "older epoch answer",
			resp: protocol.FetchResponse{LeaderID: "L", Epoch: 3},
			want: Decision{Action: Drop},
		},
		{
			name: "fenced: a newer epoch and its leader",
			resp: protocol.FetchResponse{LeaderID: "N", Epoch: 6, Error: protocol.FetchFencedEpoch},
			want: Decision{Action: NewEpoch, Epoch: 6, LeaderID: "N"},
		},
		{
			name: "fenced at our own epoch is inconsistent",
			resp: protocol.FetchResponse{LeaderID: "L", Epoch: 4, Error: protocol.FetchFencedEpoch},
			want: Decision{Action: Drop},
		},
		{
			name: "newer epoch naming us as leader: adopt without a leader",
			resp: protocol.FetchResponse{LeaderID: "f", Epoch: 5, Error: protocol.FetchNotLeader},
			want: Decision{Action: NewEpoch, Epoch: 5},
		},
		{
			name:   "not-leader names the leader of our epoch",
			leader: "-",
			resp:   protocol.FetchResponse{LeaderID: "M", Epoch: 4, Error: protocol.FetchNotLeader},
			want:   Decision{Action: NewLeader, Epoch: 4, LeaderID: "M"},
		},
		{
			name:   "not-leader knows none: retry elsewhere",
			leader: "-",
			resp:   protocol.FetchResponse{Epoch: 4, Error: protocol.FetchNotLeader},
			want:   Decision{Action: Retry},
		},
		{
			name:   "not-leader from a lagging node: retry elsewhere",
			leader: "-",
			resp:   protocol.FetchResponse{Epoch: 2, Error: protocol.FetchNotLeader},
			want:   Decision{Action: Retry},
		},
		{
			name: "our leader says it is not the leader",
			resp: protocol.FetchResponse{Epoch: 4, Error: protocol.FetchNotLeader},
			want: Decision{Action: LeaderGone},
		},
		{
			name:   "leaderless follower: an OK answer reveals the leader",
			leader: "-",
			resp:   protocol.FetchResponse{LeaderID: "L", Epoch: 4, Entries: entries},
			want:   Decision{Action: NewLeader, Epoch: 4, LeaderID: "L"},
		},
		{
			// Leader has epoch 3 ending at 4: truncate to min(4, own end of 3 = 5).
			name: "diverging: leader's end is smaller",
			resp: protocol.FetchResponse{LeaderID: "L", Epoch: 4, Error: protocol.FetchDivergingEpoch, DivergingEpoch: 3, DivergingEndOffset: 4},
			want: Decision{Action: Truncate, TruncateTo: 4, Epoch: 3},
		},
		{
			// KIP-279: the leader's largest epoch ≤ 3 is 2, ending at 4; our
			// largest ≤ 2 is 1, ending at 2: truncate to 2, not 4.
			name: "diverging: own end is smaller (KIP-279)",
			resp: protocol.FetchResponse{LeaderID: "L", Epoch: 4, Error: protocol.FetchDivergingEpoch, DivergingEpoch: 2, DivergingEndOffset: 4},
			want: Decision{Action: Truncate, TruncateTo: 2, Epoch: 2},
		},
		{
			name: "diverging below every epoch: truncate to the log start",
			resp: protocol.FetchResponse{LeaderID: "L", Epoch: 4, Error: protocol.FetchDivergingEpoch, DivergingEpoch: 0, DivergingEndOffset: 0},
			want: Decision{Action: Truncate, TruncateTo: 0, Epoch: 0},
		},
		{
			name: "diverging that would not truncate is dropped",
			resp: protocol.FetchResponse{LeaderID: "L", Epoch: 4, Error: protocol.FetchDivergingEpoch, DivergingEpoch: 3, DivergingEndOffset: 9},
			want: Decision{Action: Drop},
		},
		{
			name: "out of range",
			resp: protocol.FetchResponse{LeaderID: "L", Epoch: 4, Error: protocol.FetchOffsetOutOfRange, LogStartOffset: 10},
			want: Decision{Action: OutOfRange, LogStart: 10},
		},
		{
			name: "entries not at the fetch offset",
			resp: protocol.FetchResponse{LeaderID: "L", Epoch: 4, Entries: entries[1:]},
			want: Decision{Action: Drop},
		},
		{
			name: "entries whose epoch goes below our last epoch",
			resp: protocol.FetchResponse{LeaderID: "L", Epoch: 4, Entries: []protocol.Entry{{Offset: 5, Epoch: 2, Type: protocol.EntryData}}},
			want: Decision{Action: Drop},
		},
		{
			// Entries contiguous with the current LEO (4) but the fetch
			// was built at 5: only the fetch-offset check catches it.
			name: "log changed since the fetch was built",
			log:  &testLog{leo: 4, epochs: rows(1, 0, 3, 2)},
			resp: protocol.FetchResponse{LeaderID: "L", Epoch: 4, Entries: []protocol.Entry{{Offset: 4, Epoch: 3, Type: protocol.EntryData}}},
			want: Decision{Action: Drop},
		},
		{
			name: "log changed since the fetch was built, no entries",
			log:  &testLog{leo: 4, epochs: rows(1, 0, 3, 2)},
			resp: protocol.FetchResponse{LeaderID: "L", Epoch: 4, HighWatermark: 9},
			want: Decision{Action: Drop},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.from == "" {
				c.from = "L"
			}
			if c.epoch == 0 {
				c.epoch = 4
			}
			switch c.leader {
			case "":
				c.leader = "L"
			case "-":
				c.leader = ""
			}
			f := New("f", 1<<20, 500*time.Millisecond, 1)
			req := f.Build("L", c.epoch, followerLog, now)
			if c.resp.FetchID == 0 {
				c.resp.FetchID = req.FetchID
			}
			log := followerLog
			if c.log != nil {
				log = *c.log
			}
			got := f.Handle(c.from, &c.resp, c.epoch, c.leader, log)
			got.Reason = ""
			if got.Action != c.want.Action || got.TruncateTo != c.want.TruncateTo || got.Epoch != c.want.Epoch ||
				got.LeaderID != c.want.LeaderID || got.HighWatermark != c.want.HighWatermark ||
				got.LogStart != c.want.LogStart || len(got.Entries) != len(c.want.Entries) {
				t.Fatalf("Handle = %+v (%s), want %+v (%s)", got, got.Action, c.want, c.want.Action)
			}
			consumed := c.want.Action != Drop || c.resp.FetchID == req.FetchID && c.from == "L"
			if f.Outstanding() == consumed {
				t.Fatalf("outstanding after Handle = %v, want %v", f.Outstanding(), !consumed)
			}
		})
	}
}

// A response to a fetch built in an older epoch is dropped even if its ID
// matches (the replica must have cancelled it; defence in depth).
func TestFetchFromAnotherEpoch(t *testing.T) {
	f := New("f", 1, time.Second, 1)
	log := testLog{}
	req := f.Build("L", 3, log, now)
	d := f.Handle("L", &protocol.FetchResponse{FetchID: req.FetchID, LeaderID: "L", Epoch: 4}, 4, "L", log)
	if d.Action != Drop {
		t.Fatalf("fetch of epoch 3 answered in epoch 4: %v, want drop", d.Action)
	}
}

// A response that arrives after Cancel (the replica changed epoch or leader)
// is dropped.
func TestCancel(t *testing.T) {
	f := New("f", 1, time.Second, 1)
	log := testLog{}
	req := f.Build("L", 1, log, now)
	f.Cancel()
	d := f.Handle("L", &protocol.FetchResponse{FetchID: req.FetchID, LeaderID: "L", Epoch: 1}, 1, "L", log)
	if d.Action != Drop {
		t.Fatalf("after Cancel: %v, want drop", d.Action)
	}
}

// Repeated DivergingEpoch rounds (KIP-279) always make progress and end.
func TestDivergingRoundsTerminate(t *testing.T) {
	leader := testLog{leo: 6, epochs: rows(1, 0, 2, 1, 4, 2)}
	follower := testLog{leo: 5, epochs: rows(1, 0, 3, 2)}
	f := New("f", 1, time.Second, 1)
	for round := 0; ; round++ {
		if round > 10 {
			t.Fatal("diverging rounds do not terminate")
		}
		req := f.Build("L", 4, follower, now)
		e, end := leader.EndOffsetForEpoch(req.LastFetchedEpoch)
		if e == req.LastFetchedEpoch && end >= req.FetchOffset {
			if follower.leo != 1 || round != 2 {
				t.Fatalf("matched at LEO %d after %d rounds, want LEO 1 after 2", follower.leo, round)
			}
			return
		}
		d := f.Handle("L", &protocol.FetchResponse{FetchID: req.FetchID, LeaderID: "L", Epoch: 4,
			Error: protocol.FetchDivergingEpoch, DivergingEpoch: e, DivergingEndOffset: end}, 4, "L", follower)
		if d.Action != Truncate || d.TruncateTo >= follower.leo {
			t.Fatalf("round %d: %+v", round, d)
		}
		follower.leo = d.TruncateTo
		for len(follower.epochs) > 0 && follower.epochs[len(follower.epochs)-1].StartOffset >= d.TruncateTo {
			follower.epochs = follower.epochs[:len(follower.epochs)-1]
		}
	}
}

// A retry asks the same node the same question; the answer to the fetch it
// replaced, arriving late, is taken for it (otherwise a leader whose parked
// answers always land just after the retry would never get through). An
// answer to an older question, or to another node's, is still dropped.
func TestLateAnswerToTheReplacedFetch(t *testing.T) {
	lg := testLog{}
	f := New("f", 1<<20, 500*time.Millisecond, 10)
	now := time.Unix(0, 0)
	first := f.Build("l", 1, lg, now)
	f.TimeOut() // the retry timer fired
	second := f.Build("l", 1, lg, now.Add(time.Second))
	late := &protocol.FetchResponse{FetchID: first.FetchID, LeaderID: "l", Epoch: 1, HighWatermark: 0}
	if d := f.Handle("l", late, 1, "l", lg); d.Action != Append {
		t.Fatalf("late answer to the replaced fetch: %+v, want Append", d)
	}
	if f.Outstanding() {
		t.Fatal("the late answer did not consume the outstanding fetch")
	}
	// Its own answer comes after: nothing to apply, but it proves the
	// leader alive after the retry was sent (Contact), once; a second copy
	// is dropped, and so is the same answer from another node or naming
	// another leader.
	own := &protocol.FetchResponse{FetchID: second.FetchID, LeaderID: "l", Epoch: 1}
	if d := f.Handle("m", own, 1, "l", lg); d.Action != Drop {
		t.Fatalf("a consumed fetch's answer from another node: %+v, want Drop", d)
	}
	if d := f.Handle("l", own, 1, "", lg); d.Action != Drop {
		t.Fatalf("a consumed fetch's answer while following no leader: %+v, want Drop", d)
	}
	if d := f.Handle("l", own, 1, "l", lg); d.Action != Contact {
		t.Fatalf("answer to a consumed fetch: %+v, want Contact", d)
	}
	if d := f.Handle("l", own, 1, "l", lg); d.Action != Drop {
		t.Fatalf("a second copy of the consumed fetch's answer: %+v, want Drop", d)
	}

	// A fetch redirected to another node (a leader hint, perhaps false):
	// the first node's late OK answer is still taken, in the same epoch,
	// and checked against the first fetch's offset.
	third := f.Build("l", 1, lg, now)
	f.TimeOut()
	f.Build("m", 1, lg, now)
	if d := f.Handle("l", &protocol.FetchResponse{FetchID: third.FetchID, LeaderID: "l", Epoch: 1}, 1, "", lg); d.Action != NewLeader || d.LeaderID != "l" {
		t.Fatalf("late OK answer from the node the redirect left: %+v, want NewLeader l", d)
	}
	// Not from another node, and not across epochs.
	fourth := f.Build("l", 1, lg, now)
	f.TimeOut()
	f.Build("m", 1, lg, now)
	if d := f.Handle("m", &protocol.FetchResponse{FetchID: fourth.FetchID, LeaderID: "m", Epoch: 1}, 1, "", lg); d.Action != Drop {
		t.Fatalf("answer to l's fetch from m: %+v, want Drop", d)
	}
	fifth := f.Build("l", 1, lg, now)
	f.Cancel()
	f.Build("m", 2, lg, now)
	if d := f.Handle("l", &protocol.FetchResponse{FetchID: fifth.FetchID, LeaderID: "l", Epoch: 1}, 2, "", lg); d.Action != Drop {
		t.Fatalf("late answer to a fetch of an earlier epoch: %+v, want Drop", d)
	}
}

// TestLateErrorAnswerIsNotTakenForTheRetry: the late-answer rule takes only
// OK answers. The story (sim seed 30003890 x 20000): f fetched from l while
// l was still campaigning in epoch 1; the fetch timed out; f learned that l
// won epoch 1 and retried the same question. l's "not leader" answer from
// its campaign then arrives: taken for the retry it would make f forget
// its new leader and drop l's OK answer to the retry.
func TestLateErrorAnswerIsNotTakenForTheRetry(t *testing.T) {
	lg := testLog{}
	f := New("f", 1<<20, 500*time.Millisecond, 10)
	first := f.Build("l", 1, lg, now)
	f.TimeOut()
	second := f.Build("l", 1, lg, now.Add(time.Second))
	stale := &protocol.FetchResponse{FetchID: first.FetchID, Epoch: 1, Error: protocol.FetchNotLeader}
	if d := f.Handle("l", stale, 1, "l", lg); d.Action != Drop {
		t.Fatalf("late not-leader answer to the replaced fetch: %+v, want Drop", d)
	}
	if !f.Outstanding() {
		t.Fatal("the dropped late answer consumed the retry")
	}
	// Positive control: the retry's own answer is taken.
	own := &protocol.FetchResponse{FetchID: second.FetchID, LeaderID: "l", Epoch: 1}
	if d := f.Handle("l", own, 1, "l", lg); d.Action != Append {
		t.Fatalf("the retry's own answer: %+v, want Append", d)
	}
	// And an error answering the retry itself is taken as usual.
	third := f.Build("l", 1, lg, now)
	if d := f.Handle("l", &protocol.FetchResponse{FetchID: third.FetchID, Epoch: 1, Error: protocol.FetchNotLeader}, 1, "l", lg); d.Action != LeaderGone {
		t.Fatalf("not-leader answer to the outstanding fetch: %+v, want LeaderGone", d)
	}
}

// TestTimeOutKeepsTheFetchMatchable: a fetch due for a retry is no longer
// Outstanding (the caller builds the next one), but its answer, stepped
// before the replacement is built, is still taken (issue 9.2).
func TestTimeOutKeepsTheFetchMatchable(t *testing.T) {
	f := New("f", 1000, 500*time.Millisecond, 7)
	log := testLog{leo: 2, epochs: rows(1, 0)}
	req := f.Build("L", 1, log, now)
	f.TimeOut()
	if f.Outstanding() {
		t.Fatal("a timed-out fetch still reports outstanding: no retry would be built")
	}
	d := f.Handle("L", &protocol.FetchResponse{FetchID: req.FetchID, LeaderID: "L", Epoch: 1, HighWatermark: 2}, 1, "L", log)
	if d.Action != Append || d.HighWatermark != 2 {
		t.Fatalf("answer to the timed-out fetch: %+v, want append", d)
	}
	// Answered: nothing is outstanding, and a second copy is dropped.
	if d := f.Handle("L", &protocol.FetchResponse{FetchID: req.FetchID, LeaderID: "L", Epoch: 1}, 1, "L", log); d.Action != Drop {
		t.Fatalf("duplicate answer: %+v, want drop", d)
	}
	// Cancel, unlike TimeOut, forgets the fetch.
	req = f.Build("L", 1, log, now)
	f.TimeOut()
	f.Cancel()
	if d := f.Handle("L", &protocol.FetchResponse{FetchID: req.FetchID, LeaderID: "L", Epoch: 1}, 1, "L", log); d.Action != Drop {
		t.Fatalf("answer to a cancelled fetch: %+v, want drop", d)
	}
}

// TestContactFetch (R77): a contact fetch asks from the given durable
// offset for one entry without waiting; an OK answer from the leader is
// contact with the HW at most that offset, a diverging or out-of-range
// one is contact only, a not-leader one is handled as for any fetch; its
// late answer stands in for no later fetch; the fetch after it asks not
// to wait, and the one after that waits again.
func TestContactFetch(t *testing.T) {
	log := testLog{leo: 9, epochs: rows(1, 0, 2, 4)} // entries 5..8 in the writer
	ok := func(id, hw uint64) *protocol.FetchResponse {
		return &protocol.FetchResponse{FetchID: id, LeaderID: "L", Epoch: 2, HighWatermark: hw,
			Entries: []protocol.Entry{{Offset: 5, Epoch: 2, Type: protocol.EntryData}}}
	}
	t.Run("request", func(t *testing.T) {
		f := New("f", 1000, 500*time.Millisecond, 7)
		req := f.BuildContact("L", 2, 5, 2, now)
		want := protocol.FetchRequest{FetchID: 7, ReplicaID: "f", CurrentEpoch: 2, FetchOffset: 5, LastFetchedEpoch: 2, MaxBytes: 1, MaxWaitMs: 0}
		if *req != want || !f.Contact() || !f.Outstanding() {
			t.Fatalf("BuildContact = %+v (contact %v, outstanding %v), want %+v", *req, f.Contact(), f.Outstanding(), want)
		}
		if next := f.Build("L", 2, log, now); next.MaxWaitMs != 0 || f.Contact() {
			t.Fatalf("the fetch after a contact fetch: %+v (contact %v), want MaxWaitMs 0", *next, f.Contact())
		}
		if next := f.Build("L", 2, log, now); next.MaxWaitMs != 500 {
			t.Fatalf("the second fetch after a contact fetch waits %d ms, want 500", next.MaxWaitMs)
		}
	})
	for _, c := range []struct {
		name string
		resp func(id uint64) *protocol.FetchResponse
		want Decision
	}{
		{"ok: the HW up to the offset", func(id uint64) *protocol.FetchResponse { return ok(id, 8) }, Decision{Action: Contact, HighWatermark: 5}},
		{"ok: an HW below the offset", func(id uint64) *protocol.FetchResponse { return ok(id, 3) }, Decision{Action: Contact, HighWatermark: 3}},
		{"diverging", func(id uint64) *protocol.FetchResponse {
			return &protocol.FetchResponse{FetchID: id, LeaderID: "L", Epoch: 2, Error: protocol.FetchDivergingEpoch, DivergingEpoch: 1, DivergingEndOffset: 3, HighWatermark: 8}
		}, Decision{Action: Contact}},
		{"out of range", func(id uint64) *protocol.FetchResponse {
			return &protocol.FetchResponse{FetchID: id, LeaderID: "L", Epoch: 2, Error: protocol.FetchOffsetOutOfRange, LogStartOffset: 7}
		}, Decision{Action: Contact}},
		{"not leader", func(id uint64) *protocol.FetchResponse {
			return &protocol.FetchResponse{FetchID: id, Epoch: 2, Error: protocol.FetchNotLeader}
		}, Decision{Action: LeaderGone, Reason: "leader says it is not the leader"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := New("f", 1000, 500*time.Millisecond, 7)
			req := f.BuildContact("L", 2, 5, 2, now)
			got := f.Handle("L", c.resp(req.FetchID), 2, "L", log)
			if got.Action != c.want.Action || got.HighWatermark != c.want.HighWatermark || len(got.Entries) != 0 || got.TruncateTo != 0 {
				t.Fatalf("Handle = %+v, want %+v", got, c.want)
			}
			if f.Outstanding() {
				t.Fatalf("the contact fetch is still outstanding after its answer")
			}
		})
	}
	t.Run("its late answer stands in for no later fetch", func(t *testing.T) {
		f := New("f", 1000, 500*time.Millisecond, 7)
		contact := f.BuildContact("L", 2, 5, 2, now)
		f.TimeOut()
		next := f.Build("L", 2, log, now)
		if got := f.Handle("L", ok(contact.FetchID, 8), 2, "L", log); got.Action != Drop {
			t.Fatalf("the replaced contact fetch's answer: %+v, want it dropped", got)
		}
		if !f.Outstanding() {
			t.Fatalf("the fetch after the contact fetch is no longer outstanding")
		}
		resp := &protocol.FetchResponse{FetchID: next.FetchID, LeaderID: "L", Epoch: 2, HighWatermark: 8,
			Entries: []protocol.Entry{{Offset: 9, Epoch: 2, Type: protocol.EntryData}}}
		if got := f.Handle("L", resp, 2, "L", log); got.Action != Append || len(got.Entries) != 1 {
			t.Fatalf("the later fetch's own answer: %+v, want its entry appended", got)
		}
	})
}
