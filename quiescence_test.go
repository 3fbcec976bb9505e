package replog

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/replog-io/replog/protocol"
)

// quiescenceCounts sums what every node of c has sent: fetch requests
// and heartbeats (TCPStats).
func quiescenceCounts(c *nodeCluster) (fetches, heartbeats uint64) {
	for _, n := range c.nodes {
		st := n.tcp.Stats()
		fetches += st.FetchesSent
		heartbeats += st.HeartbeatsSent
	}
	return fetches, heartbeats
}

// TestIdleLogsQuiesce (R98-R100): 3 nodes with 20 idle named logs. Once
// settled, the fetches the whole cluster sends over a window of 10
// heartbeat intervals on every directed pair (counted in heartbeats, not
// in time) are no more than what a single idle log that never quiesced
// would send in it (one per interval per follower), although 21 logs run:
// the logs' liveness comes from the node's heartbeats. Positive control:
// 30 appends to one log take at least 30 fetches. Then the node leading
// most logs is closed, and every log gets a leader again and takes an
// append.
func TestIdleLogsQuiesce(t *testing.T) {
	c := newNodeCluster(t, 3)
	c.ready()
	ctx := nodeCtx(t)
	ids := []string{"n1", "n2", "n3"}
	const logs = 20
	var names []string
	for i := range logs {
		name := fmt.Sprintf("idle-%d", i)
		names = append(names, name)
		if _, err := c.nodes[ids[i%3]].CreateLog(ctx, name, LogOptions{}); err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
	}
	for _, id := range ids {
		for _, name := range names {
			logOn(t, c.nodes[id], name)
		}
	}
	waitFor(t, "every log at the quiescence level with a leader", 30*time.Second, func() bool {
		for _, n := range c.nodes {
			for _, l := range append([]*Log{n.Default()}, openLogs(n, names)...) {
				if st := l.Status(); st.FeatureLevel < protocol.FeatureLevelQuiescence || st.LeaderID == "" {
					return false
				}
			}
		}
		return true
	})

	// Settled: a window of 10 heartbeat intervals on each of the 6
	// directed pairs with at most one idle log's fetches in it. The
	// cluster may take a few windows to get there (a leader moving to
	// its preferred node, logs catching up).
	const intervals = 10
	pairs := uint64(len(ids) * (len(ids) - 1))
	oneLog := uint64(2 * intervals) // one idle log's two followers, one fetch per interval each
	var fetches uint64
	settled := false
	for range 20 {
		f0, h0 := quiescenceCounts(c)
		waitFor(t, "heartbeats", 30*time.Second, func() bool {
			_, h := quiescenceCounts(c)
			return h-h0 >= intervals*pairs
		})
		f1, _ := quiescenceCounts(c)
		if fetches = f1 - f0; fetches <= oneLog {
			settled = true
			break
		}
	}
	if !settled {
		t.Fatalf("%d idle logs: %d fetches in the last window of %d heartbeat intervals, more than one idle log's %d", logs+1, fetches, intervals, oneLog)
	}
	t.Logf("%d idle logs: %d fetches over %d heartbeat intervals on %d pairs", logs+1, fetches, intervals, pairs)

	// Positive control: appends cost fetches (the counter counts them).
	busy := logOn(t, c.nodes["n1"], names[0])
	f0, _ := quiescenceCounts(c)
	for i := range 30 {
		if _, err := busy.Append(ctx, fmt.Appendf(nil, "busy %d", i)); err != nil {
			t.Fatalf("append: %v", err)
		}
	}
	if f1, _ := quiescenceCounts(c); f1-f0 < 30 {
		t.Fatalf("30 appends cost %d fetches: the count misses them", f1-f0)
	}

	// Fail-over: the node leading most logs goes; every log elects again
	// on the other two (their followers wake from quiescence on its
	// silence or its closed connections) and takes an append.
	victim, most := "", -1
	for id, n := range c.leaders() {
		if n > most {
			victim, most = id, n
		}
	}
	c.stop(victim)
	for id, n := range c.nodes {
		for _, name := range names {
			l := logOn(t, n, name)
			waitFor(t, name+" led again on "+id, 20*time.Second, func() bool {
				st := l.Status()
				return st.LeaderID != "" && st.LeaderID != victim
			})
		}
	}
	for _, name := range names {
		actx, cancel := context.WithTimeout(ctx, 20*time.Second)
		_, err := logOn(t, c.nodes[otherThan(ids, victim)], name).Append(actx, []byte("after"))
		cancel()
		if err != nil {
			t.Fatalf("append to %s after %s went: %v", name, victim, err)
		}
	}
}

// openLogs returns n's open logs of names.
func openLogs(n *Node, names []string) []*Log {
	var out []*Log
	for _, name := range names {
		if l, err := n.Log(name); err == nil {
			out = append(out, l)
		}
	}
	return out
}

// otherThan returns the first of ids that is not id.
func otherThan(ids []string, id string) string {
	for _, o := range ids {
		if o != id {
			return o
		}
	}
	return ""
}
