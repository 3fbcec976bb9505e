package replica

import (
	"errors"
	"testing"

	"github.com/replog-io/replog/protocol"
)

// TestBarrierRules covers docs/protocol.md R50: a barrier is one control
// entry without data, appended, forwarded and acknowledged as an append is;
// a peer's control request is appended only when its records are empty.
func TestBarrierRules(t *testing.T) {
	// lastEntry returns the entry at the end of store.
	lastEntry := func(t *testing.T, r *Replica) protocol.Entry {
		t.Helper()
		leo := r.log.LEO()
		if leo == 0 {
			t.Fatal("empty log")
		}
		es, err := r.log.read(leo-1, 1<<20)
		if err != nil || len(es) != 1 {
			t.Fatalf("read %d: %v %v", leo-1, es, err)
		}
		return es[0]
	}
	isBarrier := func(e protocol.Entry, epoch uint64) bool {
		return e.Type == protocol.EntryControl && len(e.Data) == 0 && e.Epoch == epoch
	}

	t.Run("leader: one empty control entry of its epoch, acked once committed", func(t *testing.T) {
		r, store := leaderWith(t, []string{"l", "a"}, []uint64{1}, protocol.QuorumState{Epoch: 1})
		// Commit the epoch-start entry first.
		leo := r.log.LEO()
		fetch(r, "a", 1, r.epoch, leo, r.epoch)
		settle(t, r, store)
		if r.hw != leo {
			t.Fatalf("setup: HW %d, want %d", r.hw, leo)
		}
		r.ProposeBarrier(7)
		_, acks := settle(t, r, store)
		if len(acks) != 0 {
			t.Fatalf("acked before a majority has it: %v", acks)
		}
		if got := r.log.LEO(); got != leo+1 {
			t.Fatalf("LEO %d after a barrier, want %d (one entry)", got, leo+1)
		}
		if e := lastEntry(t, r); !isBarrier(e, r.epoch) || e.Offset != leo {
			t.Fatalf("barrier entry %+v, want an empty control entry of epoch %d at %d", e, r.epoch, leo)
		}
		fetch(r, "a", 2, r.epoch, leo+1, r.epoch)
		_, acks = settle(t, r, store)
		if len(acks) != 1 || acks[0].ID != 7 || acks[0].Err != nil || acks[0].FirstOffset != leo {
			t.Fatalf("acks %v, want #7 ok at %d", acks, leo)
		}
	})

	t.Run("follower: forwarded as a control request with one empty record", func(t *testing.T) {
		store := newStore(t, nil, protocol.QuorumState{Epoch: 1, LeaderID: "L"})
		r := newTestReplica(t, testConfig("f", "f", "L"), store)
		r.ProposeBarrier(7)
		reqs := bodiesTo[*protocol.AppendRequest](r.Ready().Messages, "L")
		if len(reqs) != 1 || reqs[0].Type != protocol.EntryControl || len(reqs[0].Records) != 1 || len(reqs[0].Records[0]) != 0 || reqs[0].Epoch != 1 {
			t.Fatalf("forwarded %v, want one control request of epoch 1 with one empty record", reqs)
		}
		if r.log.LEO() != 0 {
			t.Fatal("a follower appended its own barrier")
		}
		r.Step(protocol.Message{From: "L", To: "f", Body: &protocol.AppendResponse{RequestID: reqs[0].RequestID, Error: protocol.AppendOK, LeaderID: "L", FirstOffset: 5}})
		_, acks := settle(t, r, store)
		if len(acks) != 1 || acks[0].ID != 7 || acks[0].Err != nil || acks[0].FirstOffset != 5 {
			t.Fatalf("acks %v, want #7 ok at 5", acks)
		}
	})

	t.Run("no leader known: not leader, nothing sent", func(t *testing.T) {
		store := newStore(t, nil, protocol.QuorumState{Epoch: 1})
		r := newTestReplica(t, testConfig("f", "f", "a", "b"), store)
		r.ProposeBarrier(7)
		rd := r.Ready()
		if len(rd.Acks) != 1 || !errors.Is(rd.Acks[0].Err, ErrNotLeader) || len(bodiesTo[*protocol.AppendRequest](rd.Messages, "")) != 0 {
			t.Fatalf("acks %v messages %v", rd.Acks, rd.Messages)
		}
	})

	// A leader's answers to forwarded control requests: appended only when
	// every record is empty (the positive control of the refusals).
	for _, tc := range []struct {
		name    string
		typ     protocol.EntryType
		records [][]byte
		want    protocol.AppendError
	}{
		{"a forwarded barrier becomes a control entry", protocol.EntryControl, [][]byte{nil}, protocol.AppendOK},
		{"a control request with data is refused", protocol.EntryControl, [][]byte{[]byte("not a barrier")}, protocol.AppendTooLarge},
		{"a control request with data after an empty record is refused", protocol.EntryControl, [][]byte{nil, []byte("x")}, protocol.AppendTooLarge},
		{"an unknown type is refused", protocol.EntryType(9), [][]byte{nil}, protocol.AppendTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, store := leaderWith(t, []string{"l", "a"}, nil, protocol.QuorumState{})
			leo := r.log.LEO()
			r.Step(protocol.Message{From: "a", To: "l", Body: &protocol.AppendRequest{RequestID: 9, Epoch: r.epoch, Type: tc.typ, Records: tc.records}})
			msgs, _ := settle(t, r, store)
			if tc.want != protocol.AppendOK {
				resps := bodiesTo[*protocol.AppendResponse](msgs, "a")
				if len(resps) != 1 || resps[0].Error != tc.want || r.log.LEO() != leo {
					t.Fatalf("answers %v, LEO %d (was %d): want %s and nothing appended", resps, r.log.LEO(), leo, tc.want)
				}
				return
			}
			if r.log.LEO() != leo+1 {
				t.Fatalf("LEO %d, want %d", r.log.LEO(), leo+1)
			}
			if e := lastEntry(t, r); !isBarrier(e, r.epoch) {
				t.Fatalf("appended %+v, want an empty control entry of epoch %d", e, r.epoch)
			}
			fetch(r, "a", 1, r.epoch, leo+1, r.epoch)
			msgs, _ = settle(t, r, store)
			resps := bodiesTo[*protocol.AppendResponse](msgs, "a")
			if len(resps) != 1 || resps[0].Error != protocol.AppendOK || resps[0].FirstOffset != leo {
				t.Fatalf("answers %v, want ok at %d", resps, leo)
			}
		})
	}
}
