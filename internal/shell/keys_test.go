package shell

import (
	"errors"
	"testing"

	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/replica"
)

// TestCursorReadEvent: a cursor read appends nothing and is resolved in
// the round it is fed to: ErrNoCursor before the cursor is committed, its
// position once the commit is committed (and readable), the newest after
// a second commit. Each read resolves once, with its own ID.
func TestCursorReadEvent(t *testing.T) {
	p := newProc(t, config("a", "a"), nil)
	for range 3 {
		p.round(t, t0)
	}
	p.inbox = append(p.inbox, CursorRead(1, "c"))
	leo := p.n.Replica().Status().LEO
	out := p.round(t, t0)
	if len(out.Resolved) != 1 || out.Resolved[0].ID != 1 || !errors.Is(out.Resolved[0].Err, ErrNoCursor) {
		t.Fatalf("read of a cursor never committed: %+v, want ID 1 with ErrNoCursor", out.Resolved)
	}
	if got := p.n.Replica().Status().LEO; got != leo || len(out.Writes) != 0 {
		t.Fatalf("a cursor read wrote %v (LEO %d, was %d)", out.Writes, got, leo)
	}
	if p.n.Pending() != 0 {
		t.Fatalf("pending %d after the read was answered", p.n.Pending())
	}
	commit := func(id, next uint64) {
		t.Helper()
		p.inbox = append(p.inbox, CommitCursor(id, protocol.Key{Producer: 9, Seq: id, Low: id}, "c", next))
		for range 3 {
			for _, r := range p.round(t, t0).Resolved {
				if r.ID == id && r.Err == nil {
					return
				}
				t.Fatalf("commit %d: %+v", id, r)
			}
		}
		t.Fatalf("commit %d not resolved", id)
	}
	commit(2, 40)
	p.inbox = append(p.inbox, CursorRead(3, "c"), CursorRead(4, "other"))
	out = p.round(t, t0)
	if len(out.Resolved) != 2 || out.Resolved[0] != (Resolved{ID: 3, Offset: 40}) || out.Resolved[1].ID != 4 || !errors.Is(out.Resolved[1].Err, ErrNoCursor) {
		t.Fatalf("reads after the commit: %+v, want 3 at 40 and 4 with ErrNoCursor", out.Resolved)
	}
	commit(5, 77)
	p.inbox = append(p.inbox, CursorRead(6, "c"))
	if out = p.round(t, t0); len(out.Resolved) != 1 || out.Resolved[0] != (Resolved{ID: 6, Offset: 77}) {
		t.Fatalf("read after the second commit: %+v, want 6 at 77", out.Resolved)
	}
}

// TestEventKindResolves: the kinds a caller waits on are exactly those the
// Node resolves: a round with one event of each resolves the request kinds
// (refused here, on a node that knows no leader, or answered at once) and
// nothing else.
func TestEventKindResolves(t *testing.T) {
	p := newProc(t, config("a", "a", "b", "c"), nil)
	evs := []Event{
		Propose(1, [][]byte{[]byte("x")}),
		Barrier(2),
		VoterChange(3, protocol.VoterChange{Add: true, NodeID: "d"}),
		Transfer(4, ""),
		CommitCursor(5, protocol.Key{Producer: 1, Seq: 1, Low: 1}, "c", 1),
		CursorRead(6, "c"),
		LogChange(7, protocol.Key{Producer: 1, Seq: 2, Low: 1}, "orders", []byte("s")),
		DeleteBefore(0),
		Hint(replica.Hint{}),
	}
	p.inbox = append(p.inbox, evs...)
	out := p.round(t, t0)
	got := map[uint64]bool{}
	for _, r := range out.Resolved {
		got[r.ID] = true
	}
	for _, ev := range evs[:7] {
		if !ev.Kind.Resolves() || !got[ev.ID] {
			t.Errorf("kind %d: Resolves() = %v, resolved in the round: %v", ev.Kind, ev.Kind.Resolves(), got[ev.ID])
		}
	}
	for _, k := range []EventKind{EventMessage, EventHint, EventDeleteBefore, EventPeerDown} {
		if k.Resolves() {
			t.Errorf("kind %d (not a request) Resolves", k)
		}
	}
	if len(got) != 7 {
		t.Errorf("resolved %+v, want the 7 requests", out.Resolved)
	}
}

// TestLogChangeEvent: a log change is refused below feature level 9
// (nothing appended); at 9 a create resolves at its entry's offset and
// the round in which the catalog changes says so (LogsChanged, and only
// then); a second create of the name and a delete of an unknown one are
// refused.
func TestLogChangeEvent(t *testing.T) {
	p := newProc(t, config("a", "a"), nil)
	now := t0
	seq := uint64(0)
	change := func(name, spec string) Resolved {
		t.Helper()
		seq++
		p.inbox = append(p.inbox, LogChange(seq, protocol.Key{Producer: 9, Seq: seq, Low: seq}, name, []byte(spec)))
		for range 4 {
			for _, r := range p.round(t, now).Resolved {
				if r.ID == seq {
					return r
				}
			}
		}
		t.Fatalf("log change %d not resolved", seq)
		return Resolved{}
	}
	out := p.round(t, now)
	if !out.LogsChanged || p.n.Replica().LogsVersion() == 0 || len(p.n.Replica().Logs()) != 0 {
		t.Fatalf("first round: LogsChanged %v, version %d, logs %v: want the empty catalog known", out.LogsChanged, p.n.Replica().LogsVersion(), p.n.Replica().Logs())
	}
	if r := change("orders", "s1"); !errors.Is(r.Err, replica.ErrFeatureLevelTooLow) {
		t.Fatalf("a change at level %d: %+v, want ErrFeatureLevelTooLow", p.n.Replica().Status().FeatureLevel, r)
	}
	for i := 0; p.n.Replica().Status().FeatureLevel < 9; i++ {
		if i > 100 {
			t.Fatal("the level never reached 9")
		}
		now = now.Add(fetchTimeout / 4)
		p.round(t, now)
	}
	v := p.n.Replica().LogsVersion()
	r := change("orders", "s1")
	if r.Err != nil {
		t.Fatalf("create: %+v", r)
	}
	logs := p.n.Replica().Logs()
	if len(logs) != 1 || logs[0].Name != "orders" || string(logs[0].Spec) != "s1" || logs[0].Offset != r.Offset || p.n.Replica().LogsVersion() == v {
		t.Fatalf("after the create at %d: %+v (version %d, was %d)", r.Offset, logs, p.n.Replica().LogsVersion(), v)
	}
	if !p.out.LogsChanged {
		t.Fatal("the round that made the create readable did not say LogsChanged")
	}
	if out := p.round(t, now); out.LogsChanged {
		t.Fatal("LogsChanged in a round that changed nothing")
	}
	if r := change("orders", "s2"); !errors.Is(r.Err, replica.ErrLogExists) {
		t.Fatalf("second create: %+v, want ErrLogExists", r)
	}
	if r := change("payments", ""); !errors.Is(r.Err, replica.ErrUnknownLog) {
		t.Fatalf("delete of an unknown log: %+v, want ErrUnknownLog", r)
	}
	if r := change("orders", ""); r.Err != nil || len(p.n.Replica().Logs()) != 0 {
		t.Fatalf("delete: %+v, logs %+v", r, p.n.Replica().Logs())
	}
}
