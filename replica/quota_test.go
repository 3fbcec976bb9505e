package replica

import (
	"testing"
	"time"

	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/storage"
)

// quotaEntrySize is the data size of the entries of the quota tests' logs.
const quotaEntrySize = 8 << 10

// catchUpLeader makes "l" the leader (epoch 2) of voters l, a, b over a
// log of n entries of quotaEntrySize bytes (epoch 1), with cfg's quota,
// and has the voters inStep (at least one) fetch up to its LEO, so that
// its HW is its LEO: anyone fetching from 0 is catching up.
func catchUpLeader(t *testing.T, n int, edit func(*Config), inStep ...string) (*Replica, *storage.Memory) {
	t.Helper()
	store := storage.NewMemory()
	es := make([]protocol.Entry, n)
	for i := range es {
		es[i] = protocol.Entry{Offset: uint64(i), Epoch: 1, Type: protocol.EntryData, Data: make([]byte, quotaEntrySize)}
	}
	applyWrites(t, store, []protocol.Write{
		{Kind: protocol.WriteAppend, Entries: es},
		{Kind: protocol.WriteQuorumState, Quorum: protocol.QuorumState{Epoch: 1}},
	})
	cfg := testConfig("l", "l", "a", "b")
	cfg.FetchMaxBytes = 64 << 10
	edit(&cfg)
	r := newTestReplica(t, cfg, store)
	r.becomeCandidate()
	for _, g := range []string{"a", "b"} {
		r.Step(protocol.Message{From: g, To: "l", Body: &protocol.VoteResponse{Epoch: r.epoch, VoterID: g, VoterDirID: g, Granted: true, RequestEpoch: r.epoch, Round: r.round}})
	}
	settle(t, r, store)
	if r.role != RoleLeader {
		t.Fatalf("setup: role %v, want leader", r.role)
	}
	for _, v := range inStep {
		fetch(r, v, 1, r.epoch, r.log.LEO(), r.epoch)
	}
	settle(t, r, store)
	if r.hw != r.log.LEO() {
		t.Fatalf("setup: hw %d, want the LEO %d", r.hw, r.log.LEO())
	}
	return r, store
}

// catchUpFetcher is a fetcher (observer or voter) that fetches from the
// leader as fast as it is answered, one fetch outstanding.
type catchUpFetcher struct {
	id, dir     string
	offset      uint64
	lastEpoch   uint64
	fetchID     uint64
	outstanding bool
	sentAt      time.Time
	bytes       int64         // entry bytes received
	longestWait time.Duration // the longest a fetch of its waited for an answer
}

func (f *catchUpFetcher) send(r *Replica) {
	f.fetchID++
	f.outstanding, f.sentAt = true, r.now
	r.Step(protocol.Message{From: f.id, To: r.id, Body: &protocol.FetchRequest{
		FetchID: f.fetchID, ReplicaID: f.id, ReplicaDirID: f.dir, CurrentEpoch: r.epoch,
		FetchOffset: f.offset, LastFetchedEpoch: f.lastEpoch, MaxBytes: 1 << 20, MaxWaitMs: 500,
	}})
}

// take takes the answer to its outstanding fetch from msgs, if there is
// one, and reports whether there was.
func (f *catchUpFetcher) take(t *testing.T, r *Replica, msgs []protocol.Message) bool {
	t.Helper()
	for _, resp := range bodiesTo[*protocol.FetchResponse](msgs, f.id) {
		if !f.outstanding || resp.FetchID != f.fetchID {
			continue
		}
		if resp.Error != protocol.FetchOK {
			t.Fatalf("%s: fetch answered %v", f.id, resp.Error)
		}
		f.outstanding = false
		f.longestWait = max(f.longestWait, r.now.Sub(f.sentAt))
		for _, e := range resp.Entries {
			f.bytes += int64(len(e.Data) + protocol.EntryOverhead)
			f.offset, f.lastEpoch = e.Offset+1, e.Epoch
		}
		return true
	}
	return false
}

// runCatchUp runs r for d in ticks of 10ms: observer o fetches from 0 as
// fast as it is answered while, every tick, the leader appends an entry
// and voters a and b, in step, fetch it: b first, twice (the second fetch
// acknowledges the entry, so the HW passes it), then a, whose fetch is
// then below the HW, as a follower a little slower than the other one
// always is under load. It fails t if an in-step fetch is not answered,
// with the new entry, in the round it is sent, and reports how many of
// a's fetches were below the HW.
func runCatchUp(t *testing.T, r *Replica, store *storage.Memory, o *catchUpFetcher, d time.Duration) (belowHW int) {
	t.Helper()
	a := &catchUpFetcher{id: "a", dir: "a", offset: r.log.LEO(), lastEpoch: r.epoch, fetchID: 1}
	b := &catchUpFetcher{id: "b", dir: "b", offset: r.log.LEO(), lastEpoch: r.epoch, fetchID: 1}
	start := r.now
	answered := func(f *catchUpFetcher, wantEntries bool) {
		t.Helper()
		before := f.offset
		f.send(r)
		msgs, _ := settle(t, r, store)
		o.take(t, r, msgs)
		if !f.take(t, r, msgs) || wantEntries && f.offset == before {
			t.Fatalf("t=%v: in-step %s's fetch at %d (HW %d, LEO %d) not answered at once with the new entry", r.now.Sub(start), f.id, before, r.hw, r.log.LEO())
		}
	}
	for id := uint64(1); r.now.Sub(start) < d; id++ {
		r.Tick(r.now.Add(10 * time.Millisecond))
		r.Propose(id, [][]byte{make([]byte, quotaEntrySize)})
		msgs, _ := settle(t, r, store)
		o.take(t, r, msgs)
		if !o.outstanding {
			o.send(r)
		}
		answered(b, true)
		answered(b, false) // acknowledges the entry: the HW passes it
		if a.offset < r.hw {
			belowHW++
		}
		answered(a, true)
	}
	return belowHW
}

// TestQuotaBoundsCatchUpNotTheCommitPath: R73. An observer fetching from
// 0 gets at most CatchUpBytesPerSecond over a simulated second (plus the
// bucket's burst and one response's overshoot) while the voters in step
// are answered at once, every round, and cost the quota nothing; without
// the quota (the positive control) the same observer gets several times
// the budget in the same second, so the bound is the quota's.
func TestQuotaBoundsCatchUpNotTheCommitPath(t *testing.T) {
	const rate = 1 << 20
	r, store := catchUpLeader(t, 400, func(c *Config) { c.CatchUpBytesPerSecond = rate }, "a", "b")
	o := &catchUpFetcher{id: "o", dir: "o"}
	if below := runCatchUp(t, r, store, o, time.Second); below < 50 {
		t.Fatalf("a fetched below the HW %d times: the test did not run a follower a little behind", below)
	}
	limit := int64(rate) + r.quotaBurst() + int64(r.cfg.FetchMaxBytes) + quotaEntrySize + protocol.EntryOverhead
	if o.bytes > limit {
		t.Fatalf("the observer got %d bytes in a second, over the quota's %d (rate %d)", o.bytes, limit, rate)
	}
	if o.bytes < rate/2 {
		t.Fatalf("the observer got only %d bytes in a second at a quota of %d: catch-up starved", o.bytes, rate)
	}
	qs := r.QuotaStats()
	if qs.Bytes != uint64(o.bytes) || qs.Throttled == 0 || qs.Time <= 0 {
		t.Fatalf("quota stats %+v, want Bytes %d (the observer's alone) and throttled fetches", qs, o.bytes)
	}
	if o.longestWait > time.Duration(500)*time.Millisecond {
		t.Fatalf("an observer fetch waited %v, over its MaxWait", o.longestWait)
	}

	// Positive control: no quota, the same second.
	r, store = catchUpLeader(t, 400, func(c *Config) { c.CatchUpBytesPerSecond = -1 }, "a", "b")
	o = &catchUpFetcher{id: "o", dir: "o"}
	runCatchUp(t, r, store, o, time.Second)
	if o.bytes <= 2*limit {
		t.Fatalf("without a quota the observer got %d bytes in a second, not above twice the quota's bound %d: the test would not see a broken quota", o.bytes, limit)
	}
	if qs := r.QuotaStats(); qs != (QuotaStats{}) {
		t.Fatalf("quota stats %+v without a quota", qs)
	}
}

// TestQuotaSparesAVoterTheHWNeeds: R73. Voter a catches up from 0 under a
// quota the bucket cannot pay: while b is in step (l and b are a
// majority without a) a's fetches wait for the quota; once b stops
// fetching (FetchTimeout passes) the HW needs a, and its fetches are
// answered at once, with entries, however empty the bucket.
// (Fails with replog_bug_throttle_needed_voter.)
func TestQuotaSparesAVoterTheHWNeeds(t *testing.T) {
	r, store := catchUpLeader(t, 400, func(c *Config) { c.CatchUpBytesPerSecond = 64 << 10 }, "b")
	a := &catchUpFetcher{id: "a", dir: "a"}
	b := &catchUpFetcher{id: "b", dir: "b", offset: r.log.LEO(), lastEpoch: r.epoch, fetchID: 1}
	waited := false
	for range 20 {
		r.Tick(r.now.Add(10 * time.Millisecond))
		b.send(r)
		if !a.outstanding {
			a.send(r)
		}
		msgs, _ := settle(t, r, store)
		b.take(t, r, msgs)
		if !a.take(t, r, msgs) {
			waited = true
		}
	}
	if !waited {
		t.Fatal("with b in step, a's catch-up never waited for the quota (positive control)")
	}
	// b goes silent; a keeps the leader's quorum.
	deadline := r.now.Add(r.cfg.FetchTimeout)
	for r.now.Before(deadline) {
		r.Tick(r.now.Add(100 * time.Millisecond))
		if !a.outstanding {
			a.send(r)
		}
		msgs, _ := settle(t, r, store)
		a.take(t, r, msgs)
	}
	r.Tick(r.now.Add(10 * time.Millisecond))
	if r.role != RoleLeader || !r.neededForHW("a") {
		t.Fatalf("setup: role %v, a needed %v", r.role, r.neededForHW("a"))
	}
	for i := range 20 {
		if !a.outstanding {
			a.send(r)
		}
		msgs, _ := settle(t, r, store)
		before := a.offset
		if !a.take(t, r, msgs) || a.offset == before {
			t.Fatalf("fetch %d: a, which the HW needs, was not answered with entries at once (offset %d, HW %d)", i, before, r.hw)
		}
	}
	if r.leader.quota.tokens > 0 {
		t.Fatalf("the bucket holds %d tokens: the test did not run a against an empty bucket", r.leader.quota.tokens)
	}
}
