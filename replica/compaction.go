package replica

import (
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
type CompactionPlan struct {
	// Point is the end of what the pass compacts: Observe and Drop see
	// only entries below it.
	Point uint64
	// TombstoneBefore is the newest entry time (milliseconds since the
	// Unix epoch) of a tombstone that may go; a tombstone without a time
	// (0) is kept.
	TombstoneBefore int64
	newest          map[string]uint64
}

// NewCompactionPlan returns the plan of a pass up to point.
func NewCompactionPlan(point uint64, tombstoneBefore int64) *CompactionPlan {
	return &CompactionPlan{Point: point, TombstoneBefore: tombstoneBefore, newest: map[string]uint64{}}
}

// Observe records e, an entry below Point, in offset order: the newest
// entry of its key so far.
func (p *CompactionPlan) Observe(e protocol.Entry) {
	if e.Offset >= p.Point {
		return
	}
	if k, _ := protocol.EntryKeyOf(e); k != "" {
		p.newest[k] = e.Offset
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
	if n, ok := p.newest[k]; !ok || n != e.Offset {
		return ok // superseded below the point (never seen: kept)
	}
	return len(data) == 0 && e.Time > 0 && e.Time <= p.TombstoneBefore
}
