package replica

import (
	"reflect"
	"testing"
	"time"

	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/storage"
)

// quietBefore checks R96 on r as it stands after a Ready: it has a
// deadline after its clock, and a round without events (Tick, Ready) one
// nanosecond before it does nothing: no write, message, ack or transfer
// outcome, and the same Status. It returns the deadline.
func quietBefore(t *testing.T, r *Replica, what string) time.Time {
	t.Helper()
	d := r.NextDeadline()
	if d.IsZero() || !d.After(r.now) {
		t.Fatalf("%s: NextDeadline %v, want one after the clock %v", what, d, r.now)
	}
	before := r.Status()
	r.Tick(d.Add(-time.Nanosecond))
	if rd := r.Ready(); !rd.IsEmpty() {
		t.Fatalf("%s: a tick 1ns before NextDeadline (%v after the clock) did something: %d writes, messages %v, %d acks, transfers %v",
			what, d.Sub(r.now), len(rd.Writes), rd.Messages, len(rd.Acks), rd.Transfers)
	}
	if after := r.Status(); !reflect.DeepEqual(before, after) {
		t.Fatalf("%s: a tick 1ns before NextDeadline changed Status:\n%+v\nto\n%+v", what, before, after)
	}
	return d
}

// advanceUntil ticks r from deadline to deadline (checking quietBefore
// before each) until done says a round did what was due; between rounds,
// carry carries out the round's Ready. It fails after 20 deadlines.
func advanceUntil(t *testing.T, r *Replica, what string, carry func(Ready), done func(Ready) bool) {
	t.Helper()
	for range 20 {
		d := quietBefore(t, r, what)
		r.Tick(d)
		rd := r.Ready()
		carry(rd)
		if done(rd) {
			return
		}
	}
	t.Fatalf("%s: 20 deadlines passed without it", what)
}

// carryHarness carries a Ready of n out as the harness does.
func carryHarness(h *harness, n *hnode) func(Ready) {
	return func(rd Ready) {
		n.now = later(n.now, n.r.now)
		n.pending = append(n.pending, rd.Writes...)
		for _, m := range rd.Messages {
			if !h.cut[[2]string{m.From, m.To}] {
				h.queue = append(h.queue, m)
			}
		}
	}
}

func sends[T protocol.Body](to string, pred func(T) bool) func(Ready) bool {
	return func(rd Ready) bool {
		for _, b := range bodiesTo[T](rd.Messages, to) {
			if pred == nil || pred(b) {
				return true
			}
		}
		return false
	}
}

// TestNextDeadline is R96: in each state a core waits in for time to pass
// (a leader with parked fetches, a follower with a fetch outstanding, a
// candidate, a follower whose disk holds its fetch back, a leader whose
// transfer cannot complete, a follower pulling a snapshot whose request
// went unanswered, a leader with a fetch waiting for the quota), a round without events just before NextDeadline does nothing,
// and ticking from deadline to deadline does what was due: the parked
// fetch answered, the fetch sent again, a new election, the contact
// fetch (R77), the transfer given up, the snapshot request sent again
// (R95), the throttled fetch served.
// (Fails with replog_bug_deadline_ignores_parked.)
func TestNextDeadline(t *testing.T) {
	t.Run("leader with parked fetches", func(t *testing.T) {
		h := newHarness(t)
		h.run(t, "cluster", arg("voters", "n1,n2,n3"))
		h.run(t, "elect", arg("n1"))
		n1 := h.node("n1")
		if len(n1.r.leader.parked) != 2 {
			t.Fatalf("setup: %d parked fetches, want 2", len(n1.r.leader.parked))
		}
		advanceUntil(t, n1.r, "parked", carryHarness(h, n1), sends[*protocol.FetchResponse]("n2", nil))
	})
	t.Run("follower with a fetch outstanding", func(t *testing.T) {
		h := newHarness(t)
		h.run(t, "cluster", arg("voters", "n1,n2,n3"))
		h.run(t, "elect", arg("n1"))
		n2 := h.node("n2")
		if !n2.r.fetch.Outstanding() {
			t.Fatal("setup: n2 has no fetch outstanding")
		}
		advanceUntil(t, n2.r, "fetch retry", carryHarness(h, n2), sends[*protocol.FetchRequest]("n1", nil))
	})
	t.Run("candidate", func(t *testing.T) {
		h := newHarness(t)
		h.run(t, "cluster", arg("voters", "n1,n2,n3"))
		h.run(t, "campaign", arg("n1"))
		n1 := h.node("n1")
		h.queue = nil // its vote requests are lost
		if n1.r.role != RoleCandidate {
			t.Fatalf("setup: n1 is %v", n1.r.role)
		}
		advanceUntil(t, n1.r, "election timeout", carryHarness(h, n1), func(Ready) bool { return n1.r.role == RoleProspective })
	})
	t.Run("contact fetch", func(t *testing.T) {
		h := newHarness(t)
		h.run(t, "cluster", arg("voters", "n1,n2,n3"))
		h.run(t, "elect", arg("n1"))
		h.run(t, "propose", arg("n1"), arg("x"))
		h.run(t, "persist", arg("n1"))
		h.run(t, "deliver") // n2 takes the entry; its disk stalls
		n2 := h.node("n2")
		if len(n2.pending) == 0 || n2.r.fetchReady() {
			t.Fatal("setup: n2's writer does not hold its next fetch")
		}
		advanceUntil(t, n2.r, "contact fetch", carryHarness(h, n2),
			sends("n1", func(f *protocol.FetchRequest) bool { return f.MaxBytes == 1 && f.MaxWaitMs == 0 }))
	})
	t.Run("transfer that cannot complete", func(t *testing.T) {
		h := newHarness(t)
		h.run(t, "cluster", arg("voters", "n1,n2,n3"))
		h.run(t, "elect", arg("n1"))
		h.run(t, "partition", arg("n1,n2"), arg("n3"))
		h.run(t, "propose", arg("n1"), arg("x"))
		h.run(t, "stabilize")
		h.run(t, "transfer", arg("n1"), arg("to", "n3"))
		n1 := h.node("n1")
		if n1.r.leader.transfer == nil {
			t.Fatal("setup: no transfer under way")
		}
		carry := func(rd Ready) {
			carryHarness(h, n1)(rd)
			h.run(t, "stabilize") // n2 keeps fetching; n3 is cut off
		}
		advanceUntil(t, n1.r, "transfer timeout", carry, func(rd Ready) bool { return len(rd.Transfers) > 0 })
		if n1.r.role != RoleLeader {
			t.Fatalf("n1 is %v after its transfer timed out, want leader", n1.r.role)
		}
	})
	t.Run("follower pulling a snapshot", func(t *testing.T) {
		r, _, req := shippingFollower(t) // the request's answer is lost
		advanceUntil(t, r, "snapshot request retry", func(Ready) {},
			sends("L", func(q *protocol.SnapshotRequest) bool {
				return q.RequestID != req.RequestID && q.Position == req.Position
			}))
	})
	t.Run("fetch waiting for the quota", func(t *testing.T) {
		r, store := catchUpLeader(t, 400, func(c *Config) { c.CatchUpBytesPerSecond = 64 << 10 }, "a", "b")
		o := &catchUpFetcher{id: "o", dir: "o"}
		for range 20 {
			o.send(r)
			msgs, _ := settle(t, r, store)
			if !o.take(t, r, msgs) {
				break
			}
		}
		if !o.outstanding || len(r.leader.quota.waiting) != 1 {
			t.Fatal("setup: the observer's fetch does not wait for the quota")
		}
		carry := func(rd Ready) {
			applyWrites(t, store, rd.Writes)
			if len(rd.Writes) > 0 {
				r.Persisted(rd.Writes[len(rd.Writes)-1].Seq)
			}
			o.take(t, r, rd.Messages)
		}
		advanceUntil(t, r, "quota", carry, func(Ready) bool { return !o.outstanding })
	})
}

// TestNextDeadlineIsZeroWhenHalted: a halted core waits for nothing.
func TestNextDeadlineIsZeroWhenHalted(t *testing.T) {
	r := newTestReplica(t, testConfig("n1", "n1", "n2", "n3"), storage.NewMemory())
	if r.NextDeadline().IsZero() {
		t.Fatal("a follower has no deadline")
	}
	r.halt(ErrEpochExhausted)
	if d := r.NextDeadline(); !d.IsZero() {
		t.Fatalf("a halted core's deadline is %v", d)
	}
}

// TestNextDeadlineKeyTableBehind: a key table that one Ready could not
// bring up to the LEO (keyCatchUpBytes a round, as after a restart over a
// long log) is due at once: without the term, the rest of the catch-up,
// and everything waiting for it (keyed proposals, the catalog, R68's
// raise, retention's key bound), waits for an unrelated event.
func TestNextDeadlineKeyTableBehind(t *testing.T) {
	store := storage.NewMemory()
	const n = 3 * keyCatchUpBytes / (1 << 20)
	es := make([]protocol.Entry, n)
	for i := range es {
		es[i] = protocol.Entry{Offset: uint64(i), Epoch: 1, Type: protocol.EntryData, Data: make([]byte, 1<<20)}
	}
	applyWrites(t, store, []protocol.Write{
		{Kind: protocol.WriteAppend, Entries: es},
		{Kind: protocol.WriteQuorumState, Quorum: protocol.QuorumState{Epoch: 1}},
	})
	cfg := testConfig("n1", "n1", "n2", "n3")
	cfg.MaxRecordSize = 2 << 20
	r := newTestReplica(t, cfg, store)
	r.Ready()
	if r.keys.applied >= r.log.LEO() {
		t.Fatalf("setup: the table caught up (%d of %d) in one round", r.keys.applied, r.log.LEO())
	}
	for range 2 * n {
		if r.keys.applied >= r.log.LEO() {
			return
		}
		before := r.Status().KeysApplied
		if before != r.keys.applied {
			t.Fatalf("Status.KeysApplied is %d, the table is at %d", before, r.keys.applied)
		}
		d := r.NextDeadline()
		if d.IsZero() || d.After(r.now) {
			t.Fatalf("the key table is at %d of %d after a Ready, and NextDeadline is %v, %v after the clock: the rest of the catch-up waits for an event",
				r.keys.applied, r.log.LEO(), d, d.Sub(r.now))
		}
		r.Tick(d)
		r.Ready()
		// Each round's share shows in the Status (the simulation's check
		// of rounds that do nothing reads it).
		if got := r.Status().KeysApplied; got <= before {
			t.Fatalf("a catch-up round left Status.KeysApplied at %d", got)
		}
	}
	t.Fatalf("the key table is at %d of %d after %d rounds", r.keys.applied, r.log.LEO(), 2*n)
}

// TestKeyCheckpointInTheRoundThatEarnsIt (R96, R76): a leader whose Ready
// appends after the key table's round (here R68's level entry, raised at
// the end of the leadership's first FetchTimeout) hands out the key
// checkpoint that entry earns in that Ready, not in the next round, which
// has no input and must do nothing. (Fails with
// replog_bug_key_checkpoint_late.)
func TestKeyCheckpointInTheRoundThatEarnsIt(t *testing.T) {
	h := newHarness(t)
	h.run(t, "cluster", arg("voters", "n1,n2"), arg("supports", "7"))
	h.run(t, "elect", arg("n1"))
	n1 := h.node("n1")
	n1.r.cfg.KeyCheckpointBytes = 1 // every applied entry earns one
	h.run(t, "run", arg("+1900ms"), arg("nostatus"))
	if n1.r.logLevel() != 6 {
		t.Fatalf("setup: level %d before the leader's first FetchTimeout, want 6", n1.r.logLevel())
	}
	for range 20 {
		d := n1.r.NextDeadline()
		n1.now = later(n1.now, d)
		n1.r.Tick(n1.now)
		rd := n1.r.Ready()
		carryHarness(h, n1)(rd)
		if n1.r.logLevel() == 7 {
			if rd.KeyCheckpoint == nil || rd.KeyCheckpoint.Offset != n1.r.log.LEO() {
				t.Fatalf("the round that appended the level entry (LEO %d) handed out key checkpoint %+v, want one at the LEO",
					n1.r.log.LEO(), rd.KeyCheckpoint)
			}
			quietBefore(t, n1.r, "after the level's raise")
			return
		}
		h.stabilize(nil, false)
		if n1.r.logLevel() == 7 {
			t.Fatal("setup: the level was raised in a round with inputs")
		}
	}
	t.Fatal("setup: the leader raised no level in 20 deadlines")
}
