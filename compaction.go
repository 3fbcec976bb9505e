package replog

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/replica"
	"github.com/replog-io/replog/storage"
)

// Compaction configures a compacted log (docs/protocol.md R103, R104):
// below its lag the log keeps, of the entries with a key (WithKey), only
// the newest of each key, and a tombstone (a key and no data) only for
// TombstoneRetention; every entry without a key, and every control entry,
// is kept. Offsets never change and order is kept: a reader from the
// start sees at least the newest value of every key, a reader that keeps
// up sees every entry. Each replica compacts its own sealed segments in
// the background (the active segment never); a follower that fetches a
// compacted range gets a placeholder for each removed offset, which
// readers never see. The zero value is off.
type Compaction struct {
	// Enabled turns compaction on for the log.
	Enabled bool `json:"enabled,omitempty"`
	// Lag: an entry younger than this (by its Time, the leader's clock)
	// is never compacted, nor one in a segment holding a younger one, so
	// that a reader that keeps up within Lag sees every entry. It is
	// never less than Options.DedupWindow: an entry's ID is remembered
	// that long (R64), and compaction never drops what the key table may
	// still need. Default DefaultCompactionLag (1 h, Kafka's
	// min.compaction.lag.ms set to an hour rather than 0, so that a
	// consumer restarted within the hour misses nothing).
	Lag time.Duration `json:"lag,omitempty"`
	// TombstoneRetention is how long a tombstone (the newest entry of its
	// key, with no data) is kept once it is older than Lag; then it goes
	// too. A reader from the start that is slower than Lag +
	// TombstoneRetention may miss a deletion (Kafka's
	// delete.retention.ms). Default DefaultTombstoneRetention (24 h, as
	// Kafka's); negative: tombstones are kept for ever (what a log needs
	// whose readers apply entries without a key that depend on a key's
	// state, such as the kv package's Create and Update: see kv's doc).
	TombstoneRetention time.Duration `json:"tombstone_retention,omitempty"`
	// BytesPerSecond throttles a pass: the bytes of entries it reads per
	// second. Default DefaultCompactionBytesPerSecond (16 MiB/s: a 64 MiB
	// segment in about 4 s, a small share of a disk's bandwidth);
	// negative: no throttle.
	BytesPerSecond int64 `json:"bytes_per_second,omitempty"`
	// Interval is the time between the starts of two passes. Default
	// DefaultCompactionInterval (1 min).
	Interval time.Duration `json:"interval,omitempty"`
	// MinDirtyRatio: a background pass runs only when the dirty part of
	// the log (the sealed segments from the point below which the last
	// complete pass left it compacted) is at least this share of the
	// bytes of the sealed segments it may compact (Kafka's
	// min.cleanable.dirty.ratio): a pass with little new to compact
	// reads nothing. Log.Compact ignores it. At most 1. Default
	// DefaultMinDirtyRatio (0.5); negative: every pass runs (one with
	// nothing dirty still reads only the segments whose tombstones have
	// expired).
	MinDirtyRatio float64 `json:"min_dirty_ratio,omitempty"`
}

// Compaction's defaults.
const (
	DefaultCompactionLag            = time.Hour
	DefaultTombstoneRetention       = 24 * time.Hour
	DefaultCompactionBytesPerSecond = 16 << 20
	DefaultCompactionInterval       = time.Minute
	DefaultMinDirtyRatio            = 0.5
)

// withDefaults returns c with its defaults applied.
func (c Compaction) withDefaults() Compaction {
	if c.Lag == 0 {
		c.Lag = DefaultCompactionLag
	}
	if c.TombstoneRetention == 0 {
		c.TombstoneRetention = DefaultTombstoneRetention
	}
	if c.BytesPerSecond == 0 {
		c.BytesPerSecond = DefaultCompactionBytesPerSecond
	}
	if c.Interval == 0 {
		c.Interval = DefaultCompactionInterval
	}
	if c.MinDirtyRatio == 0 {
		c.MinDirtyRatio = DefaultMinDirtyRatio
	}
	return c
}

// validate names the first bad field of c (a field of Options.Compaction).
func (c Compaction) validate(bad func(field, format string, args ...any) error) error {
	switch {
	case c.Lag < 0:
		return bad("Compaction.Lag", "is negative (%v); 0 means the default (%v)", c.Lag, DefaultCompactionLag)
	case c.Interval < 0:
		return bad("Compaction.Interval", "is negative (%v); 0 means the default (%v)", c.Interval, DefaultCompactionInterval)
	case math.IsNaN(c.MinDirtyRatio) || c.MinDirtyRatio > 1:
		return bad("Compaction.MinDirtyRatio", "is %v; it is a share of the log, at most 1 (0 means the default, %v; negative: every pass)", c.MinDirtyRatio, DefaultMinDirtyRatio)
	}
	return nil
}

// keyCheckpointBytes, when not 0, is the core's KeyCheckpointBytes
// (tests: a compaction pass stops at the newest key checkpoint, which the
// core's default writes every 16 MiB of log).
var keyCheckpointBytes int

// compactor is what compaction needs of the store: the segmented store
// rewrites its sealed segments (storage.DirStore).
type compactor interface {
	segmentLister
	CompactSegment(base uint64, drop func(protocol.Entry) bool, pace func(int)) (storage.CompactResult, error)
}

// compactionStats are the compactor's counters (Stats).
type compactionStats struct {
	mu                                                               sync.Mutex // held by a pass
	passes, skipped, segments, removed, bytesRead, bytesFreed, point atomic.Uint64
	lastNanos, totalNanos                                            atomic.Int64
}

// compactionLoop runs a pass every Interval while the Log is open (R103).
// It runs in its own goroutine: a pass reads the log and writes files,
// which the loop must never wait for.
func (l *Log) compactionLoop() {
	defer l.wg.Done()
	cs, ok := l.store.(compactor)
	if !ok {
		return
	}
	c := l.opts.Compaction.withDefaults()
	t := time.NewTicker(c.Interval)
	defer t.Stop()
	for {
		select {
		case <-l.closing:
			return
		case <-t.C:
		}
		l.compactOnce(cs, c, time.Now())
	}
}

// Compact runs a compaction pass now (what the background pass does every
// Compaction.Interval, whatever Compaction.MinDirtyRatio says) and
// returns once it is done: the entries it dropped are gone from this
// node's disk. It waits for a pass already
// running. Errors: ErrClosed; an error wrapping ErrInvalidArgument when
// Options.Compaction is not Enabled or the store is not a data
// directory's.
func (l *Log) Compact() error {
	select {
	case <-l.closing:
		return ErrClosed
	default:
	}
	cs, ok := l.store.(compactor)
	if !l.opts.Compaction.Enabled || !ok {
		return fmt.Errorf("%w: Compact needs Options.Compaction.Enabled and a data directory", ErrInvalidArgument)
	}
	c := l.opts.Compaction.withDefaults()
	c.MinDirtyRatio = -1 // asked for: whatever the dirty part's share
	l.compactOnce(cs, c, time.Now())
	return nil
}

// compactOnce is one pass (R103): it finds the compaction point (the end
// of the last sealed segment wholly below the HW, the newest key
// checkpoint and the lag) and the dirty part (from the first segment the
// store's cleaner checkpoint does not show compacted by the last complete
// pass), skips the pass when the dirty part is less than
// c.MinDirtyRatio of the segments' bytes, reads the dirty part for the
// newest offset of each key, and rewrites each dirty segment, and each
// clean one holding a key the dirty part supersedes or an expired
// tombstone, without the entries to drop: a keyed entry that is not its
// key's newest below the point, or a tombstone past its retention. A
// clean segment with neither is not read. Once every rewrite is done it
// saves the new cleaner checkpoint.
func (l *Log) compactOnce(cs compactor, c Compaction, now time.Time) {
	// One pass at a time: a pass writes each segment's rewrite beside it
	// under one name, and the cleaner checkpoint is the last pass's.
	l.compaction.mu.Lock()
	defer l.compaction.mu.Unlock()
	st := l.Status()
	if st.FeatureLevel < protocol.FeatureLevelKeys {
		return // no entry has a key below level 10: nothing to drop
	}
	start := time.Now()
	limit := min(st.HighWatermark, st.DurableLEO)
	if kc, ok := l.store.(storage.KeyCheckpointStore); ok {
		// R104: the key table's replay after a restart starts at its
		// checkpoint; everything it would replay stays whole.
		// Without one the replay covers the whole log, and what a pass
		// drops is older than the dedup window (see R104).
		cp, have, err := kc.KeyCheckpoint()
		if err != nil {
			return
		}
		if have {
			limit = min(limit, cp.Offset)
		}
	}
	var ck *protocol.CleanerCheckpoint
	cleaner, _ := l.store.(storage.CleanerCheckpointStore)
	if cleaner != nil {
		got, have, err := cleaner.CleanerCheckpoint()
		if err != nil {
			return
		}
		if have && got.Point <= st.LEO {
			ck = &got // above the LEO it describes a log cut since: nothing is clean
		}
	}
	lag := max(c.Lag, l.opts.withDefaults().DedupWindow)
	youngest := now.Add(-lag).UnixMilli()
	var segs []replica.CompactionSegment
	for _, s := range cs.Segments() {
		if s.Active || s.End > limit {
			break
		}
		if s.End <= st.LogStart {
			continue
		}
		if ck == nil || s.End > ck.Point {
			// Below the cleaner point a pass found the entries older
			// than its lag; what a pass drops there now is superseded by
			// a dirty entry, which is younger and passed this check, or
			// a tombstone older than the lag and its retention.
			last, err := l.store.Entries(s.End-1, 1, 0)
			if err != nil || len(last) != 1 || last[0].Time > youngest {
				break // entries are in time order (the leader's clock): later segments are younger
			}
		}
		segs = append(segs, replica.CompactionSegment{Base: s.Base, End: s.End, Bytes: s.Bytes})
	}
	if len(segs) == 0 {
		return
	}
	choice := replica.ChooseCompaction(segs, ck, st.LEO, c.MinDirtyRatio)
	if !choice.Run {
		l.compaction.skipped.Add(1)
		return
	}
	point := segs[len(segs)-1].End
	var tombstonesBefore int64 // 0: none goes
	if c.TombstoneRetention >= 0 {
		tombstonesBefore = now.Add(-lag - c.TombstoneRetention).UnixMilli()
	}
	plan := replica.NewCompactionPlan(point, tombstonesBefore)
	plan.Clean = choice.Dirty
	for off := max(choice.Dirty, st.LogStart); off < point; {
		es, err := l.store.Entries(off, 4096, 4<<20)
		if err != nil || len(es) == 0 {
			return // retention moved the log start, or the store closed: the next pass
		}
		n := 0
		for _, e := range es {
			plan.Observe(e)
			n += len(e.Data)
		}
		l.compaction.bytesRead.Add(uint64(n))
		off = es[len(es)-1].Offset + 1
	}
	pace := l.compactionPace(c.BytesPerSecond)
	next := protocol.CleanerCheckpoint{Point: point, Segments: make([]protocol.SegmentSummary, 0, len(segs))}
	complete := true
	for i, s := range segs {
		select {
		case <-l.closing:
			return
		default:
		}
		if i < len(choice.Clean) && !plan.Rewrites(choice.Clean[i]) {
			next.Segments = append(next.Segments, choice.Clean[i])
			continue
		}
		sum := replica.NewSegmentSummarizer(s.Base, s.End)
		res, err := cs.CompactSegment(s.Base, plan.DropKeeping(sum), pace)
		if err != nil {
			l.logger.Warn("compaction pass", "segment", s.Base, "error", err)
			return // the checkpoint stays the last complete pass's
		}
		l.compaction.bytesRead.Add(uint64(res.BytesRead))
		if res.Swapped {
			l.compaction.segments.Add(1)
			l.compaction.removed.Add(uint64(res.Removed))
			if res.BytesBefore > res.BytesAfter {
				l.compaction.bytesFreed.Add(uint64(res.BytesBefore - res.BytesAfter))
			}
		} else if res.Removed > 0 {
			// The segment left the log meanwhile (a retention): what it
			// held below the point is not known compacted.
			complete = false
		}
		next.Segments = append(next.Segments, sum.Summary())
	}
	if complete && cleaner != nil {
		if err := cleaner.SaveCleanerCheckpoint(next); err != nil {
			l.logger.Warn("compaction pass: save the cleaner checkpoint", "error", err)
		}
	}
	took := time.Since(start)
	l.compaction.point.Store(point)
	l.compaction.passes.Add(1)
	l.compaction.lastNanos.Store(int64(took))
	l.compaction.totalNanos.Add(int64(took))
}

// compactionPace returns the pass's throttle: it sleeps so that the bytes
// read average at most rate per second (nil: no throttle), and returns
// early once the Log closes.
func (l *Log) compactionPace(rate int64) func(int) {
	if rate < 0 {
		return nil
	}
	began, read := time.Now(), int64(0)
	return func(n int) {
		read += int64(n)
		due := began.Add(time.Duration(float64(read) / float64(rate) * float64(time.Second)))
		if d := time.Until(due); d > 0 {
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-t.C:
			case <-l.closing:
			}
		}
	}
}
