package replica

import (
	"bytes"
	"flag"
	"fmt"
	"math/rand"
	"slices"
	"testing"
	"time"

	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/storage"
)

// A small randomized check of the core inside its own package (the full
// deterministic simulation lives in package simulation): random delivery
// order, drops, duplicates, partial persistence, crashes losing unpersisted
// writes, partitions. After every step: no replica reports a violation,
// committed entries agree across replicas, acknowledged proposals are
// committed at their offsets, a replica's HW never moves back. At the end,
// with faults healed, the cluster converges and makes progress.

var randomSeeds = flag.Int("replica.seeds", 12, "seeds for TestRandomized")

type rnode struct {
	id      string
	cfg     Config
	store   *storage.Memory
	r       *Replica
	pending []protocol.Write
	up      bool
	lastHW  uint64
	checked uint64
	gen     int64
}

type rcluster struct {
	t         *testing.T
	rng       *rand.Rand
	nodes     []*rnode
	byID      map[string]*rnode
	now       time.Time
	queue     []protocol.Message
	cut       map[[2]string]bool
	committed map[uint64]protocol.Entry
	acked     map[uint64]uint64 // proposal ID → offset
	data      map[uint64][]byte
	nextID    uint64
	lastAck   int
	log       []string
}

func (c *rcluster) tracef(format string, args ...any) {
	c.log = append(c.log, fmt.Sprintf("%v ", c.now.Sub(t0))+fmt.Sprintf(format, args...))
	if len(c.log) > 60 {
		c.log = c.log[1:]
	}
}

func (c *rcluster) fail(format string, args ...any) {
	c.t.Helper()
	for _, l := range c.log {
		c.t.Log(l)
	}
	c.t.Fatalf(format, args...)
}

func (c *rcluster) start(n *rnode) {
	cfg := n.cfg
	cfg.Rand = rand.New(rand.NewSource(c.rng.Int63()))
	r, err := New(cfg, n.store, c.now)
	if err != nil {
		c.t.Fatal(err)
	}
	n.r, n.up, n.pending, n.checked = r, true, nil, 0
	n.lastHW = r.hw
	n.gen++
}

func (c *rcluster) ready(n *rnode) {
	if !n.up {
		return
	}
	rd := n.r.Ready()
	n.pending = append(n.pending, rd.Writes...)
	for _, m := range rd.Messages {
		if !c.cut[[2]string{m.From, m.To}] {
			c.queue = append(c.queue, m)
		}
	}
	for _, a := range rd.Acks {
		if a.Err == nil {
			if _, dup := c.acked[a.ID]; dup {
				c.fail("proposal %d acked twice", a.ID)
			}
			c.acked[a.ID] = a.FirstOffset
			c.tracef("%s ack %d at %d", n.id, a.ID, a.FirstOffset)
		}
		c.lastAck = len(c.acked)
	}
}

func (c *rcluster) persist(n *rnode, k int) {
	if !n.up || len(n.pending) == 0 {
		return
	}
	k = min(k, len(n.pending))
	applyWrites(c.t, n.store, n.pending[:k])
	seq := n.pending[k-1].Seq
	n.pending = n.pending[k:]
	n.r.Persisted(seq)
	c.ready(n)
}

func (c *rcluster) check() {
	for _, n := range c.nodes {
		if !n.up {
			continue
		}
		s := n.r.Status()
		if s.Violations > 0 {
			c.fail("%s: %d violations", n.id, s.Violations)
		}
		if s.HighWatermark < n.lastHW {
			c.fail("%s: HW moved back from %d to %d", n.id, n.lastHW, s.HighWatermark)
		}
		n.lastHW = s.HighWatermark
		if s.HighWatermark > s.LEO {
			c.fail("%s: HW %d above LEO %d", n.id, s.HighWatermark, s.LEO)
		}
		if n.checked < s.HighWatermark {
			es, err := n.r.log.read(n.checked, 1<<30)
			if err != nil {
				c.fail("%s: read: %v", n.id, err)
			}
			for _, e := range es {
				if e.Offset >= s.HighWatermark {
					break
				}
				if prev, ok := c.committed[e.Offset]; ok {
					if prev.Epoch != e.Epoch || !bytes.Equal(prev.Data, e.Data) || prev.Type != e.Type {
						c.fail("%s: committed offset %d is %d/%q here, %d/%q elsewhere", n.id, e.Offset, e.Epoch, e.Data, prev.Epoch, prev.Data)
					}
				} else {
					c.committed[e.Offset] = e
				}
			}
			n.checked = s.HighWatermark
		}
	}
	for id, off := range c.acked {
		e, ok := c.committed[off]
		if !ok {
			// The acking leader crashed in the same step; checked at the end.
			continue
		}
		if !bytes.Equal(e.Data, c.data[id]) {
			c.fail("proposal %d acked at %d holds %q, want %q", id, off, e.Data, c.data[id])
		}
	}
}

func (c *rcluster) step(faults, propose bool) {
	rng := c.rng
	c.now = c.now.Add(10 * time.Millisecond)
	for _, n := range c.nodes {
		if n.up {
			n.r.Tick(c.now)
			c.ready(n)
		}
	}
	// Proposals.
	if propose && rng.Intn(3) == 0 {
		n := c.nodes[rng.Intn(len(c.nodes))]
		if n.up {
			c.nextID++
			d := fmt.Appendf(nil, "p%d", c.nextID)
			c.data[c.nextID] = d
			n.r.Propose(c.nextID, [][]byte{d})
			c.ready(n)
		}
	}
	// Deliveries, out of order, with drops and duplicates.
	for range rng.Intn(2 * len(c.nodes) * 3) {
		if len(c.queue) == 0 {
			break
		}
		i := 0
		if faults && rng.Intn(4) == 0 {
			i = rng.Intn(len(c.queue))
		}
		m := c.queue[i]
		if faults && rng.Intn(20) == 0 {
			// duplicate: leave it queued
		} else {
			c.queue = slices.Delete(c.queue, i, i+1)
		}
		if faults && rng.Intn(20) == 0 {
			continue // dropped
		}
		n := c.byID[m.To]
		if !n.up || c.cut[[2]string{m.From, m.To}] {
			continue
		}
		n.r.Step(m)
		c.ready(n)
	}
	// Persistence, partial.
	for _, n := range c.nodes {
		if len(n.pending) > 0 && rng.Intn(2) == 0 {
			c.persist(n, 1+rng.Intn(len(n.pending)))
		}
	}
	c.check()
	if faults {
		switch rng.Intn(400) {
		case 0, 1: // crash
			n := c.nodes[rng.Intn(len(c.nodes))]
			if n.up {
				c.tracef("crash %s (losing %d writes)", n.id, len(n.pending))
				n.up, n.pending = false, nil
			}
		case 2, 3, 4: // restart
			for _, n := range c.nodes {
				if !n.up {
					c.tracef("restart %s", n.id)
					c.start(n)
					c.ready(n)
					break
				}
			}
		case 5: // partition one node away
			n := c.nodes[rng.Intn(len(c.nodes))]
			c.tracef("partition %s", n.id)
			for _, o := range c.nodes {
				if o != n {
					c.cut[[2]string{n.id, o.id}] = true
					c.cut[[2]string{o.id, n.id}] = true
				}
			}
		case 6, 7:
			c.tracef("heal")
			clear(c.cut)
		}
	}
	c.check()
}

// converged reports whether every replica is up, persisted, and at the
// same LEO and HW.
func (c *rcluster) converged() bool {
	s0 := c.nodes[0].r.Status()
	for _, n := range c.nodes {
		s := n.r.Status()
		if !n.up || len(n.pending) > 0 || s.LEO != s0.LEO || s.HighWatermark != s.LEO {
			return false
		}
	}
	return true
}

func runRandomized(t *testing.T, seed int64, voters []string, observers []string, steps int) {
	c := &rcluster{
		t: t, rng: rand.New(rand.NewSource(seed)), byID: map[string]*rnode{}, now: t0,
		cut: map[[2]string]bool{}, committed: map[uint64]protocol.Entry{},
		acked: map[uint64]uint64{}, data: map[uint64][]byte{},
	}
	for _, id := range append(slices.Clone(voters), observers...) {
		n := &rnode{id: id, store: storage.NewMemory(), cfg: Config{
			ID: id, Voters: voters, FetchTimeout: 600 * time.Millisecond,
			ElectionTimeout: 200 * time.Millisecond, FetchMaxWait: 100 * time.Millisecond, FetchMaxBytes: 160,
		}}
		c.nodes = append(c.nodes, n)
		c.byID[id] = n
		c.start(n)
	}
	for range steps {
		c.step(true, true)
	}
	// Calm: heal, restart, no faults; the cluster must converge and commit.
	clear(c.cut)
	for _, n := range c.nodes {
		if !n.up {
			c.start(n)
		}
		c.ready(n)
	}
	before := len(c.acked)
	for range 1500 {
		c.step(false, true)
	}
	// Quiesce: no new proposals; everything in flight lands.
	for i := 0; i < 3000 && (i < 100 || !c.converged()); i++ {
		c.step(false, false)
	}
	if len(c.acked) <= before {
		c.fail("seed %d: no progress after healing (%d acks)", seed, len(c.acked))
	}
	var leo, hw []uint64
	for _, n := range c.nodes {
		for range 10 {
			c.persist(n, len(n.pending))
		}
		s := n.r.Status()
		leo, hw = append(leo, s.LEO), append(hw, s.HighWatermark)
	}
	for id, off := range c.acked {
		if _, ok := c.committed[off]; !ok {
			c.fail("proposal %d acked at %d but never committed", id, off)
		}
	}
	if !slices.Equal(hw, leo) || slices.Min(leo) != slices.Max(leo) {
		c.fail("not converged: LEOs %v HWs %v", leo, hw)
	}
	t.Logf("seed %d: %d proposals, %d acked, committed %d, LEOs %v", seed, c.nextID, len(c.acked), len(c.committed), leo)
}

func TestRandomized(t *testing.T) {
	for seed := range int64(*randomSeeds) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			if seed%2 == 0 {
				runRandomized(t, seed, []string{"a", "b", "c"}, []string{"o"}, 2500)
			} else {
				runRandomized(t, seed, []string{"a", "b", "c", "d", "e"}, nil, 2500)
			}
		})
	}
}
