package replica

import (
	"fmt"
	"slices"

	"github.com/replog-io/replog/protocol"
)

// LogReader is the read-only view of the durable log the core needs (etcd
// raft's Storage): New reads the state to restore, and a leader reads the
// entries it serves to fetchers. The core never writes through it; it asks
// the shell to write through Ready, and the shell writes to the same log.
// storage.DirStore and storage.Memory (any storage.Store) satisfy it.
//
// The core calls it from the goroutine that drives the Replica, never
// concurrently, and only for what is durable as far as it knows (below the
// end it has seen persisted): New calls LEO, LogStart, EpochMap, QuorumState
// and HWCheckpoint once, and KeyCheckpoint if the log is also a
// KeyCheckpointReader; Entries is called while serving a fetch (in Step,
// Tick and Ready on a leader), so a slow Entries holds up the whole core:
// it may block on the disk, never on the shell's own progress (the shell
// is not applying writes while it drives the core).
type LogReader interface {
	// Entries returns entries from offset from (LogStart ≤ from < LEO) on,
	// at most maxCount and, after the first, at most maxBytes counting
	// len(Data) + protocol.EntryOverhead each (the first is always
	// returned whole). The returned slice and its entries' Data belong to
	// the core afterwards; it never modifies them, and shares Data
	// read-only with fetch responses.
	Entries(from uint64, maxCount int, maxBytes int) ([]protocol.Entry, error)
	// LEO is the offset the next entry gets.
	LEO() uint64
	// LogStart is the offset of the first stored entry.
	LogStart() uint64
	// EpochMap returns the leader-epoch map, ordered by epoch. The slice is
	// the core's (it appends to and truncates it).
	EpochMap() []protocol.EpochStart
	// QuorumState returns the stored epoch, vote and leader (zero if none).
	QuorumState() (protocol.QuorumState, error)
	// HWCheckpoint returns the last checkpointed HW and whether there is
	// one.
	HWCheckpoint() (hw uint64, ok bool, err error)
	// VoterSets returns one row per EntryVoters entry, in offset order,
	// and below the log start the newest such row only (docs/protocol.md
	// R55). The slice is the core's.
	VoterSets() []protocol.VotersAt
}

// logView is the core's view of its log: the store's entries below
// durableEnd plus an in-memory tail of entries the core has asked to write
// but not yet seen persisted (etcd raft's "unstable"), with its own copy of
// the epoch map.
//
// Entries of the store at or above durableEnd are never read: they may be
// stale (a truncation is in flight) or ahead of what Persisted confirmed.
// The shell applies writes in order, so entries below durableEnd cannot
// change until the core itself emits a truncation below it, which lowers
// durableEnd at once.
type logView struct {
	store    LogReader
	logStart uint64
	// durableEnd: entries below it are durable and read from the store.
	durableEnd uint64
	// tail holds entries [durableEnd, durableEnd+len(tail)). It is private:
	// writes and fetch responses get copies of the Entry structs (Data is
	// shared and never mutated).
	tail []protocol.Entry
	// marks say which write carries which part of the tail: after write
	// Seq is persisted, entries below end are durable.
	marks []tailMark
	// epochs is the epoch map of the view. The leader's row for its epoch
	// is added when it is elected, before any entry of it (R25).
	epochs []protocol.EpochStart
	// voterSets has one row per EntryVoters entry of the view (R55), in
	// offset order, and below the log start the newest one only.
	voterSets []protocol.VotersAt
}

type tailMark struct {
	seq uint64
	end uint64
}

func newLogView(store LogReader) logView {
	return logView{
		store:      store,
		logStart:   store.LogStart(),
		durableEnd: store.LEO(),
		epochs:     store.EpochMap(),
		voterSets:  store.VoterSets(),
	}
}

// LEO is the end of the view.
func (l *logView) LEO() uint64 { return l.durableEnd + uint64(len(l.tail)) }

// epochAt returns the epoch of the entry at offset off (0 if none).
func (l *logView) epochAt(off uint64) uint64 {
	for i := len(l.epochs) - 1; i >= 0; i-- {
		if l.epochs[i].StartOffset <= off {
			return l.epochs[i].Epoch
		}
	}
	return 0
}

// LastEntryEpoch is the epoch of the entry at LEO-1 (0 if the log is
// empty). It ignores a leader's row without entries.
func (l *logView) LastEntryEpoch() uint64 {
	leo := l.LEO()
	if leo == 0 {
		return 0
	}
	return l.epochAt(leo - 1)
}

// lastRowEpoch is the epoch of the last row of the epoch map.
func (l *logView) lastRowEpoch() uint64 {
	if len(l.epochs) == 0 {
		return 0
	}
	return l.epochs[len(l.epochs)-1].Epoch
}

// EndOffsetForEpoch is Store.EndOffsetForEpoch on the view.
func (l *logView) EndOffsetForEpoch(epoch uint64) (uint64, uint64) {
	for i := len(l.epochs) - 1; i >= 0; i-- {
		if l.epochs[i].Epoch <= epoch {
			end := l.LEO()
			if i+1 < len(l.epochs) {
				end = l.epochs[i+1].StartOffset
			}
			return l.epochs[i].Epoch, end
		}
	}
	return 0, l.logStart
}

// addEpoch records epoch as starting at offset start if it is above the last
// row's epoch.
func (l *logView) addEpoch(epoch, start uint64) {
	if epoch > l.lastRowEpoch() {
		l.epochs = append(l.epochs, protocol.EpochStart{Epoch: epoch, StartOffset: start})
	}
}

// dropEmptyTrailingEpochs removes rows that start at the LEO (a former
// leader's row with no entries), so the view matches what the store will
// hold after a restart.
func (l *logView) dropEmptyTrailingEpochs() {
	leo := l.LEO()
	for len(l.epochs) > 0 && l.epochs[len(l.epochs)-1].StartOffset >= leo {
		l.epochs = l.epochs[:len(l.epochs)-1]
	}
}

// append adds entries (starting at LEO) carried by write seq. It reports
// whether they hold a voter set.
func (l *logView) append(entries []protocol.Entry, seq uint64) bool {
	for _, e := range entries {
		l.addEpoch(e.Epoch, e.Offset)
	}
	voters := l.addVoterRows(entries)
	l.tail = append(l.tail, entries...)
	end := l.LEO()
	if n := len(l.marks); n > 0 && l.marks[n-1].seq == seq {
		l.marks[n-1].end = end
	} else {
		l.marks = append(l.marks, tailMark{seq: seq, end: end})
	}
	return voters
}

// truncate removes entries at or above to (to < LEO), the epoch rows that
// start at or after it and the voter sets there. It reports whether a
// voter set went.
func (l *logView) truncate(to uint64) bool {
	if to < l.durableEnd {
		l.durableEnd = to
		l.tail = nil
		l.marks = nil
	} else {
		n := to - l.durableEnd
		// Cap the capacity: a later append must not write into entries a
		// reader may still hold.
		l.tail = l.tail[:n:n]
		for i := range l.marks {
			l.marks[i].end = min(l.marks[i].end, to)
		}
	}
	for len(l.epochs) > 0 && l.epochs[len(l.epochs)-1].StartOffset >= to {
		if len(l.epochs) == 1 && to == l.logStart && to > 0 {
			break // it covers the entries below the log start (as the store keeps it)
		}
		l.epochs = l.epochs[:len(l.epochs)-1]
	}
	return l.truncateVoterRows(to)
}

// deletePrefix moves the log start up to upTo (logStart < upTo ≤
// durableEnd): rows wholly below it go, and the row covering it starts at
// it (as the store does).
func (l *logView) deletePrefix(upTo uint64) {
	l.logStart = upTo
	l.pruneVoterRows(upTo)
	i := 0
	for i+1 < len(l.epochs) && l.epochs[i+1].StartOffset <= upTo {
		i++
	}
	if len(l.epochs) == 0 {
		return
	}
	rows := slices.Clone(l.epochs[i:])
	rows[0].StartOffset = max(rows[0].StartOffset, upTo)
	l.epochs = rows
}

// reset empties the view and restarts it at to (≥ LEO), as a reset's
// prefix deletion does in the store: no entries, one epoch row {epoch, to}
// if the leader told the epoch of its entry below to (none if 0), and of
// the voter sets rows, the leader's below to, if given (R53, R55), or else
// its own that a deletion keeps (the set in force stays).
func (l *logView) reset(to uint64, rows []protocol.VotersAt, epoch uint64) {
	l.logStart, l.durableEnd = to, to
	l.tail, l.marks, l.epochs = nil, nil, nil
	if epoch != 0 {
		l.epochs = []protocol.EpochStart{{Epoch: epoch, StartOffset: to}}
	}
	if rows != nil {
		l.voterSets = slices.Clone(rows)
		return
	}
	l.truncateVoterRows(to) // a reset that truncates drops their sets too
	l.pruneVoterRows(to)
}

// persisted moves the tail entries carried by writes up to seq into the
// durable part. It reports whether durableEnd moved.
func (l *logView) persisted(seq uint64) bool {
	end := l.durableEnd
	i := 0
	for i < len(l.marks) && l.marks[i].seq <= seq {
		end = max(end, l.marks[i].end)
		i++
	}
	l.marks = l.marks[i:]
	if end == l.durableEnd {
		return false
	}
	l.tail = l.tail[end-l.durableEnd:]
	l.durableEnd = end
	return true
}

// maxReadEntries caps the entries of one read (one fetch response): it
// bounds the leader's work per response and the response's size when
// records are tiny.
const maxReadEntries = 4096

// read returns entries from offset from (logStart ≤ from ≤ LEO): at most
// maxReadEntries, and at most maxBytes counting len(Data) +
// protocol.EntryOverhead per entry (the first entry is always returned, so
// progress is possible). The returned slice is the caller's; Data is shared
// and must not be modified.
func (l *logView) read(from uint64, maxBytes int) ([]protocol.Entry, error) {
	var out []protocol.Entry
	budget := protocol.Budget{Max: maxBytes}
	if from < l.durableEnd {
		count := min(l.durableEnd-from, maxReadEntries)
		es, err := l.store.Entries(from, int(count), maxBytes)
		if err != nil {
			return nil, err
		}
		if len(es) == 0 {
			return nil, fmt.Errorf("replica: store returned no entries at %d below durable end %d", from, l.durableEnd)
		}
		for _, e := range es {
			budget.Take(len(e.Data)) // the store applied the same budget
		}
		out = es
		from += uint64(len(es))
		if from < l.durableEnd || len(out) >= maxReadEntries || budget.Used >= maxBytes {
			return out, nil
		}
	}
	for i := from - l.durableEnd; i < uint64(len(l.tail)) && len(out) < maxReadEntries; i++ {
		e := l.tail[i]
		if !budget.Take(len(e.Data)) {
			break
		}
		out = append(out, e)
	}
	return out, nil
}
