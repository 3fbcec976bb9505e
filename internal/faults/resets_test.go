package faults

import (
	"context"
	"flag"
	"testing"
	"time"
)

var flagResets = flag.Duration("faults.resets", 20*time.Second, "TestConnectionResetsDeposeNoOne: how long the leader's connections are reset every 2s")

// TestConnectionResetsDeposeNoOne: every 2s every connection between the
// leader and each follower is closed under their feet (the proxies close
// both ends, so each node sees the other hang up, as after a middlebox's
// reset or a flapping link), while 16 appenders run. A hang-up is not a
// crash: the leader lives on and answers, so no voter may be deposed (R69:
// a follower that sees its leader hang up asks first whether the leader is
// really gone). Elections are counted by the epoch, which must not move.
// TestFailover, where a SIGKILL closes the same connections, is the
// positive control (a new leader at once).
func TestConnectionResetsDeposeNoOne(t *testing.T) {
	o := testRunOpts(t)
	defaultTimings(&o)
	o.cfg.Appenders = 16
	o.cfg.Duration = *flagResets
	var startEpoch, endEpoch uint64
	resets := 0
	o.cfg.Script = func(ctx context.Context, nm *Nemesis) {
		var leader *Node
		leader, startEpoch = waitLeader(ctx, nm.c)
		if leader == nil {
			t.Errorf("no leader at the start")
			return
		}
		for ctx.Err() == nil {
			nm.sleep(ctx, 2*time.Second)
			if ctx.Err() != nil {
				continue
			}
			l, _ := nm.c.Leader(ctx)
			if l == nil {
				continue
			}
			for _, n := range nm.c.Nodes {
				if n != l {
					nm.c.Net.Link(l.ID, n.ID).CutAll()
					nm.c.Net.Link(n.ID, l.ID).CutAll()
				}
			}
			nm.event("reset", true, "every connection of the leader", l)
			resets++
		}
		_, endEpoch = waitLeader(context.WithoutCancel(ctx), nm.c)
	}
	rep := faultRun(t, o)
	checkRun(t, rep)
	t.Logf("%v with %d appenders, %d resets of the leader's connections: %d acknowledged appends, epochs %d..%d",
		o.cfg.Duration, o.cfg.Appenders, resets, rep.History.Counts()[OK], startEpoch, endEpoch)
	if resets == 0 {
		t.Errorf("no reset was made")
	}
	if endEpoch != startEpoch {
		t.Errorf("%d elections though the leader lived on (epoch %d, then %d)", endEpoch-startEpoch, startEpoch, endEpoch)
	}
}
