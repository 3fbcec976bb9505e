package simulation

import (
	"fmt"
	"math/rand"
	"sort"
	"time"

	"github.com/replog-io/replog/internal/shell"
	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/replica"
	"github.com/replog-io/replog/storage"
)

// Entry keys and compacted logs in the simulation (docs/protocol.md
// 3.17, R102-R104; docs/architecture.md R105 for the KV, kvsim.go).
//
// Workload: in half the runs that are not classic, once the cluster is at
// feature level 10, some appends carry an entry key from a small key
// space (so that later ones supersede earlier ones), some are tombstones
// (a key and no data), some are KV operations (kvsim.go), the rest stay
// without a key. Now and then a random live node runs a compaction pass
// as the root's Log.compactOnce does: the log is cut into "segments" of
// a run's size, its point P is the end of one, at most min(HW, durable
// LEO, the newest key checkpoint's offset), the entry before it older than
// the run's lag by the node's clock; replica.ChooseCompaction (the root's
// choice) takes the segments the store's cleaner checkpoint shows clean
// and skips the pass when the dirty part is below the run's
// MinDirtyRatio; the pass reads the dirty part into
// replica.CompactionPlan (the one plan the root uses) and, a disk delay
// later, rewrites each dirty segment and each clean one the plan Rewrites
// through storage.Memory.Compact, the in-memory store's version of
// DirStore.CompactSegment, then saves the new cleaner checkpoint. A crash
// before the rewrite leaves the log as it was; each rewrite replaces its
// range at once, as the Dir's rename does; a pass cut short (at random,
// or refused a range) saves no checkpoint.
//
// Checks:
//   - A pass removes only committed keyed data entries (never a control
//     entry, never one without an entry key), and of those only one that
//     a later committed entry of its key below P supersedes, or a
//     tombstone past its retention: no key's newest value below P is ever
//     compacted away (R103).
//   - A placeholder (EntryHole) anywhere, in a store or a follower's
//     write, stands for an offset some pass removed, with that entry's
//     epoch: per offset a replica holds the committed entry or a hole,
//     never another entry (R104), so a follower catching up across holes
//     ends with the leader's view.
//   - A complete pass (one that saved its cleaner checkpoint) leaves
//     each key at most one entry below its point, what the next pass
//     counts on to skip the clean segments (checkClean).
//   - Readers from the start see every committed entry without a key, in
//     order at its offset, and every keyed one that no pass removed
//     (workload.go's read); after convergence every store holds the
//     committed log with holes only where passes removed entries
//     (finalCheck).

// compactParams are the compaction workload's knobs for one run.
type compactParams struct {
	on bool
	// passEvery: the mean gap between two passes (on random live nodes).
	passEvery time.Duration
	// lag: an entry younger than this (by the passing node's clock) is not
	// compacted, nor anything after it; tombstoneRetention: how long a
	// tombstone older than the lag is kept (negative: for ever).
	lag, tombstoneRetention time.Duration
	// keys: the raw key space ("r0".. ); keyedProb, tombProb, kvProb: the
	// shares of appends with a key, tombstones and KV operations.
	keys                        int
	keyedProb, tombProb, kvProb float64
	// conditional: the KV operations include Create and Update (then
	// tombstones are kept for ever: R105).
	conditional bool
	// segment: the offsets of one "segment" (the log is cut into
	// [k*segment, (k+1)*segment) for the passes' choice of what is clean,
	// as the Dir's sealed segments); minRatio: the passes'
	// Compaction.MinDirtyRatio (0 or below: every pass runs).
	segment  uint64
	minRatio float64
}

// compactSim is the run's compaction state.
type compactSim struct {
	p   compactParams
	rng *rand.Rand
	// removed: the offsets some pass removed (each checked when it was).
	removed map[uint64]bool
	// byKey: the committed offsets of each entry key, in order, indexed up
	// to indexed.
	byKey   map[string][]uint64
	indexed int
}

// compactPass is a pass read but not yet rewritten.
type compactPass struct {
	inc    int
	segs   []replica.CompactionSegment
	choice replica.CompactionChoice
	plan   *replica.CompactionPlan
	// cut: the pass stops before its segment cut (a pass cut short by a
	// close: it saves no cleaner checkpoint); -1: it runs to its end.
	cut int
}

// The kinds of evCompact (event.id).
const (
	kcTimer = iota // the workload: a pass on a random live node
	kcSwap         // a node's pass rewrites its range
)

// chooseCompaction draws the compaction workload's knobs from its own
// stream: on in half the runs that are not classic, nor exactly-once
// (whose keyed workload is its own).
func chooseCompaction(s *sim) {
	r := s.kc.rng
	s.kc.removed = map[uint64]bool{}
	s.kc.byKey = map[string][]uint64{}
	if s.opts.Classic || s.opts.NoCompaction || s.opts.ExactlyOnce || r.Intn(2) == 0 {
		return
	}
	p := &s.kc.p
	p.on = true
	p.passEvery = ms(5 + 60*r.Float64())
	p.lag = ms(100 * r.Float64())
	p.keys = 1 + r.Intn(6)
	p.keyedProb = 0.2 + 0.4*r.Float64()
	p.tombProb = 0.1 * r.Float64()
	p.kvProb = 0.4 * r.Float64()
	p.conditional = r.Intn(3) != 0
	p.tombstoneRetention = ms(200 * r.Float64())
	if p.conditional || r.Intn(3) == 0 {
		p.tombstoneRetention = -1
	}
	p.segment = uint64(2 + r.Intn(20))
	p.minRatio = []float64{-1, 0, 0.3, 0.5}[r.Intn(4)]
}

// setupCompaction starts the pass timer.
func (s *sim) setupCompaction() {
	if s.kc.p.on {
		s.schedule(s.kcBetween(0, 2*s.kc.p.passEvery), event{kind: evCompact, id: kcTimer})
	}
}

func (s *sim) kcBetween(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(s.kc.rng.Int63n(int64(hi-lo)+1))
}

// keyedProposal turns the workload's proposal p on nd into one with an
// entry key, a tombstone or a KV operation, at random in compaction runs
// at level 10; it returns the event to propose, or false to propose p as
// it is.
func (s *sim) keyedProposal(nd *node, p *proposal, recs [][]byte) (shell.Event, bool) {
	if !s.kc.p.on || p.tooLarge || nd.r.Status().FeatureLevel < protocol.FeatureLevelKeys {
		return shell.Event{}, false
	}
	r := s.kc.rng
	x := r.Float64()
	switch {
	case x < s.kc.p.kvProb:
		return s.kvProposal(nd, p)
	case x < s.kc.p.kvProb+s.kc.p.tombProb:
		p.entryKey = fmt.Sprintf("r%d", r.Intn(s.kc.p.keys))
		return s.keyedEvent(p, [][]byte{{}}), true
	case x < s.kc.p.kvProb+s.kc.p.tombProb+s.kc.p.keyedProb:
		p.entryKey = fmt.Sprintf("r%d", r.Intn(s.kc.p.keys))
		// Short records: the key's header is taken off the record size
		// limit (R102).
		short := make([][]byte, len(recs))
		for i := range recs {
			short[i] = fmt.Appendf(nil, "p%d.%d", p.id, i)
		}
		return s.keyedEvent(p, short), true
	}
	return shell.Event{}, false
}

// keyedEvent gives p the records recs and returns its proposal event,
// with p's entry key if it has one.
func (s *sim) keyedEvent(p *proposal, recs [][]byte) shell.Event {
	s.setRecords(p, recs)
	s.tracef("keyed proposal id=%d key=%q records=%d", p.id, p.entryKey, len(recs))
	if p.entryKey == "" {
		return shell.Propose(p.id, recs)
	}
	return shell.ProposeKeyed(p.id, protocol.Key{EntryKey: p.entryKey}, recs)
}

// setRecords replaces p's records with recs (registered as its payloads).
func (s *sim) setRecords(p *proposal, recs [][]byte) {
	p.records = p.records[:0]
	for i, r := range recs {
		p.records = append(p.records, string(r))
		if len(r) > 0 {
			s.payloadOf[string(r)] = payloadRef{prop: p, i: i}
		}
	}
}

// tombstone reports whether p is a tombstone's proposal.
func (p *proposal) tombstone() bool {
	return p.entryKey != "" && len(p.records) == 1 && p.records[0] == ""
}

// tombstone reports whether k is a tombstone: an entry key and no data.
func (k entryKey) tombstone() bool { return k.key != "" && k.data == "" && k.typ == protocol.EntryData }

// compactEvent handles evCompact.
func (s *sim) compactEvent(ev event) {
	if ev.id == kcTimer {
		// Passes go on while the cluster converges, so that followers
		// catch up across holes then too.
		if s.phase >= phaseStable {
			return
		}
		if nd := s.randomUpFrom(s.kc.rng); nd != nil {
			s.startPass(nd)
		}
		s.schedule(s.kcBetween(0, 2*s.kc.p.passEvery), event{kind: evCompact, id: kcTimer})
		return
	}
	nd := s.nodes[ev.node]
	if !nd.up || nd.kc == nil || nd.kc.inc != nd.inc || ev.inc != nd.inc {
		return // crashed before the rewrite: the range is as it was
	}
	s.finishPass(nd)
}

// startPass reads nd's log up to its pass's point into the plan, as
// Log.compactOnce does, and schedules the rewrite.
func (s *sim) startPass(nd *node) {
	if nd.kc != nil && nd.kc.inc == nd.inc {
		return // one pass at a time
	}
	st := nd.r.Status()
	if st.FeatureLevel < protocol.FeatureLevelKeys {
		return
	}
	limit := nd.r.ReadableHW()
	if cp, ok, err := nd.store.KeyCheckpoint(); err == nil && ok {
		// R104: the key table's replay after a restart reads only whole
		// entries.
		limit = min(limit, cp.Offset)
	}
	ls := nd.store.LogStart()
	if limit <= ls {
		return
	}
	r := s.kc.rng
	// The point: the end of a segment, as the Dir's is the end of its
	// last sealed segment below the limit.
	point := ls + 1 + uint64(r.Int63n(int64(limit-ls)))
	point -= point % s.kc.p.segment
	if point <= ls {
		return
	}
	last, ok := nd.storeEntry(point - 1)
	now := nd.clock(s.now)
	youngest := now.Add(-s.kc.p.lag).UnixMilli()
	if !ok || last.Time > youngest {
		return // the entry before the point is younger than the lag
	}
	var tombBefore int64 // 0: no tombstone goes
	if s.kc.p.tombstoneRetention >= 0 {
		tombBefore = now.Add(-s.kc.p.lag - s.kc.p.tombstoneRetention).UnixMilli()
	}
	es, err := nd.store.Entries(ls, int(point-ls), 1<<30)
	if err != nil || len(es) != int(point-ls) {
		s.fail("%s: a compaction pass reads [%d, %d): %d entries, %v", nd.id, ls, point, len(es), err)
		return
	}
	var segs []replica.CompactionSegment
	for b := ls - ls%s.kc.p.segment; b < point; b += s.kc.p.segment {
		sg := replica.CompactionSegment{Base: b, End: b + s.kc.p.segment}
		for _, e := range es[max(b, ls)-ls : sg.End-ls] {
			sg.Bytes += int64(len(e.Data) + protocol.EntryOverhead)
		}
		segs = append(segs, sg)
	}
	var ck *protocol.CleanerCheckpoint
	if got, have, err := nd.store.(storage.CleanerCheckpointStore).CleanerCheckpoint(); err != nil {
		s.fail("%s: the cleaner checkpoint: %v", nd.id, err)
		return
	} else if have {
		ck = &got
	}
	// The root's choice (Log.compactOnce): what is clean, and whether the
	// dirty part is worth a pass.
	choice := replica.ChooseCompaction(segs, ck, nd.store.LEO(), s.kc.p.minRatio)
	s.hash.byte(0xE0)
	s.hash.u64(uint64(nd.idx))
	s.hash.u64(choice.Dirty)
	s.hash.u64(point)
	s.hash.bool(choice.Run)
	if !choice.Run {
		s.tracef("%s compaction pass below %d skipped: dirty from %d, %d of %d bytes", nd.id, point, choice.Dirty, choice.DirtyBytes, choice.CleanBytes+choice.DirtyBytes)
		return
	}
	plan := replica.NewCompactionPlan(point, tombBefore)
	plan.Clean = choice.Dirty
	for _, e := range es[max(choice.Dirty, ls)-ls:] {
		plan.Observe(e)
	}
	cut := -1
	if r.Intn(8) == 0 {
		cut = r.Intn(len(segs))
	}
	nd.kc = &compactPass{inc: nd.inc, segs: segs, choice: choice, plan: plan, cut: cut}
	s.tracef("%s compaction pass below point %d: dirty from %d (%d clean segments), tombstones before %d, cut %d", nd.id, point, choice.Dirty, len(choice.Clean), tombBefore, cut)
	s.schedule(s.between(0, 4*s.p.diskMax), event{kind: evCompact, id: kcSwap, node: nd.idx, inc: nd.inc})
}

// finishPass rewrites nd's pass's segments as the root's pass does (every
// dirty one, and each clean one its plan Rewrites), checks what it
// removed, and saves the cleaner checkpoint if it got to the end.
func (s *sim) finishPass(nd *node) {
	pass := nd.kc
	nd.kc = nil
	m, ok := nd.store.(memoryStore)
	if !ok {
		return
	}
	plan := pass.plan
	next := protocol.CleanerCheckpoint{Point: plan.Point}
	for i, sg := range pass.segs {
		if i == pass.cut {
			s.tracef("%s compaction pass cut before segment [%d, %d)", nd.id, sg.Base, sg.End)
			return
		}
		if i < len(pass.choice.Clean) && !plan.Rewrites(pass.choice.Clean[i]) {
			next.Segments = append(next.Segments, pass.choice.Clean[i])
			continue
		}
		from := max(sg.Base, m.LogStart())
		sum := replica.NewSegmentSummarizer(sg.Base, sg.End)
		drop := plan.DropKeeping(sum)
		var removed []protocol.Entry
		res, err := m.Compact(from, sg.End, func(e protocol.Entry) bool {
			if drop(e) {
				removed = append(removed, e)
				return true
			}
			return false
		})
		if err != nil {
			s.fail("%s: compaction of [%d, %d): %v", nd.id, from, sg.End, err)
			return
		}
		s.hash.byte(0xE1)
		s.hash.u64(uint64(res.Removed))
		s.hash.bool(res.Swapped)
		s.tracef("%s compaction [%d, %d): removed %d kept %d swapped=%v refused=%v", nd.id, from, sg.End, res.Removed, res.Kept, res.Swapped, res.Refused)
		if res.Refused {
			return // not compacted (a retention, a reset, unsynced writes): no checkpoint
		}
		next.Segments = append(next.Segments, sum.Summary())
		if !res.Swapped {
			continue
		}
		s.res.Faults.CompactionPasses++
		s.res.Faults.CompactionRemoved += res.Removed
		for _, e := range removed {
			if !s.checkRemoved(nd, e, plan) {
				return
			}
			s.kc.removed[e.Offset] = true
		}
	}
	if err := m.SaveCleanerCheckpoint(next); err != nil {
		s.fail("%s: save the cleaner checkpoint: %v", nd.id, err)
		return
	}
	s.checkClean(nd, plan.Point)
}

// checkClean checks what a complete pass leaves below its point, what the
// next pass counts on to skip the clean segments: every entry key has at
// most one entry there (a tombstone going later leaves no older value of
// its key behind).
func (s *sim) checkClean(nd *node, point uint64) {
	ls := nd.store.LogStart()
	if point <= ls {
		return
	}
	es, err := nd.store.Entries(ls, int(point-ls), 1<<30)
	if err != nil || len(es) != int(point-ls) {
		s.fail("%s: read [%d, %d) after a compaction pass: %d entries, %v", nd.id, ls, point, len(es), err)
		return
	}
	at := map[string]uint64{}
	for _, e := range es {
		k, _ := protocol.EntryKeyOf(e)
		if k == "" {
			continue
		}
		if o, ok := at[k]; ok {
			s.fail("%s: after a complete compaction pass with point %d, key %q has entries at %d and %d below it (R103: a pass leaves each key at most one entry below its point, which the next pass counts on)", nd.id, point, k, o, e.Offset)
			return
		}
		at[k] = e.Offset
	}
}

// checkRemoved checks one entry a pass removed (R103): a committed keyed
// data entry that a later committed entry of its key below the point
// supersedes, or a tombstone past its retention.
func (s *sim) checkRemoved(nd *node, e protocol.Entry, plan *replica.CompactionPlan) bool {
	o := e.Offset
	if o >= uint64(len(s.committed)) {
		s.fail("%s: a compaction pass removed offset %d, beyond the committed log %d", nd.id, o, len(s.committed))
		return false
	}
	c := s.committed[o]
	if c.typ != protocol.EntryData || c.key == "" {
		s.fail("%s: a compaction pass removed offset %d, %v: not a data entry with an entry key (control entries and entries without a key are never removed, R103)", nd.id, o, c)
		return false
	}
	s.indexKeys()
	offs := s.kc.byKey[c.key]
	i := sort.Search(len(offs), func(i int) bool { return offs[i] > o })
	if i < len(offs) && offs[i] < plan.Point {
		return true // superseded below the point
	}
	if c.tombstone() && e.Time > 0 && e.Time <= plan.TombstoneBefore {
		return true // a tombstone past its retention
	}
	s.fail("%s: a compaction pass with point %d removed offset %d, the newest value of key %q below it (R103: a key's newest value is never compacted away)", nd.id, plan.Point, o, c.key)
	return false
}

// indexKeys brings the committed offsets of each entry key up to date.
func (s *sim) indexKeys() {
	for ; s.kc.indexed < len(s.committed); s.kc.indexed++ {
		if k := s.committed[s.kc.indexed]; k.key != "" {
			s.kc.byKey[k.key] = append(s.kc.byKey[k.key], uint64(s.kc.indexed))
		}
	}
}

// resolve is the logical entry e stands for in nd's log: e itself, or for
// a placeholder the committed entry a pass removed at its offset, with
// the same epoch (R104: a replica holds the committed entry or a hole).
// ok is false (and the run failed) for a placeholder that stands for
// nothing a pass removed.
func (s *sim) resolve(nd *node, e protocol.Entry) (entryKey, bool) {
	if e.Type != protocol.EntryHole {
		return keyOf(e), true
	}
	o := e.Offset
	if !s.kc.removed[o] || o >= uint64(len(s.committed)) || s.committed[o].epoch != e.Epoch {
		s.fail("%s: holds a placeholder at offset %d (epoch %d) that stands for no entry a compaction pass removed (R104)", nd.id, o, e.Epoch)
		return keyOf(e), false
	}
	return s.committed[o], true
}

// isHole reports whether nd's store holds a placeholder at o.
func (nd *node) isHole(o uint64) bool {
	e, ok := nd.storeEntry(o)
	return ok && e.Type == protocol.EntryHole
}

// storeEntry is the entry at o of nd's store, if it holds one.
func (nd *node) storeEntry(o uint64) (protocol.Entry, bool) {
	if o < nd.store.LogStart() || o >= nd.store.LEO() {
		return protocol.Entry{}, false
	}
	es, err := nd.store.Entries(o, 1, 0)
	if err != nil || len(es) != 1 {
		return protocol.Entry{}, false
	}
	return es[0], true
}

// holeStandsFor reports whether a placeholder of epoch epoch at o stands
// for the committed entry k (a pass removed it).
func (s *sim) holeStandsFor(o uint64, epoch uint64, k entryKey) bool {
	return s.kc.removed[o] && o < uint64(len(s.committed)) && s.committed[o] == k && k.epoch == epoch
}
