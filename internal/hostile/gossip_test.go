package hostile

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/replog-io/replog/membership"
	"github.com/replog-io/replog/protocol"
)

// gossipMeta is replog's memberlist node metadata, encoded here from the
// layout documented in membership/meta.go (the encoder is unexported):
// version byte 1, flags byte (bit 0 voter), uvarint epoch, then node ID,
// cluster ID, RPC address and leader ID, each a uvarint length and bytes.
type gossipMeta struct {
	NodeID, ClusterID, RPCAddr, LeaderID string
	Voter                                bool
	Epoch                                uint64
}

func (m gossipMeta) encode() []byte {
	b := []byte{1, 0}
	if m.Voter {
		b[1] = 1
	}
	b = binary.AppendUvarint(b, m.Epoch)
	for _, s := range []string{m.NodeID, m.ClusterID, m.RPCAddr, m.LeaderID} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	return b
}

func decodeGossipMeta(b []byte) (gossipMeta, bool) {
	var m gossipMeta
	if len(b) < 2 || b[0] != 1 {
		return m, false
	}
	m.Voter = b[1]&1 != 0
	rest := b[2:]
	e, n := binary.Uvarint(rest)
	if n <= 0 {
		return m, false
	}
	m.Epoch, rest = e, rest[n:]
	for _, dst := range []*string{&m.NodeID, &m.ClusterID, &m.RPCAddr, &m.LeaderID} {
		l, n := binary.Uvarint(rest)
		if n <= 0 || l > uint64(len(rest)-n) {
			return m, false
		}
		rest = rest[n:]
		*dst, rest = string(rest[:l]), rest[l:]
	}
	return m, true
}

// gossipAttacker is a memberlist member that advertises forged metadata
// and records what the others advertise.
type gossipAttacker struct {
	list *memberlist.Memberlist
	meta []byte

	mu    sync.Mutex
	addrs map[string]string // RPC addresses advertised, by node ID
}

// NotifyJoin, NotifyUpdate and NotifyLeave make it a memberlist
// EventDelegate: memberlist calls them with its lock held, the only safe
// moment to read a member's metadata.
func (g *gossipAttacker) NotifyJoin(n *memberlist.Node)   { g.observe(n) }
func (g *gossipAttacker) NotifyUpdate(n *memberlist.Node) { g.observe(n) }
func (g *gossipAttacker) NotifyLeave(n *memberlist.Node)  {}

func (g *gossipAttacker) observe(n *memberlist.Node) {
	if m, ok := decodeGossipMeta(n.Meta); ok && m.RPCAddr != "" {
		g.mu.Lock()
		g.addrs[m.NodeID] = m.RPCAddr
		g.mu.Unlock()
	}
}

func (g *gossipAttacker) NodeMeta(limit int) []byte                  { return g.meta }
func (g *gossipAttacker) NotifyMsg([]byte)                           {}
func (g *gossipAttacker) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (g *gossipAttacker) LocalState(join bool) []byte                { return nil }
func (g *gossipAttacker) MergeRemoteState(buf []byte, join bool)     {}

// startGossipAttacker starts a member named meta.NodeID with the cluster
// ID as its label (what replog uses by default) and no key, and tries to
// join seeds. It returns how many seeds it joined.
func startGossipAttacker(t *testing.T, meta gossipMeta, seeds []string) (*gossipAttacker, int) {
	t.Helper()
	g := &gossipAttacker{meta: meta.encode(), addrs: map[string]string{}}
	tu := membership.FastForTests()
	mc := memberlist.DefaultLANConfig()
	mc.Name = meta.NodeID
	mc.BindAddr = "127.0.0.1"
	mc.BindPort = 0
	mc.Label = meta.ClusterID
	mc.Delegate = g
	mc.Events = g
	mc.LogOutput = io.Discard
	mc.ProbeInterval, mc.ProbeTimeout, mc.GossipInterval = tu.ProbeInterval, tu.ProbeTimeout, tu.GossipInterval
	mc.SuspicionMult, mc.PushPullInterval, mc.TCPTimeout = tu.SuspicionMult, tu.PushPullInterval, tu.TCPTimeout
	mc.GossipToTheDeadTime, mc.DeadNodeReclaimTime = tu.GossipToTheDeadTime, tu.DeadNodeReclaimTime
	list, err := memberlist.Create(mc)
	if err != nil {
		t.Fatalf("gossip attacker: %v", err)
	}
	g.list = list
	t.Cleanup(func() { _ = list.Shutdown() })
	n, _ := list.Join(seeds)
	return g, n
}

// rpcAddrs returns the RPC addresses the other members advertise, by node
// ID.
func (g *gossipAttacker) rpcAddrs() map[string]string {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := map[string]string{}
	for id, a := range g.addrs {
		if id != "x" {
			out[id] = a
		}
	}
	return out
}

const forgedEpoch = 1000

var debugAttacks = os.Getenv("HOSTILE_DEBUG") != ""

// forgedLeader answers fetches as the leader of forgedEpoch: it fences
// fetches of lower epochs (naming itself), then either serves forged
// entries with a matching high watermark or tells the follower its log
// diverges at (epoch 0, offset 0).
type forgedLeader struct {
	diverge bool
	addrs   func() map[string]string

	mu      sync.Mutex
	fetches map[string]int    // fetches in forgedEpoch, by follower
	end     map[string]uint64 // end of the forged entries, by follower
	sent    int               // forged entries or diverging answers sent
}

func (fl *forgedLeader) handle(f *fakeNode, m protocol.Message) {
	req, ok := m.Body.(*protocol.FetchRequest)
	if !ok {
		return
	}
	if debugAttacks {
		fmt.Printf("x <- %s %s\n", m.From, req)
	}
	// The first fetches may come while the attacker's join is still
	// returning: wait a little for the member table.
	addr, ok := fl.addrs()[m.From]
	for i := 0; !ok && i < 100; i++ {
		time.Sleep(20 * time.Millisecond)
		addr, ok = fl.addrs()[m.From]
	}
	if !ok {
		return
	}
	resp := &protocol.FetchResponse{FetchID: req.FetchID, LeaderID: f.id, Epoch: forgedEpoch}
	fl.mu.Lock()
	switch {
	case req.CurrentEpoch < forgedEpoch:
		resp.Error = protocol.FetchFencedEpoch
	case fl.diverge:
		fl.fetches[m.From]++
		fl.sent++
		resp.Error = protocol.FetchDivergingEpoch
		resp.DivergingEpoch, resp.DivergingEndOffset = 0, 0
	default:
		fl.fetches[m.From]++
		end, ok := fl.end[m.From]
		if !ok {
			end = req.FetchOffset + 30
			fl.end[m.From] = end
		}
		for o := req.FetchOffset; o < end; o++ {
			resp.Entries = append(resp.Entries, replogEntry(o, forgedEpoch, fmt.Sprintf("FORGED-%d", o)))
			fl.sent++
		}
		resp.HighWatermark = end
	}
	fl.mu.Unlock()
	if err := f.send(m.From, addr, resp); err != nil && debugAttacks {
		fmt.Printf("x -> %s: %v\n", m.From, err)
	}
}

func (fl *forgedLeader) landed() (followers, sent int) {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	return len(fl.fetches), fl.sent
}

// TestForgedGossipLeader is finding 1: a non-voter x joins gossip (label =
// cluster ID, no key) and advertises itself as the leader of epoch 1000,
// with an RPC address it listens on and a voter flag it has no right to,
// then answers fetches with forged entries and a matching high watermark,
// or with a diverging epoch at (0, 0). No voter may follow it: readers
// never see a forged entry, nothing committed is truncated, no voter
// adopts the forged epoch, and the cluster keeps committing. Insecure, the
// protocol must hold on its own (positive control: the attacker is a
// gossip member that sees every voter); with a secret the attacker cannot
// even join gossip.
func TestForgedGossipLeader(t *testing.T) {
	for _, tc := range []struct {
		sec     security
		diverge bool
	}{
		{insecureMode, false},
		{insecureMode, true},
		{secretMode, true},
	} {
		name := fmt.Sprintf("%s/forged-entries", tc.sec)
		if tc.diverge {
			name = fmt.Sprintf("%s/diverging-epoch", tc.sec)
		}
		t.Run(name, func(t *testing.T) {
			// Safe in parallel: what is asserted does not depend on
			// timing (a spurious election on a loaded machine changes
			// nothing here).
			t.Parallel()
			forgedGossipLeader(t, tc.sec, tc.diverge)
		})
	}
}

func forgedGossipLeader(t *testing.T, sec security, diverge bool) {
	c := newCluster(t, 3, sec, nil)
	lead, _ := c.leader()
	c.appendN(lead, "committed", 30)
	want := readAll(t, c.nodes[lead], lead)
	for _, id := range c.ids() {
		c.checkPrefix(id, want)
	}
	stopReaders := c.watchReaders("FORGED")

	var attacker atomic.Pointer[gossipAttacker] // set once the join returns
	fl := &forgedLeader{diverge: diverge, fetches: map[string]int{}, end: map[string]uint64{},
		addrs: func() map[string]string {
			if g := attacker.Load(); g != nil {
				return g.rpcAddrs()
			}
			return nil
		}}
	x := newFakeNode(t, "x", clusterID, fl.handle)
	var seeds []string
	for _, id := range c.ids() {
		seeds = append(seeds, c.nodes[id].Status().GossipAddr)
	}
	g, joined := startGossipAttacker(t, gossipMeta{
		NodeID: "x", ClusterID: clusterID, RPCAddr: x.addr(), LeaderID: "x", Epoch: forgedEpoch,
		Voter: true, // a lie: only the configured voter list counts
	}, seeds)
	attacker.Store(g)
	if sec.secret == nil {
		// Positive control: without a secret the outsider is a member and
		// sees every voter's RPC address.
		if joined == 0 || len(g.rpcAddrs()) < 3 {
			t.Fatalf("gossip attacker joined %d seeds and sees %v: the attack never reached the cluster", joined, g.rpcAddrs())
		}
	} else if joined != 0 || len(g.rpcAddrs()) != 0 {
		t.Errorf("without the secret the gossip attacker joined %d seeds and learned %v", joined, g.rpcAddrs())
	}

	// Exposure: until every voter has fetched from x in the forged epoch
	// (the attack landed everywhere) or long enough for gossip to have
	// told every voter about x many times over.
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if n, _ := fl.landed(); n == 3 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	followers, sent := fl.landed()
	t.Logf("voters that fetched from x in epoch %d: %d; forged entries or diverging answers sent: %d", forgedEpoch, followers, sent)
	_ = g.list.Shutdown()
	x.close()

	if bad := stopReaders(); len(bad) > 0 {
		t.Errorf("readers saw forged entries as committed:\n%v", bad)
	}
	for _, id := range c.ids() {
		if e := c.nodes[id].Status().Epoch; e >= forgedEpoch {
			t.Errorf("%s adopted epoch %d from a gossip claim of a non-voter", id, e)
		}
	}
	for _, id := range c.ids() {
		c.checkPrefix(id, want)
	}
	c.keepsCommitting("forged-gossip-leader")
}

// replogEntry builds a data entry.
func replogEntry(off, epoch uint64, data string) protocol.Entry {
	return protocol.Entry{Offset: off, Epoch: epoch, Type: protocol.EntryData, Data: []byte(data)}
}
