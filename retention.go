package replog

import (
	"context"
	"fmt"
	"time"

	"github.com/replog-io/replog/replica"
	"github.com/replog-io/replog/storage"
)

// OutOfRangeError is returned (wrapping ErrOutOfRange) by a reader whose
// next offset is below the log start: those entries were deleted by
// retention. A consumer that can skip them resumes from LogStart (Kafka's
// auto.offset.reset=earliest); errors.As gets the figures:
//
//	var oor *replog.OutOfRangeError
//	if errors.As(err, &oor) { from = oor.LogStart }
type OutOfRangeError struct {
	// Offset is the offset the reader asked for.
	Offset uint64
	// LogStart is this node's log start when the read failed.
	LogStart uint64
}

func (e *OutOfRangeError) Error() string {
	return fmt.Sprintf("replog: offset %d is below the log start %d (deleted by retention)", e.Offset, e.LogStart)
}

// Unwrap returns ErrOutOfRange.
func (e *OutOfRangeError) Unwrap() error { return ErrOutOfRange }

// deleteResend is how often DeleteBefore asks again while it waits: a
// follower's request to its leader is one-way and may be lost, or go to a
// leader that just lost its place.
const deleteResend = 500 * time.Millisecond

// deletePoll is how often DeleteBefore looks at the log start while it
// waits.
const deletePoll = 10 * time.Millisecond

// DeleteBefore deletes the entries below offset (Kafka's DeleteRecords,
// etcd's Compact) and returns this node's log start once it covers them,
// as far as they are committed: the leader never deletes at or above its
// high watermark, and keeps the last committed entry (and the first
// entry of an epoch's, R51), so the log start it reaches is a little
// below min(offset, the HW): replica.DeletionReach. It
// works on any node: the leader moves its log start, a follower or
// observer asks the leader, and every node follows the leader's log start
// through replication (never above its own HW). Entries below the log
// start are gone on this node once it returns; readers asking for them get
// an *OutOfRangeError. Disk space comes back in whole segment files
// (Options.SegmentBytes): the segment holding the log start stays until
// the log start leaves it.
//
// Under Options.RetainUntilSnapshot, offset is first lowered to this
// node's newest snapshot's offset (to 0 with none: nothing is deleted),
// so that the state stays rebuildable here (docs/protocol.md R87).
//
// An offset at or below the log start returns at once. Errors:
//   - *NotLeaderError (ErrNotLeader), also wrapping ctx.Err(): ctx ended
//     while no leader was known; maybe nothing was deleted.
//   - ctx.Err(): ctx ended before this node's log start covered the
//     deletion; the leader may have deleted already, and this node will
//     follow.
//   - ErrClosed, ErrStorageFailed: as for Append.
func (l *Log) DeleteBefore(ctx context.Context, offset uint64) (uint64, error) {
	offset = l.retainBound(offset)
	st := l.Status()
	if offset <= st.LogStart {
		return st.LogStart, nil
	}
	// What this node can be sure gets deleted, with the core's own rule
	// (DeletionReach, bounded as the core bounds it: by the HW and the
	// durable LEO). A leader elected since may have a lower HW for a
	// moment: then the wait lasts until it catches up, asking again every
	// deleteResend. A deletion keeps the last committed entry and
	// the epoch of the entry below the log start (R51, R52); below our HW
	// the epoch map is the leader's.
	target := replica.DeletionReach(l.store.EpochMap(), st.LogStart, offset, min(st.HighWatermark, st.DurableLEO))
	poll := time.NewTicker(deletePoll)
	defer poll.Stop()
	var asked time.Time
	for {
		if err := l.failed(); err != nil {
			return l.Status().LogStart, err
		}
		st = l.Status()
		if st.Role == RoleClosed {
			return st.LogStart, ErrClosed
		}
		if st.LogStart >= target {
			return st.LogStart, nil
		}
		if time.Since(asked) >= deleteResend {
			select {
			// The target, not offset: a leader that copies live keys
			// above its log start (R66) appends entries and moves its HW,
			// and a request past the HW would then delete past the one
			// this call was bounded by.
			case l.deletes <- min(offset, target):
				asked = time.Now()
			case <-l.closing:
				return st.LogStart, ErrClosed
			case <-ctx.Done():
			}
		}
		select {
		case <-ctx.Done():
			st = l.Status()
			if st.LeaderID == "" && st.Role != RoleLeader {
				return st.LogStart, fmt.Errorf("%w (%w)", &NotLeaderError{}, ctx.Err())
			}
			return st.LogStart, ctx.Err()
		case <-l.closing:
			return l.Status().LogStart, ErrClosed
		case <-poll.C:
		}
	}
}

// segmentLister is what retention policies need of the store: the
// segmented store lists its segments (storage.DirStore).
type segmentLister interface {
	Segments() []storage.SegmentInfo
}

// retentionInterval is how often a leader checks its retention policies.
var retentionInterval = time.Second

// retainer applies Options.RetentionBytes and RetentionAge: while this
// node leads, every retentionInterval it finds the sealed segments the
// policies drop (oldest first; the active segment never goes) and asks
// the loop to move the log start past them. Followers follow the leader's
// log start. It runs in its own goroutine: reading a segment's last entry
// may open its file, which the loop must never wait for.
func (l *Log) retainer() {
	defer l.wg.Done()
	segs, ok := l.store.(segmentLister)
	if !ok {
		return
	}
	t := time.NewTicker(retentionInterval)
	defer t.Stop()
	for {
		select {
		case <-l.closing:
			return
		case <-t.C:
		}
		st := l.Status()
		if st.Role != RoleLeader {
			continue
		}
		target := l.retainBound(retentionTarget(segs.Segments(), l.store, st.LogStart, l.opts.RetentionBytes, l.opts.RetentionAge, time.Now()))
		if target <= st.LogStart {
			continue
		}
		select {
		case l.deletes <- target:
		case <-l.closing:
			return
		}
	}
}

// retentionTarget returns the log start the policies ask for: the end of
// the last sealed segment that must go (logStart if none). maxBytes ≤ 0
// and maxAge ≤ 0 are off. By size, the oldest sealed segments go while the
// segments together hold more than maxBytes; by age, while a sealed
// segment's newest entry (its last) is older than maxAge (an entry
// without a time never expires).
func retentionTarget(segs []storage.SegmentInfo, store storage.Store, logStart uint64, maxBytes int64, maxAge time.Duration, now time.Time) uint64 {
	target := logStart
	var total int64
	for _, s := range segs {
		total += s.Bytes
	}
	for _, s := range segs {
		if s.Active || s.End <= logStart {
			total -= s.Bytes
			continue
		}
		drop := maxBytes > 0 && total > maxBytes
		if !drop && maxAge > 0 {
			es, err := store.Entries(s.End-1, 1, 0)
			drop = err == nil && len(es) == 1 && es[0].Time > 0 && now.Sub(time.UnixMilli(es[0].Time)) > maxAge
		}
		if !drop {
			break
		}
		target = s.End
		total -= s.Bytes
	}
	return target
}
