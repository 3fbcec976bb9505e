package shell

import (
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"testing"
	"time"

	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/replica"
	"github.com/replog-io/replog/storage"
)

var t0 = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

const (
	fetchMaxWait    = 100 * time.Millisecond
	electionTimeout = 100 * time.Millisecond
	fetchTimeout    = time.Second
)

func config(id string, voters ...string) replica.Config {
	return replica.Config{
		ID: id, Voters: voters,
		FetchTimeout: fetchTimeout, ElectionTimeout: electionTimeout, FetchMaxWait: fetchMaxWait,
		MaxRecordSize: 16,
		Rand:          rand.New(rand.NewSource(int64(id[len(id)-1]))),
	}
}

// proc is one node of the tests' manual cluster: a Node, its store and
// what its writer has made durable, applied at once with one Apply per
// round (the writer's group commit).
type proc struct {
	n     *Node
	store *storage.Memory
	inbox []Event
	out   Output // the last round's
}

func newProc(t *testing.T, cfg replica.Config, store *storage.Memory) *proc {
	t.Helper()
	if store == nil {
		store = storage.NewMemory()
	}
	r, err := replica.New(cfg, store, t0)
	if err != nil {
		t.Fatal(err)
	}
	return &proc{n: New(r), store: store}
}

// round runs one round with the inbox and persists its writes (reported
// to the next round).
func (p *proc) round(t *testing.T, now time.Time) Output {
	t.Helper()
	evs := p.inbox
	p.inbox = nil
	p.out = p.n.Round(now, evs...)
	p.persist(t, p.out.Writes)
	return p.out
}

func (p *proc) persist(t *testing.T, ws []protocol.Write) {
	t.Helper()
	if len(ws) == 0 {
		return
	}
	if err := p.store.Apply(ws); err != nil {
		t.Fatal(err)
	}
	p.n.Persisted(ws[len(ws)-1].Seq)
}

// cluster is a manual network: every message goes to its addressee's inbox
// unless held.
type cluster struct {
	procs map[string]*proc
	ids   []string
}

func newCluster(t *testing.T, ids ...string) *cluster {
	c := &cluster{procs: map[string]*proc{}, ids: ids}
	for _, id := range ids {
		c.procs[id] = newProc(t, config(id, ids...), nil)
	}
	return c
}

func (c *cluster) send(ms []protocol.Message) {
	for _, m := range ms {
		c.procs[m.To].inbox = append(c.procs[m.To].inbox, Message(m))
	}
}

// run runs rounds on every node at now until no message is in flight.
func (c *cluster) run(t *testing.T, now time.Time) {
	t.Helper()
	for range 50 {
		busy := false
		for _, id := range c.ids {
			p := c.procs[id]
			if len(p.inbox) == 0 && p.n.durable == p.n.given {
				continue
			}
			busy = true
			c.send(p.round(t, now).Messages)
		}
		if !busy {
			return
		}
	}
	t.Fatal("the cluster did not go quiet")
}

// elect advances time until one node leads and every other follows it.
func (c *cluster) elect(t *testing.T) (leader string, now time.Time) {
	t.Helper()
	now = t0
	for range 400 {
		now = now.Add(5 * time.Millisecond)
		for _, id := range c.ids {
			c.send(c.procs[id].round(t, now).Messages)
		}
		c.run(t, now)
		leader = ""
		following := 0
		for _, id := range c.ids {
			st := c.procs[id].out.Status
			if st.Role == replica.RoleLeader {
				leader = id
			}
		}
		for _, id := range c.ids {
			if st := c.procs[id].out.Status; leader != "" && st.LeaderID == leader {
				following++
			}
		}
		if leader != "" && following == len(c.ids) {
			return leader, now
		}
	}
	t.Fatal("no leader")
	return "", now
}

func fetchResponsesTo(ms []protocol.Message, to string) []protocol.Message {
	var out []protocol.Message
	for _, m := range ms {
		if _, ok := m.Body.(*protocol.FetchResponse); ok && m.To == to {
			out = append(out, m)
		}
	}
	return out
}

// TestRoundOrderKeepsLateFetchAnswer: a late fetch answer is never
// dropped, as a property of the round: the leader's answer to a parked fetch
// arrives in the very round whose tick crosses the follower's fetch retry
// timeout. The Node ticks first, steps the answer, and only then takes
// Ready (which builds the replacement fetch): the answer counts, its entry
// is written, and the next fetch asks for what comes after it.
func TestRoundOrderKeepsLateFetchAnswer(t *testing.T) {
	c := newCluster(t, "n1", "n2", "n3")
	leader, now := c.elect(t)
	var f string
	for _, id := range c.ids {
		if id != leader {
			f = id
			break
		}
	}
	// The followers' fetches are parked at the leader; a proposal answers
	// them at once, and the answer to f is held in the network.
	l := c.procs[leader]
	l.inbox = append(l.inbox, Propose(1, [][]byte{[]byte("a")}))
	out := l.round(t, now)
	held := fetchResponsesTo(out.Messages, f)
	if len(held) != 1 {
		t.Fatalf("the proposal answered f's parked fetch with %d responses: %v", len(held), out.Messages)
	}
	// f's retry timeout (FetchMaxWait+ElectionTimeout) passes, and the
	// answer arrives in that round.
	late := now.Add(fetchMaxWait + electionTimeout + time.Millisecond)
	fp := c.procs[f]
	fp.inbox = append(fp.inbox, Message(held[0]))
	out = fp.n.Round(late, fp.inbox...)
	fp.inbox = nil
	var appended []protocol.Entry
	for _, w := range out.Writes {
		if w.Kind == protocol.WriteAppend {
			appended = append(appended, w.Entries...)
		}
	}
	if len(appended) == 0 || string(appended[len(appended)-1].Data) != "a" {
		t.Fatalf("the late answer was dropped: the round wrote %+v (status %+v)", out.Writes, out.Status)
	}
	if out.Status.Role != replica.RoleFollower || out.Status.LeaderID != leader {
		t.Fatalf("f left its leader: %+v", out.Status)
	}
	// Once the entry is durable, the next fetch asks from after it.
	fp.persist(t, out.Writes)
	out = fp.n.Round(late)
	var next *protocol.FetchRequest
	for _, m := range out.Messages {
		if r, ok := m.Body.(*protocol.FetchRequest); ok && m.To == leader {
			next = r
		}
	}
	if next == nil || next.FetchOffset != appended[len(appended)-1].Offset+1 {
		t.Fatalf("next fetch %+v, want one from offset %d", next, appended[len(appended)-1].Offset+1)
	}
}

// TestPersistedComesAfterTheRoundsEvents: a durability report given
// between rounds reaches the core in the next round, after that round's
// events: a single voter's append is acknowledged in the round that
// carries its report, not before.
func TestPersistedComesAfterTheRoundsEvents(t *testing.T) {
	p := newProc(t, config("a", "a"), nil)
	out := p.round(t, t0)
	if out.Status.Role != replica.RoleLeader {
		t.Fatalf("a single voter does not lead: %+v", out.Status)
	}
	p.round(t, t0) // its own epoch's control entry becomes durable
	p.inbox = append(p.inbox, Propose(7, [][]byte{[]byte("x"), []byte("y")}))
	out = p.n.Round(t0, p.inbox...)
	p.inbox = nil
	if len(out.Resolved) != 0 {
		t.Fatalf("resolved before the write was durable: %+v", out.Resolved)
	}
	var ws []protocol.Write
	ws = append(ws, out.Writes...)
	if err := p.store.Apply(ws); err != nil {
		t.Fatal(err)
	}
	p.n.Persisted(ws[len(ws)-1].Seq)
	if p.n.Pending() != 1 {
		t.Fatalf("pending %d, want 1 until the next round", p.n.Pending())
	}
	out = p.n.Round(t0)
	if len(out.Resolved) != 1 || out.Resolved[0].ID != 7 || out.Resolved[0].Err != nil {
		t.Fatalf("resolved %+v, want proposal 7 committed", out.Resolved)
	}
	first := out.Resolved[0].Offset
	es, err := p.store.Entries(first, 2, 1<<20)
	if err != nil || len(es) != 2 || string(es[0].Data) != "x" || string(es[1].Data) != "y" {
		t.Fatalf("at the acked offset %d the store holds %+v (%v)", first, es, err)
	}
	if p.n.Pending() != 0 {
		t.Fatalf("pending %d after the ack", p.n.Pending())
	}
}

// TestProposalOutcomes: every proposal is resolved exactly once: refused
// at once (no leader known, too large), or of unknown outcome when the
// Node closes with it waiting; after Close, rounds do nothing.
func TestProposalOutcomes(t *testing.T) {
	t.Run("not leader", func(t *testing.T) {
		p := newProc(t, config("a", "a", "b", "c"), nil)
		p.inbox = append(p.inbox, Propose(1, [][]byte{[]byte("x")}))
		out := p.round(t, t0)
		var nl *replica.NotLeaderError
		if len(out.Resolved) != 1 || out.Resolved[0].ID != 1 || !errors.As(out.Resolved[0].Err, &nl) {
			t.Fatalf("resolved %+v, want proposal 1 refused with a NotLeaderError", out.Resolved)
		}
	})
	t.Run("too large", func(t *testing.T) {
		p := newProc(t, config("a", "a"), nil)
		p.round(t, t0)
		p.inbox = append(p.inbox, Propose(1, [][]byte{make([]byte, 17)}), Propose(2, [][]byte{make([]byte, 16)}))
		out := p.round(t, t0)
		if len(out.Resolved) != 1 || out.Resolved[0].ID != 1 || !errors.Is(out.Resolved[0].Err, replica.ErrTooLarge) {
			t.Fatalf("resolved %+v, want proposal 1 refused with ErrTooLarge", out.Resolved)
		}
		// Positive control: the one within the limit commits.
		out = p.round(t, t0)
		if len(out.Resolved) != 1 || out.Resolved[0].ID != 2 || out.Resolved[0].Err != nil {
			t.Fatalf("resolved %+v, want proposal 2 committed", out.Resolved)
		}
	})
	t.Run("unknown on close", func(t *testing.T) {
		// A leader whose messages are not delivered: it cannot commit.
		c := newCluster(t, "a", "b", "c")
		leader, now := c.elect(t)
		p := c.procs[leader]
		p.inbox = append(p.inbox, Propose(5, [][]byte{[]byte("x")}), Propose(3, [][]byte{[]byte("y")}))
		if out := p.round(t, now); len(out.Resolved) != 0 {
			t.Fatalf("resolved before a majority has it: %+v", out.Resolved)
		}
		cause := errors.New("closing")
		rs := p.n.Close(cause)
		if len(rs) != 2 || rs[0].ID != 3 || rs[1].ID != 5 {
			t.Fatalf("Close resolved %+v, want 3 and 5 in ID order", rs)
		}
		for _, r := range rs {
			if !errors.Is(r.Err, replica.ErrUnknownOutcome) || !errors.Is(r.Err, cause) {
				t.Fatalf("Close resolved %d with %v, want ErrUnknownOutcome and the cause", r.ID, r.Err)
			}
		}
		if out := p.n.Round(now.Add(time.Second), Propose(9, nil)); len(out.Resolved)+len(out.Writes)+len(out.Messages) != 0 || p.n.Pending() != 0 {
			t.Fatalf("a closed Node acted: %+v", out)
		}
	})
}

// TestHaltResolvesWaitingProposals: when the core halts (told to truncate
// below its HW), the round reports it, resolves every waiting proposal as
// of unknown outcome, and later proposals are refused with the halt error.
func TestHaltResolvesWaitingProposals(t *testing.T) {
	store := storage.NewMemory()
	var es []protocol.Entry
	for i := range 4 {
		es = append(es, protocol.Entry{Offset: uint64(i), Epoch: 1, Type: protocol.EntryData, Data: []byte{byte(i)}})
	}
	if err := store.Apply([]protocol.Write{
		{Kind: protocol.WriteAppend, Entries: es},
		{Kind: protocol.WriteQuorumState, Quorum: protocol.QuorumState{Epoch: 2, LeaderID: "L"}},
		{Kind: protocol.WriteHWCheckpoint, Offset: 2},
	}); err != nil {
		t.Fatal(err)
	}
	p := newProc(t, config("f", "f", "L", "x"), store)
	out := p.round(t, t0)
	p.inbox = append(p.inbox, Propose(1, [][]byte{[]byte("fwd")}))
	out2 := p.round(t, t0)
	msgs := append(out.Messages, out2.Messages...)
	var fetch *protocol.FetchRequest
	for _, m := range msgs {
		if r, ok := m.Body.(*protocol.FetchRequest); ok {
			fetch = r
		}
	}
	if fetch == nil || p.n.Pending() != 1 || out2.Halted != nil {
		t.Fatalf("setup: fetch %v, pending %d, halted %v (messages %v)", fetch, p.n.Pending(), out2.Halted, msgs)
	}
	p.inbox = append(p.inbox, Message(protocol.Message{From: "L", To: "f", Body: &protocol.FetchResponse{FetchID: fetch.FetchID, LeaderID: "L", Epoch: 2,
		Error: protocol.FetchDivergingEpoch, DivergingEpoch: 0, DivergingEndOffset: 0, HighWatermark: 2}}))
	out = p.round(t, t0)
	if !errors.Is(out.Halted, replica.ErrCommittedTruncation) {
		t.Fatalf("Halted = %v, want ErrCommittedTruncation", out.Halted)
	}
	if len(out.Resolved) != 1 || out.Resolved[0].ID != 1 || !errors.Is(out.Resolved[0].Err, replica.ErrUnknownOutcome) || !errors.Is(out.Resolved[0].Err, replica.ErrCommittedTruncation) {
		t.Fatalf("resolved %+v, want the forwarded proposal of unknown outcome", out.Resolved)
	}
	p.inbox = append(p.inbox, Propose(2, [][]byte{[]byte("z")}))
	out = p.round(t, t0.Add(time.Hour))
	if !errors.Is(out.Halted, replica.ErrCommittedTruncation) || len(out.Resolved) != 1 || out.Resolved[0].ID != 2 ||
		errors.Is(out.Resolved[0].Err, replica.ErrUnknownOutcome) || !errors.Is(out.Resolved[0].Err, replica.ErrCommittedTruncation) {
		t.Fatalf("after the halt: halted %v, resolved %+v; want proposal 2 refused with the halt error", out.Halted, out.Resolved)
	}
}

// TestReadableWakeUps: ReadableMoved is set in exactly the rounds in which
// ReadableHW changed, and ReadableHW is min(HW, durable LEO); the claim
// changes when the leader or epoch does.
func TestReadableWakeUps(t *testing.T) {
	p := newProc(t, config("a", "a"), nil)
	out := p.round(t, t0)
	if !out.ClaimChanged || out.Claim != (Claim{Leader: "a", Epoch: out.Status.Epoch}) {
		t.Fatalf("first round's claim %+v changed=%v", out.Claim, out.ClaimChanged)
	}
	prev := p.n.readable
	for i := range 6 {
		if i%2 == 0 {
			p.inbox = append(p.inbox, Propose(uint64(i+1), [][]byte{[]byte(fmt.Sprint(i))}))
		}
		out = p.round(t, t0)
		if want := min(out.Status.HighWatermark, out.Status.DurableLEO); out.ReadableHW != want {
			t.Fatalf("round %d: ReadableHW %d, want %d", i, out.ReadableHW, want)
		}
		if out.ReadableMoved != (out.ReadableHW != prev) {
			t.Fatalf("round %d: ReadableHW %d → %d but moved=%v", i, prev, out.ReadableHW, out.ReadableMoved)
		}
		if out.ClaimChanged {
			t.Fatalf("round %d: claim changed without a new leader: %+v", i, out.Claim)
		}
		prev = out.ReadableHW
	}
	if prev < 3 {
		t.Fatalf("ReadableHW %d after three committed appends", prev)
	}
	// A quiet round: nothing moves, nobody is woken.
	if out = p.round(t, t0); out.ReadableMoved {
		t.Fatal("a quiet round woke readers")
	}
}

// TestReadBatch: the reader view passes control entries (offsets have gaps
// where they sit), stops at the limit, and refuses offsets below the log
// start and a limit above the stored log.
func TestReadBatch(t *testing.T) {
	s := storage.NewMemory()
	es := []protocol.Entry{
		{Offset: 0, Epoch: 1, Type: protocol.EntryControl},
		{Offset: 1, Epoch: 1, Type: protocol.EntryData, Data: []byte("a")},
		{Offset: 2, Epoch: 2, Type: protocol.EntryControl},
		{Offset: 3, Epoch: 2, Type: protocol.EntryData, Data: []byte("b")},
		{Offset: 4, Epoch: 2, Type: protocol.EntryData, Data: []byte("c")},
	}
	if err := s.Apply([]protocol.Write{{Kind: protocol.WriteAppend, Entries: es}}); err != nil {
		t.Fatal(err)
	}
	b, err := ReadBatch(s, 0, 4, 100, 1<<20)
	if err != nil || b.Next != 4 || len(b.Entries) != 2 || b.Entries[0].Offset != 1 || b.Entries[1].Offset != 3 {
		t.Fatalf("ReadBatch(0, limit 4) = %+v, %v; want offsets 1 and 3, next 4", b, err)
	}
	b, err = ReadBatch(s, 2, 5, 1, 1<<20)
	if err != nil || b.Next != 3 || len(b.Entries) != 0 {
		t.Fatalf("ReadBatch(2, count 1) = %+v, %v; want only the control entry passed", b, err)
	}
	if _, err := ReadBatch(s, 5, 6, 100, 1<<20); err == nil {
		t.Fatal("a limit above the stored log was not reported")
	}
}

// TestBarrierEvent: a barrier on a follower is forwarded, appended by the
// leader as one control entry and resolved once, with that entry's offset,
// after everything appended before it; the reader view passes over it.
func TestBarrierEvent(t *testing.T) {
	c := newCluster(t, "a", "b", "c")
	leader, now := c.elect(t)
	follower := "a"
	if leader == follower {
		follower = "b"
	}
	lp, fp := c.procs[leader], c.procs[follower]
	lp.inbox = append(lp.inbox, Propose(1, [][]byte{[]byte("x")}))
	fp.inbox = append(fp.inbox, Barrier(2))
	var resolved []Resolved
	for range 20 {
		now = now.Add(5 * time.Millisecond)
		for _, id := range c.ids {
			out := c.procs[id].round(t, now)
			c.send(out.Messages)
			if id == follower {
				resolved = append(resolved, out.Resolved...)
			}
		}
	}
	if len(resolved) != 1 || resolved[0].ID != 2 || resolved[0].Err != nil {
		t.Fatalf("the follower resolved %+v, want barrier 2 once, committed", resolved)
	}
	b := resolved[0].Offset
	es, err := fp.store.Entries(b, 1, 1<<20)
	if err != nil || len(es) != 1 || es[0].Type != protocol.EntryControl || len(es[0].Data) != 0 {
		t.Fatalf("the follower's entry at the barrier's offset %d: %+v, %v; want an empty control entry", b, es, err)
	}
	if fp.out.ReadableHW <= b {
		t.Fatalf("the follower's readable HW %d has not passed the barrier at %d", fp.out.ReadableHW, b)
	}
	rb, err := ReadBatch(fp.store, 0, fp.out.ReadableHW, 100, 1<<20)
	if err != nil || len(rb.Entries) != 1 || string(rb.Entries[0].Data) != "x" || rb.Entries[0].Offset >= b {
		t.Fatalf("reader view %+v, %v: want only record x, below the barrier at %d", rb, err, b)
	}
}

// TestDeleteBeforeEvent: a retention request moves the leader's log start,
// never to its HW (the reader view then answers out of range below it),
// and the followers follow it; on a follower it asks the leader (R54) and
// changes nothing itself until the leader's log start comes back.
func TestDeleteBeforeEvent(t *testing.T) {
	c := newCluster(t, "a", "b", "c")
	leader, now := c.elect(t)
	follower := "a"
	if leader == follower {
		follower = "b"
	}
	lp, fp := c.procs[leader], c.procs[follower]
	lp.inbox = append(lp.inbox, Propose(1, [][]byte{[]byte("a"), []byte("b"), []byte("c"), []byte("d"), []byte("e")}))
	rounds := func() {
		for range 20 {
			now = now.Add(5 * time.Millisecond)
			for _, id := range c.ids {
				c.send(c.procs[id].round(t, now).Messages)
			}
		}
	}
	rounds()
	hw := lp.out.Status.HighWatermark
	if hw < 5 || fp.out.Status.HighWatermark != hw {
		t.Fatalf("setup: leader HW %d, follower HW %d; want the records committed everywhere", hw, fp.out.Status.HighWatermark)
	}

	// On a follower: it asks the leader (R54) and changes nothing itself
	// until the leader's log start comes back in a fetch answer.
	fp.inbox = append(fp.inbox, DeleteBefore(2))
	fout := fp.round(t, now)
	if len(fout.Writes) != 0 || fout.Status.LogStart != 0 || fp.store.LogStart() != 0 {
		t.Fatalf("DeleteBefore on a follower: writes %v, log start %d (store %d); want nothing yet", fout.Writes, fout.Status.LogStart, fp.store.LogStart())
	}
	var asks []*protocol.DeleteRecords
	for _, m := range fout.Messages {
		if b, ok := m.Body.(*protocol.DeleteRecords); ok && m.To == leader {
			asks = append(asks, b)
		}
	}
	if len(asks) != 1 || asks[0].Offset != 2 {
		t.Fatalf("DeleteBefore on a follower sent %v to the leader, want one DeleteRecords before 2", fout.Messages)
	}
	c.send(fout.Messages)
	rounds()
	for _, id := range c.ids {
		if ls := c.procs[id].store.LogStart(); ls != 2 {
			t.Fatalf("%s's store starts at %d after a follower's request, want 2 everywhere", id, ls)
		}
	}

	// On the leader: the log start moves, bounded below the HW (R51 keeps
	// the last committed entry). (The HW may have moved: a log start past
	// the voter set's entry makes the leader append the set again, R55.)
	hw = lp.out.Status.HighWatermark
	lp.inbox = append(lp.inbox, DeleteBefore(hw+100))
	out := lp.round(t, now)
	if len(out.Writes) != 1 || out.Writes[0].Kind != protocol.WriteDeletePrefix || out.Writes[0].Offset != hw-1 || out.Status.LogStart != hw-1 {
		t.Fatalf("DeleteBefore(%d) on the leader: writes %v, log start %d; want one prefix deletion to %d, below the HW", hw+100, out.Writes, out.Status.LogStart, hw-1)
	}
	if _, err := ReadBatch(lp.store, hw-2, hw, 10, 1<<20); !errors.Is(err, storage.ErrOutOfRange) {
		t.Fatalf("reading below the leader's log start: %v, want ErrOutOfRange", err)
	}
	c.send(out.Messages)
	rounds()
	for _, id := range c.ids {
		if ls := c.procs[id].store.LogStart(); ls != hw-1 {
			t.Fatalf("%s's store starts at %d after the rounds, want the leader's log start %d", id, ls, hw-1)
		}
	}
}

// TestVoterChangeEvent: a voter change given to a follower is forwarded,
// appended by the leader as a voter set and resolved once, with the offset
// of that set; the leader's Status shows the node among its observers
// before, and among its caught-up voters after. A refusal (removing a node
// that is not a voter) is resolved with the core's error, nothing changed.
func TestVoterChangeEvent(t *testing.T) {
	c := newCluster(t, "a", "b", "c")
	c.procs["d"] = newProc(t, config("d", "a", "b", "c"), nil) // an observer
	c.ids = append(c.ids, "d")
	leader, now := c.elect(t)
	follower := "a"
	if leader == follower {
		follower = "b"
	}
	lp, fp := c.procs[leader], c.procs[follower]
	var resolved []Resolved
	rounds := func() {
		for range 20 {
			now = now.Add(5 * time.Millisecond)
			for _, id := range c.ids {
				out := c.procs[id].round(t, now)
				c.send(out.Messages)
				if id == follower {
					resolved = append(resolved, out.Resolved...)
				}
			}
		}
	}
	rounds()
	st := lp.out.Status
	if st.Bootstrap || len(st.Voters) != 3 || st.DirID != leader || st.Observers["d"] != "d" || len(st.Observers) != 1 {
		t.Fatalf("setup: leader status %+v; want the three bootstrap voters recorded and d observing", st)
	}
	for _, v := range []string{"a", "b", "c"} {
		if !st.CaughtUp[v] {
			t.Fatalf("setup: voter %s not caught up on an idle cluster: %+v", v, st.CaughtUp)
		}
	}
	if fst := fp.out.Status; fst.CaughtUp != nil || fst.Observers != nil || len(fst.Voters) != 3 || fst.VotersOffset != st.VotersOffset {
		t.Fatalf("a follower's status %+v: want the same voter set, no leader-only fields", fst)
	}

	// A refusal: nothing appended, resolved with the core's error.
	fp.inbox = append(fp.inbox, VoterChange(1, protocol.VoterChange{NodeID: "zz"}))
	rounds()
	if len(resolved) != 1 || resolved[0].ID != 1 || !errors.Is(resolved[0].Err, replica.ErrUnknownNode) {
		t.Fatalf("removing a node that is not a voter resolved %+v, want ErrUnknownNode", resolved)
	}
	if lp.out.Status.VotersOffset != st.VotersOffset {
		t.Fatalf("a refused change moved the voter set: %d -> %d", st.VotersOffset, lp.out.Status.VotersOffset)
	}

	// Positive control: adding d.
	resolved = nil
	fp.inbox = append(fp.inbox, VoterChange(2, protocol.VoterChange{Add: true, NodeID: "d"}))
	rounds()
	st = lp.out.Status
	if len(resolved) != 1 || resolved[0].ID != 2 || resolved[0].Err != nil || resolved[0].Offset != st.VotersOffset || st.VotersOffset == 0 {
		t.Fatalf("adding d resolved %+v, want it committed at the new set's offset %d", resolved, st.VotersOffset)
	}
	es, err := fp.store.Entries(resolved[0].Offset, 1, 1<<20)
	if err != nil || len(es) != 1 || es[0].Type != protocol.EntryVoters {
		t.Fatalf("the follower's entry at the change's offset: %+v, %v; want a voter set", es, err)
	}
	if len(st.Voters) != 4 || st.Voters[3] != (protocol.Voter{ID: "d", DirID: "d"}) || !st.CaughtUp["d"] || len(st.Observers) != 0 {
		t.Fatalf("after adding d the leader's status is %+v", st)
	}
	if dst := c.procs["d"].out.Status; dst.Role != replica.RoleFollower || len(dst.Voters) != 4 {
		t.Fatalf("d after being added: %+v, want a follower with the new set", dst)
	}
}

// TestStatusShowsAReplacement: a voter that comes back with a new
// directory is shown as an observer at that directory and never as the
// old voter caught up; with ManualVoterChanges it stays so, by default it
// is shown as being replaced and finally as a voter at the new directory
// (R58's automatic replacement).
func TestStatusShowsAReplacement(t *testing.T) {
	for _, manual := range []bool{true, false} {
		t.Run(fmt.Sprintf("manual=%v", manual), func(t *testing.T) {
			ids := []string{"a", "b", "c"}
			c := &cluster{procs: map[string]*proc{}, ids: ids}
			for _, id := range ids {
				cfg := config(id, ids...)
				cfg.ManualVoterChanges = manual
				c.procs[id] = newProc(t, cfg, nil)
			}
			leader, now := c.elect(t)
			wiped := "a"
			if leader == wiped {
				wiped = "b"
			}
			lp := c.procs[leader]
			cfg := config(wiped, ids...)
			cfg.DirID = wiped + "-new"
			c.procs[wiped] = newProc(t, cfg, nil) // an empty store: the directory was wiped
			var sawObserver, sawReplacing bool
			// The old incarnation must be silent for FetchTimeout before the
			// leader replaces it (R58): run well past that.
			for range 1000 {
				now = now.Add(5 * time.Millisecond)
				for _, id := range c.ids {
					c.send(c.procs[id].round(t, now).Messages)
				}
				st := lp.out.Status
				if st.Role != replica.RoleLeader {
					t.Fatalf("the leader lost its leadership: %+v", st)
				}
				if slices.Contains(st.Voters, protocol.Voter{ID: wiped, DirID: wiped}) && st.CaughtUp[wiped] && st.Observers[wiped] == cfg.DirID {
					t.Fatalf("the new incarnation's fetches count as the old voter's: %+v", st)
				}
				sawObserver = sawObserver || st.Observers[wiped] == cfg.DirID
				sawReplacing = sawReplacing || st.Replacing[wiped] == cfg.DirID
			}
			st := lp.out.Status
			if manual {
				if !slices.Contains(st.Voters, protocol.Voter{ID: wiped, DirID: wiped}) || st.Observers[wiped] != cfg.DirID || sawReplacing {
					t.Fatalf("manual: final status %+v (replacing seen %v); want the old voter kept and the new incarnation observing", st, sawReplacing)
				}
				return
			}
			want := protocol.Voter{ID: wiped, DirID: cfg.DirID}
			if !sawObserver || !sawReplacing || !slices.Contains(st.Voters, want) || !st.CaughtUp[wiped] || len(st.Replacing) != 0 || len(st.Observers) != 0 {
				t.Fatalf("observer seen %v, replacing seen %v, final status %+v; want %v a caught-up voter again", sawObserver, sawReplacing, st, want)
			}
		})
	}
}

// TestPeerDownEvent: EventPeerDown reaches the core (R69). The leader
// crashes (its messages stop) and both followers are told its connection
// closed: one of them leads within ElectionTimeout plus a round trip,
// long before FetchTimeout would elect anyone. Without the event they
// would still follow the dead leader then.
func TestPeerDownEvent(t *testing.T) {
	c := newCluster(t, "a", "b", "c")
	leader, now := c.elect(t)
	var others []string
	for _, id := range c.ids {
		if id != leader {
			others = append(others, id)
		}
	}
	c.ids = others // the leader is gone: it runs no more rounds
	for _, id := range others {
		c.procs[id].inbox = append(c.procs[id].inbox, PeerDown(leader))
	}
	end := now.Add(2 * electionTimeout)
	for now.Before(end) {
		now = now.Add(5 * time.Millisecond)
		for _, id := range others {
			for _, m := range c.procs[id].round(t, now).Messages {
				if m.To != leader {
					c.procs[m.To].inbox = append(c.procs[m.To].inbox, Message(m))
				}
			}
		}
	}
	leads := 0
	for _, id := range others {
		st := c.procs[id].out.Status
		if st.Role == replica.RoleLeader {
			leads++
		}
	}
	if leads != 1 {
		t.Fatalf("%v after the leader's connections closed: want a new leader among %v within 2*ElectionTimeout (FetchTimeout is %v)",
			[]replica.Status{c.procs[others[0]].out.Status, c.procs[others[1]].out.Status}, others, fetchTimeout)
	}
}
