package replica

import (
	"errors"
	"testing"

	"github.com/replog-io/replog/protocol"
)

// TestBacklogBoundRefusesAndRecovers: R74. A leader whose HW does not move
// appends data proposals until its uncommitted bytes reach
// MaxUncommittedBytes, then refuses the next ones with nothing appended
// (ErrBacklogFull; a forwarded one not-leader naming the leader itself,
// and a copy of it the same), barriers still pass; once the HW moves the
// accepted ones commit and new ones are taken again, and a proposal
// larger than the bound is taken when the backlog is empty.
// (Fails with replog_bug_backlog_unbounded.)
func TestBacklogBoundRefusesAndRecovers(t *testing.T) {
	const limit = 100 << 10
	r, store := leaderWith(t, []string{"l", "a", "b"}, nil, protocol.QuorumState{Epoch: 1})
	r.cfg.MaxUncommittedBytes = limit
	rec := make([]byte, 8<<10)
	var accepted []uint64
	refused := 0
	for id := uint64(1); id <= 20; id++ {
		leo := r.log.LEO()
		r.Propose(id, [][]byte{rec})
		_, acks := settle(t, r, store)
		switch {
		case len(acks) == 0 && r.log.LEO() == leo+1:
			accepted = append(accepted, id)
		case len(acks) == 1 && errors.Is(acks[0].Err, ErrBacklogFull) && r.log.LEO() == leo:
			refused++
		default:
			t.Fatalf("proposal %d: acks %+v, LEO %d -> %d", id, acks, leo, r.log.LEO())
		}
	}
	perRecord := len(rec) + protocol.EntryOverhead
	if want := limit / perRecord; len(accepted) != want || refused != 20-want {
		t.Fatalf("accepted %d, refused %d; want %d accepted (the bound %d / %d bytes each)", len(accepted), refused, want, limit, perRecord)
	}
	if bs := r.BacklogStats(); bs.Bytes != uint64(len(accepted)*perRecord) || bs.Refused != uint64(refused) {
		t.Fatalf("backlog stats %+v, want %d bytes and %d refused", bs, len(accepted)*perRecord, refused)
	}
	// A forwarded proposal, and a copy of it: not leader, naming l.
	for range 2 {
		leo := r.log.LEO()
		r.Step(protocol.Message{From: "a", To: "l", Body: &protocol.AppendRequest{RequestID: 7, Epoch: r.epoch, Records: [][]byte{rec}}})
		msgs, _ := settle(t, r, store)
		resp := bodiesTo[*protocol.AppendResponse](msgs, "a")
		if len(resp) != 1 || resp[0].Error != protocol.AppendNotLeader || resp[0].LeaderID != "l" || r.log.LEO() != leo {
			t.Fatalf("forwarded append over the bound: answers %+v, LEO %d -> %d; want not-leader naming l, nothing appended", resp, leo, r.log.LEO())
		}
	}
	// A barrier carries no data: never refused.
	leo := r.log.LEO()
	r.ProposeBarrier(100)
	if _, acks := settle(t, r, store); len(acks) != 0 || r.log.LEO() != leo+1 {
		t.Fatalf("barrier over the bound: acks %+v, LEO %d -> %d", acks, leo, r.log.LEO())
	}

	// The followers catch up: everything accepted commits, the backlog
	// empties.
	for _, v := range []string{"a", "b"} {
		fetch(r, v, 1, r.epoch, r.log.LEO(), r.epoch)
	}
	_, acks := settle(t, r, store)
	if len(acks) != len(accepted)+1 || r.hw != r.log.LEO() {
		t.Fatalf("after the followers fetched: %d acks, HW %d, LEO %d; want %d acks (the accepted and the barrier)", len(acks), r.hw, r.log.LEO(), len(accepted)+1)
	}
	for _, a := range acks {
		if a.Err != nil {
			t.Fatalf("ack %+v", a)
		}
	}
	if bs := r.BacklogStats(); bs.Bytes != 0 {
		t.Fatalf("backlog %d bytes after everything committed", bs.Bytes)
	}
	// Empty: a proposal larger than the bound is taken, and the next small
	// one refused behind it.
	big := [][]byte{make([]byte, 60<<10), make([]byte, 60<<10)}
	leo = r.log.LEO()
	r.Propose(200, big)
	if _, acks := settle(t, r, store); len(acks) != 0 || r.log.LEO() != leo+2 {
		t.Fatalf("a batch over the bound into an empty backlog: acks %+v, LEO %d -> %d", acks, leo, r.log.LEO())
	}
	r.Propose(201, [][]byte{rec})
	if _, acks := settle(t, r, store); len(acks) != 1 || !errors.Is(acks[0].Err, ErrBacklogFull) {
		t.Fatalf("a proposal behind one over the bound: acks %+v, want ErrBacklogFull", acks)
	}
}
