package replica

import (
	"slices"

	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/replica/internal/bugs"
)

// CompactionPlan decides what one compaction pass drops (docs/protocol.md
// R103): of the entries below the pass's point, a keyed entry (one with
// an entry key, R102) that is not its key's newest below the point, and a
// tombstone (a key and no data) whose time is at or before
// TombstoneBefore. Every entry without a key, and every control entry
// (epoch starts, voters, feature levels, keyed state: cursors, copies,
// the catalog), is kept. It is deterministic and holds no I/O: the shell
// reads the log into Observe and asks Drop of each entry as it rewrites a
// segment.
//
// A pass need not read the whole log: with Clean set (the cleaner point of
// the last complete pass, protocol.CleanerCheckpoint), the plan observes
// only the dirty part [Clean, Point) and treats an entry below Clean whose
// key the dirty part does not hold as its key's newest (below Clean the
// last pass left every key at most one entry), so it drops an entry below
// Clean only if the dirty part supersedes its key, or if it is a tombstone
// past its retention.
type CompactionPlan struct {
	// Point is the end of what the pass compacts: Observe and Drop see
	// only entries below it.
	Point uint64
	// TombstoneBefore is the newest entry time (milliseconds since the
	// Unix epoch) of a tombstone that may go; a tombstone without a time
	// (0) is kept.
	TombstoneBefore int64
	// Clean is the offset below which the log is compacted already
	// (0: nothing is; the plan observes the whole log below Point).
	Clean  uint64
	newest map[string]uint64
	hashes map[uint64]struct{} // newest's keys' EntryKeyHash, built by Rewrites
}

// NewCompactionPlan returns the plan of a pass up to point.
func NewCompactionPlan(point uint64, tombstoneBefore int64) *CompactionPlan {
	return &CompactionPlan{Point: point, TombstoneBefore: tombstoneBefore, newest: map[string]uint64{}}
}

// Observe records e, an entry below Point, in offset order: the newest
// entry of its key so far.
func (p *CompactionPlan) Observe(e protocol.Entry) {
	if e.Offset >= p.Point || e.Offset < p.Clean {
		return
	}
	if k, _ := protocol.EntryKeyOf(e); k != "" {
		p.newest[k] = e.Offset
		p.hashes = nil
	}
}

// Keys returns how many keys the plan has seen.
func (p *CompactionPlan) Keys() int { return len(p.newest) }

// Drop reports whether the pass removes e (an entry the plan observed).
func (p *CompactionPlan) Drop(e protocol.Entry) bool {
	if e.Offset >= p.Point {
		return false
	}
	k, data := protocol.EntryKeyOf(e)
	if k == "" {
		return false
	}
	if bugs.CompactDropNewest {
		return true
	}
	n, ok := p.newest[k]
	if ok && n != e.Offset {
		return true // superseded below the point
	}
	if !ok && e.Offset >= p.Clean {
		return false // never seen: kept
	}
	// Its key's newest below the point: the one the plan saw, or one in
	// the clean part whose key the dirty part does not hold.
	return len(data) == 0 && e.Time > 0 && e.Time <= p.TombstoneBefore
}

// Rewrites reports whether the pass must rewrite s, a segment below Clean
// that the last pass summarised: it holds a key the dirty part supersedes
// (by its hash: a shared hash only costs a needless rewrite), or a
// tombstone past its retention. Call it once the plan has observed the
// dirty part. A segment it returns false for is not read at all.
func (p *CompactionPlan) Rewrites(s protocol.SegmentSummary) bool {
	if s.Tombstone > 0 && s.Tombstone <= p.TombstoneBefore {
		return true
	}
	if bugs.CompactSkipSuperseded {
		return false
	}
	if p.hashes == nil {
		p.hashes = make(map[uint64]struct{}, len(p.newest))
		for k := range p.newest {
			p.hashes[protocol.EntryKeyHash(k)] = struct{}{}
		}
	}
	for _, h := range s.Keys {
		if _, ok := p.hashes[h]; ok {
			return true
		}
	}
	return false
}

// DropKeeping returns Drop, recording in b every entry it keeps: what a
// pass hands the store's rewrite of a segment, so that the segment's
// summary is what the rewrite leaves.
func (p *CompactionPlan) DropKeeping(b *SegmentSummarizer) func(protocol.Entry) bool {
	return func(e protocol.Entry) bool {
		if p.Drop(e) {
			return true
		}
		b.Keep(e)
		return false
	}
}

// SegmentSummarizer builds a protocol.SegmentSummary from the entries a
// segment keeps.
type SegmentSummarizer struct {
	s    protocol.SegmentSummary
	seen map[uint64]struct{}
}

// NewSegmentSummarizer returns the summarizer of the segment [base, end).
func NewSegmentSummarizer(base, end uint64) *SegmentSummarizer {
	return &SegmentSummarizer{s: protocol.SegmentSummary{Base: base, End: end}, seen: map[uint64]struct{}{}}
}

// Keep records e, an entry the segment keeps.
func (b *SegmentSummarizer) Keep(e protocol.Entry) {
	k, data := protocol.EntryKeyOf(e)
	if k == "" {
		return
	}
	h := protocol.EntryKeyHash(k)
	if _, ok := b.seen[h]; !ok {
		b.seen[h] = struct{}{}
		b.s.Keys = append(b.s.Keys, h)
	}
	if len(data) == 0 && e.Time > 0 && (b.s.Tombstone == 0 || e.Time < b.s.Tombstone) {
		b.s.Tombstone = e.Time
	}
}

// Summary returns the summary of what Keep recorded.
func (b *SegmentSummarizer) Summary() protocol.SegmentSummary {
	s := b.s
	s.Keys = slices.Clone(s.Keys)
	slices.Sort(s.Keys)
	return s
}

// CompactionSegment is a sealed segment a pass may compact, [Base, End),
// of Bytes on disk; a pass's segments are contiguous, in offset order,
// all below its point.
type CompactionSegment struct {
	Base, End uint64
	Bytes     int64
}

// CompactionChoice is what ChooseCompaction decided.
type CompactionChoice struct {
	// Run: the pass runs (the dirty part is a large enough share of the
	// log, or the pass was asked for).
	Run bool
	// Dirty is where the pass starts reading the log into its plan (its
	// CompactionPlan.Clean): the base of the first segment that the
	// checkpoint does not show clean, or the end of the last segment.
	Dirty uint64
	// Clean holds the summaries of the segments below Dirty, one per
	// segment, in order; the segments from len(Clean) on are dirty.
	Clean []protocol.SegmentSummary
	// CleanBytes and DirtyBytes are the segments' sizes below and from
	// Dirty.
	CleanBytes, DirtyBytes int64
}

// ChooseCompaction decides a pass over segs (the pass's sealed segments,
// contiguous, ending at its point) given the cleaner checkpoint ck of the
// last complete pass (nil: none, or a lost one) and the log's LEO: a
// segment is clean if ck summarises it with the same range and it lies
// below ck's point, and the clean segments are those before the first that
// is not. A checkpoint whose point is above the LEO describes a log that
// has since been cut below it and counts for nothing. The pass runs when
// minRatio <= 0 (every pass: Log.Compact's, or an option of 0), or when
// the dirty segments are at least minRatio of the bytes of all (Kafka's
// min.cleanable.dirty.ratio): a pass with little new to compact does
// nothing, not even read.
func ChooseCompaction(segs []CompactionSegment, ck *protocol.CleanerCheckpoint, leo uint64, minRatio float64) CompactionChoice {
	var c CompactionChoice
	if len(segs) == 0 {
		return c
	}
	c.Dirty = segs[len(segs)-1].End
	byBase := map[uint64]protocol.SegmentSummary{}
	if ck != nil && ck.Point <= leo {
		for _, s := range ck.Segments {
			if s.End <= ck.Point {
				byBase[s.Base] = s
			}
		}
	}
	for i, s := range segs {
		sum, ok := byBase[s.Base]
		if ok && sum.End == s.End && len(c.Clean) == i {
			c.Clean = append(c.Clean, sum)
			c.CleanBytes += s.Bytes
			continue
		}
		if len(c.Clean) == i {
			c.Dirty = s.Base
		}
		c.DirtyBytes += s.Bytes
	}
	switch {
	case minRatio <= 0:
		c.Run = true
	case c.DirtyBytes > 0:
		c.Run = float64(c.DirtyBytes) >= minRatio*float64(c.CleanBytes+c.DirtyBytes)
	}
	return c
}
