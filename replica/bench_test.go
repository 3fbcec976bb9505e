package replica

import (
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/storage"
)

// benchCluster drives a few replicas in memory: every write is persisted
// at once, every message delivered at once.
type benchCluster struct {
	nodes  map[string]*benchNode
	order  []string
	queue  []protocol.Message
	acked  int
	failed int
}

type benchNode struct {
	r     *Replica
	store *storage.Memory
}

func newBenchCluster(tb testing.TB, voters []string) *benchCluster {
	c := &benchCluster{nodes: map[string]*benchNode{}}
	for i, id := range voters {
		cfg := testConfig(id, voters...)
		cfg.Rand = rand.New(rand.NewSource(int64(i)))
		store := storage.NewMemory()
		r, err := New(cfg, bound(store, voters), t0)
		if err != nil {
			tb.Fatal(err)
		}
		c.nodes[id] = &benchNode{r: r, store: store}
		c.order = append(c.order, id)
	}
	first := c.nodes[voters[0]].r
	first.becomeCandidate()
	c.run(tb)
	if first.role != RoleLeader {
		tb.Fatal("no leader")
	}
	return c
}

func (c *benchCluster) ready(tb testing.TB, n *benchNode) bool {
	rd := n.r.Ready()
	if len(rd.Writes) > 0 {
		applyWrites(tb, n.store, rd.Writes)
		n.r.Persisted(rd.Writes[len(rd.Writes)-1].Seq)
	}
	c.queue = append(c.queue, rd.Messages...)
	for _, a := range rd.Acks {
		if a.Err != nil {
			c.failed++
		} else {
			c.acked++
		}
	}
	return !rd.IsEmpty()
}

// run processes until nothing is left to do.
func (c *benchCluster) run(tb testing.TB) {
	for {
		progress := false
		for _, id := range c.order {
			if c.ready(tb, c.nodes[id]) {
				progress = true
			}
		}
		for len(c.queue) > 0 {
			m := c.queue[0]
			c.queue = c.queue[1:]
			n := c.nodes[m.To]
			n.r.Step(m)
			c.ready(tb, n)
			progress = true
		}
		if !progress {
			return
		}
	}
}

// BenchmarkCoreThroughput: a leader and two followers in memory, 128-byte
// proposals, batch proposals per step (one group-committed write). One op
// is one proposal: allocs/op is allocations per proposal (core, memory
// store and delivery together).
func BenchmarkCoreThroughput(b *testing.B) {
	for _, batch := range []int{1, 16, 256} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			c := newBenchCluster(b, []string{"l", "a", "b"})
			leader := c.nodes["l"].r
			rec := make([]byte, 128)
			records := [][]byte{rec}
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			var id uint64
			for done := 0; done < b.N; {
				n := min(batch, b.N-done)
				for range n {
					id++
					leader.Propose(id, records)
				}
				c.run(b)
				done += n
			}
			elapsed := time.Since(start)
			b.StopTimer()
			if c.acked != b.N || c.failed != 0 {
				b.Fatalf("acked %d failed %d of %d", c.acked, c.failed, b.N)
			}
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "proposals/s")
		})
	}
}

// BenchmarkStatus is the leader's Status of 3 voters with nothing changed
// since the last one (what the shell asks at every round).
func BenchmarkStatus(b *testing.B) {
	c := newBenchCluster(b, []string{"n1", "n2", "n3"})
	r := c.nodes["n1"].r
	if st := r.Status(); len(st.RemoteLEO) != 2 {
		b.Fatalf("leader's remote LEOs %v, want both followers", st.RemoteLEO)
	}
	b.ReportAllocs()
	for range b.N {
		_ = r.Status()
	}
}
