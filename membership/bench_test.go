package membership

import (
	"testing"
	"time"
)

// BenchmarkDetection measures, on a three-node loopback cluster, how long
// gossip takes to (1) spread a SetLeader to the other two nodes as
// a LeaderClaim hint and (2) turn a crash (Close without Leave) into
// a NodeFailed hint on both survivors. Reported per profile as
// leader-hint-ms and failure-hint-ms. The LAN profile takes seconds per
// iteration: run it with -bench 'Detection/lan' -benchtime 3x.
func BenchmarkDetection(b *testing.B) {
	for _, p := range []struct {
		name   string
		tuning Tuning
	}{{"fast", FastForTests()}, {"lan", LAN()}} {
		b.Run(p.name, func(b *testing.B) {
			var leaderTotal, failTotal time.Duration
			n := 0
			for b.Loop() {
				l, f := detectOnce(b, p.tuning)
				leaderTotal += l
				failTotal += f
				n++
			}
			b.ReportMetric(float64(leaderTotal.Milliseconds())/float64(n), "leader-hint-ms")
			b.ReportMetric(float64(failTotal.Milliseconds())/float64(n), "failure-hint-ms")
		})
	}
}

func detectOnce(b *testing.B, tuning Tuning) (leader, failure time.Duration) {
	cfg := func(id string, seeds ...string) Config {
		c := fastConfig(id, seeds...)
		c.Tuning = tuning
		return c
	}
	mustNew := func(c Config) *Membership {
		m, err := New(c)
		if err != nil {
			b.Fatal(err)
		}
		return m
	}
	a := mustNew(cfg("a"))
	defer a.Close()
	bb := mustNew(cfg("b", a.GossipAddr()))
	defer bb.Close()
	c := mustNew(cfg("c", a.GossipAddr()))
	defer c.Close()
	for _, m := range []*Membership{a, bb, c} {
		for !allAlive(m, "a", "b", "c") {
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitAll := func(want Hint, ms ...*Membership) {
		for _, m := range ms {
			timer := time.NewTimer(time.Minute)
			for found := false; !found; {
				select {
				case h := <-m.Hints():
					found = h == want
				case <-timer.C:
					b.Fatalf("%s: no %+v", m.cfg.NodeID, want)
				}
			}
			timer.Stop()
		}
	}
	start := time.Now()
	if err := a.SetLeader("a", 1); err != nil {
		b.Fatal(err)
	}
	waitAll(Hint{Kind: LeaderClaim, Node: "a", Epoch: 1}, bb, c)
	leader = time.Since(start)

	start = time.Now()
	if err := c.Close(); err != nil {
		b.Fatal(err)
	}
	waitAll(Hint{Kind: NodeFailed, Node: "c"}, a, bb)
	return leader, time.Since(start)
}
