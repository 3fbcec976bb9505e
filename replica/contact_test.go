package replica

import (
	"testing"
	"time"

	"github.com/replog-io/replog/protocol"
)

// TestContactFetchKeepsLeadershipThroughADiskStall (R77): a follower whose
// disk stalls for three FetchTimeouts under load, at level 8 (pipelining)
// and at 7, while the third voter is down, so that the leader's quorum and
// HW need it. It keeps fetching from its durable end: the leader keeps its
// leadership, the follower stays its follower, and the HW never passes
// what the follower holds durably. Once its disk is back, everything
// commits (the positive control that the load was real).
func TestContactFetchKeepsLeadershipThroughADiskStall(t *testing.T) {
	for _, level := range []string{"8", "7"} {
		t.Run("level "+level, func(t *testing.T) {
			h := newHarness(t)
			h.run(t, "cluster", arg("voters", "n1,n2,n3"), arg("supports", "8"), arg("hold", level))
			h.run(t, "elect", arg("n1"))
			h.run(t, "run", arg("+3s"), arg("nostatus"))
			h.run(t, "crash", arg("n3"))
			n1, n2 := h.node("n1"), h.node("n2")
			contacts := 0
			stall := 3 * n1.cfg.FetchTimeout
			for el := time.Duration(0); el < stall; el += 100 * time.Millisecond {
				h.run(t, "propose", arg("n1"), arg("x"))
				h.run(t, "persist", arg("n1"))
				for _, m := range h.queue {
					if f, ok := m.Body.(*protocol.FetchRequest); ok && m.From == "n2" && f.MaxBytes == 1 && f.MaxWaitMs == 0 {
						contacts++
					}
				}
				h.run(t, "deliver") // n2's writes are not persisted: its disk stalls
				h.run(t, "tick", arg("n1"), arg("n2"), arg("+100ms"))
				if n1.r.role != RoleLeader || n1.r.epoch != 1 || n2.r.role != RoleFollower || n2.r.leaderID != "n1" {
					t.Fatalf("after %v of stalled disk: n1 %v of epoch %d, n2 %v following %q; want n1 still leading epoch 1",
						el, n1.r.role, n1.r.epoch, n2.r.role, n2.r.leaderID)
				}
				if n1.r.hw > n2.r.log.durableEnd {
					t.Fatalf("after %v of stalled disk: the HW is %d, past n2's durable end %d", el, n1.r.hw, n2.r.log.durableEnd)
				}
			}
			if contacts < 5 {
				t.Fatalf("%d contact fetches in %v of stalled disk, want one every FetchMaxWait", contacts, stall)
			}
			if n2.r.log.LEO() == n2.r.log.durableEnd {
				t.Fatalf("n2's LEO %d, durable %d: no entries held back by the stall", n2.r.log.LEO(), n2.r.log.durableEnd)
			}
			h.run(t, "stabilize")
			if leo := n1.r.log.LEO(); n1.r.hw != leo || n2.r.hw != leo {
				t.Fatalf("after the stall: HW %d on n1, %d on n2, want the LEO %d", n1.r.hw, n2.r.hw, leo)
			}
		})
	}
}
