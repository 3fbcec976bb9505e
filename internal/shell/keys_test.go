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
		DeleteBefore(0),
		Hint(replica.Hint{}),
	}
	p.inbox = append(p.inbox, evs...)
	out := p.round(t, t0)
	got := map[uint64]bool{}
	for _, r := range out.Resolved {
		got[r.ID] = true
	}
	for _, ev := range evs[:6] {
		if !ev.Kind.Resolves() || !got[ev.ID] {
			t.Errorf("kind %d: Resolves() = %v, resolved in the round: %v", ev.Kind, ev.Kind.Resolves(), got[ev.ID])
		}
	}
	for _, k := range []EventKind{EventMessage, EventHint, EventDeleteBefore} {
		if k.Resolves() {
			t.Errorf("kind %d (not a request) Resolves", k)
		}
	}
	if len(got) != 6 {
		t.Errorf("resolved %+v, want the 6 requests", out.Resolved)
	}
}
