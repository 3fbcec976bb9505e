package simulation

import (
	"fmt"
	"math/rand"
	"strings"

	"github.com/replog-io/replog/internal/shell"
	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/replica"
)

// The workload: appends and reads on random live nodes.

// propose appends 1..maxRecords unique records on a random live node.
func (s *sim) propose() {
	nd := s.randomUp()
	if nd == nil {
		return
	}
	if nd.inflight >= s.p.maxInflight {
		// Clients wait for their appends: a bounded number in flight per
		// node, so a slow follower cannot fall unboundedly behind.
		return
	}
	nd.inflight++
	p := &proposal{id: uint64(len(s.proposals) + 1), node: nd.idx, inc: nd.inc, committedAt: -1}
	s.proposals = append(s.proposals, p)
	k := 1 + s.rng.Intn(s.p.maxRecords)
	recs := make([][]byte, k)
	tooLarge := s.rng.Intn(100) == 0
	for i := range recs {
		d := fmt.Sprintf("p%d.%d", p.id, i)
		if s.rng.Intn(4) == 0 {
			// Records of varied sizes, up to the limit: fetch responses
			// end at every kind of byte boundary.
			d += "-" + strings.Repeat("y", s.rng.Intn(maxRecordSize-len(d)))
		}
		if tooLarge && i == k-1 {
			d += strings.Repeat("x", maxRecordSize)
			p.tooLarge = true
		}
		p.records = append(p.records, d)
		s.payloadOf[d] = payloadRef{prop: p, i: i}
		recs[i] = []byte(d)
	}
	s.hash.byte(0xC0)
	s.hash.u64(p.id)
	s.hash.u64(uint64(k))
	s.tracef("%s propose id=%d records=%d", nd.id, p.id, k)
	if s.faulting() && nd.role == replica.RoleLeader && s.rng.Float64() < s.p.crashAfterAppendProb {
		s.schedule(s.between(0, s.p.diskMax+s.p.netMax), event{kind: evCrash, node: nd.idx, inc: nd.inc})
	}
	if ev, ok := s.keyedProposal(nd, p, recs); ok {
		s.input(nd, ev)
		return
	}
	s.input(nd, s.proposeEvent(nd, p, recs))
}

// read reads from a random live node's store as a reader of the real Log
// does: through shell.ReadBatch (the code Log.Read uses), below the
// ReadableHW the node's shell last published. It must see exactly the
// committed data entries there, in order.
func (s *sim) read() {
	nd := s.randomUp()
	if nd == nil {
		return
	}
	// The leader's HW may run ahead of its own disk (a majority of the
	// other voters has the entries durably): a reader waits for the disk,
	// so it reads below ReadableHW = min(HW, durable LEO), which every
	// round's Output is checked to publish (checkOutput).
	hw := nd.r.HighWatermark()
	st := nd.r.Status()
	limit := nd.published
	if limit != nd.r.ReadableHW() {
		s.fail("%s: readers were last woken with ReadableHW %d, but the core's is %d between rounds", nd.id, limit, nd.r.ReadableHW())
		return
	}
	if hw > st.DurableLEO {
		s.res.ReadsAboveDisk++
		s.tracef("%s read: HW %d is above the durable LEO %d (role %s)", nd.id, hw, st.DurableLEO, st.Role)
	}
	start := nd.store.LogStart()
	if s.p.ret.on && start > 0 && limit > 0 && s.rr.Intn(4) == 0 {
		// A reader below the log start (retention.go).
		s.readBelowStart(nd, start, limit)
		return
	}
	if limit <= start {
		return
	}
	s.res.Reads++
	from := start + uint64(s.rng.Int63n(int64(limit-start)))
	n := 1 + s.rng.Intn(8)
	if uint64(n) > limit-from {
		n = int(limit - from)
	}
	b, err := shell.ReadBatch(nd.store, from, limit, n, 1<<20)
	s.hash.byte(0xC1)
	s.hash.u64(from)
	s.hash.u64(b.Next)
	s.hash.entries(b.Entries)
	if err != nil || b.Next != from+uint64(n) {
		s.fail("%s: reader at [%d, %d) below HW %d and durable LEO %d passed up to %d, err %v (store LEO %d): committed entries not readable",
			nd.id, from, from+uint64(n), hw, st.DurableLEO, b.Next, err, nd.store.LEO())
		return
	}
	if b.Next > uint64(len(s.committed)) {
		s.fail("%s: reader passed offset %d below HW %d, beyond the committed log %d", nd.id, b.Next-1, hw, len(s.committed))
		return
	}
	// Exactly the committed data entries of [from, Next), in order, but
	// those a compaction pass removed here (R103, R104).
	i := 0
	for o := from; o < b.Next; o++ {
		k := s.committed[o]
		if k.typ != protocol.EntryData {
			continue
		}
		if i >= len(b.Entries) || b.Entries[i].Offset != o {
			if e, ok := nd.storeEntry(o); ok && e.Type == protocol.EntryHole && s.holeStandsFor(o, e.Epoch, k) {
				s.res.Faults.HolesRead++
				continue
			}
			s.fail("%s: reader at [%d, %d) missed committed offset %d (%v)", nd.id, from, b.Next, o, k)
			return
		}
		i++
	}
	for _, e := range b.Entries[min(i, len(b.Entries)):] {
		s.fail("%s: reader got offset %d, which is not a committed data entry of [%d, %d)", nd.id, e.Offset, from, b.Next)
		return
	}
	for j, e := range b.Entries {
		if e.Offset >= hw {
			s.fail("%s: reader got offset %d at or above HW %d", nd.id, e.Offset, hw)
			return
		}
		if k := readKey(&b, j); k != s.committed[e.Offset] {
			s.fail("%s: reader got %v at offset %d, the committed entry is %v", nd.id, k, e.Offset, s.committed[e.Offset])
			return
		}
	}
}

func (s *sim) randomUp() *node { return s.randomUpFrom(s.rng) }

// randomUpFrom is a node up and not paused, drawn with r (nil if none).
func (s *sim) randomUpFrom(r *rand.Rand) *node {
	var up []*node
	for _, nd := range s.nodes {
		if nd.up && s.now >= nd.pausedUntil {
			up = append(up, nd)
		}
	}
	if len(up) == 0 {
		return nil
	}
	return up[r.Intn(len(up))]
}
