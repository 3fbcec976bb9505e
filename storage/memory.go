package storage

import (
	"bytes"
	"fmt"
	"slices"
	"sync"

	"github.com/replog-io/replog/protocol"
)

// Memory is an in-memory Store with the same contract as DirStore, for tests and
// the deterministic simulation. It is safe for concurrent use.
//
// A Memory made by NewMemory treats every Apply as durable when it returns:
// Crash returns a store with everything applied so far (like closing and
// reopening a DirStore).
//
// A Memory made by NewMemoryDeferred simulates a disk with a volatile write
// cache: an Apply is visible to reads at once but becomes durable only at
// the next Sync. Crash returns a store holding only the durable state (what
// was synced); CrashAfter also keeps the first n unsynced Apply calls, which
// models a crash in the middle of a run of transactions (each Apply is
// still wholly applied or wholly absent, and never applied without the
// ones before it, as the Store contract requires).
type Memory struct {
	mu       sync.RWMutex
	closed   bool
	cur      memState
	deferred bool
	durable  memState                    // deferred mode: the state as of the last Sync
	pending  [][]protocol.Write          // deferred mode: Apply calls since the last Sync that changed something, their writes in order
	keyCkpt  *protocol.KeyCheckpoint     // the key checkpoint (keyckpt.go): durable when saved, kept by Crash
	cleaner  *protocol.CleanerCheckpoint // the cleaner checkpoint (cleaner.go): durable when saved, kept by Crash
}

// memState is one version of a Memory's contents. Entries' Data is never
// mutated once stored, so versions may share it; a version may share the
// backing array of entries with an older one only within the older one's
// length, which nobody writes (see apply).
type memState struct {
	st      *logState
	entries []protocol.Entry // entries[i].Offset == st.logStart+i
}

// NewMemory returns an empty in-memory store whose writes are durable when
// Apply returns.
func NewMemory() *Memory {
	return &Memory{cur: memState{st: &logState{}}}
}

// NewMemoryDeferred returns an empty in-memory store whose writes become
// durable only at Sync (see Memory).
func NewMemoryDeferred() *Memory {
	m := NewMemory()
	m.deferred = true
	m.durable = memState{st: &logState{}}
	return m
}

// apply validates w against s and applies it; changed is false for a valid
// write that changes nothing. s's entries may be extended in place beyond
// the length of the version s was copied from, never written below it: a
// truncation caps the slice, so that the next append reallocates.
func (s *memState) apply(w *protocol.Write) (changed bool, err error) {
	next, err := s.st.after(w)
	if err != nil || next == s.st {
		return false, err
	}
	switch w.Kind {
	case protocol.WriteAppend:
		s.entries = append(s.entries, w.Entries...)
	case protocol.WriteTruncate:
		k := w.Offset - s.st.logStart
		s.entries = s.entries[:k:k]
	case protocol.WriteDeletePrefix:
		if w.Offset >= s.st.leo {
			s.entries = nil // above the LEO: a reset
		} else {
			s.entries = append([]protocol.Entry(nil), s.entries[w.Offset-s.st.logStart:]...)
		}
	}
	s.st = next
	return true, nil
}

func (s *memState) clone() memState {
	return memState{st: s.st, entries: append([]protocol.Entry(nil), s.entries...)}
}

// ownWrites copies ws with the entries and their Data, so that the store
// keeps nothing of the caller's.
func ownWrites(ws []protocol.Write) []protocol.Write {
	size := 0
	for i := range ws {
		for j := range ws[i].Entries {
			size += len(ws[i].Entries[j].Data)
		}
	}
	arena := make([]byte, 0, size) // one allocation for all payloads
	own := make([]protocol.Write, len(ws))
	for i, w := range ws {
		if len(w.Entries) > 0 {
			es := make([]protocol.Entry, len(w.Entries))
			for j, e := range w.Entries {
				start := len(arena)
				arena = append(arena, e.Data...)
				e.Data = arena[start:len(arena):len(arena)]
				es[j] = e
			}
			w.Entries = es
		}
		own[i] = w
	}
	return own
}

// Apply implements Store: the writes are applied to a copy of the state,
// which replaces the state only if every write is valid.
func (m *Memory) Apply(ws []protocol.Write) error {
	own := ownWrites(ws)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	work := m.cur
	var kept []protocol.Write
	for i := range own {
		changed, err := work.apply(&own[i])
		if err != nil {
			return writeErr(ws, i, err)
		}
		if changed && m.deferred {
			kept = append(kept, own[i])
		}
	}
	m.cur = work
	if len(kept) > 0 {
		m.pending = append(m.pending, kept)
	}
	return nil
}

// Append implements Store (Apply of one write).
func (m *Memory) Append(entries []protocol.Entry) error {
	return m.Apply([]protocol.Write{{Kind: protocol.WriteAppend, Entries: entries}})
}

// TruncateSuffix implements Store (Apply of one write).
func (m *Memory) TruncateSuffix(from uint64) error {
	return m.Apply([]protocol.Write{{Kind: protocol.WriteTruncate, Offset: from}})
}

// DeletePrefix implements Store (Apply of one write).
func (m *Memory) DeletePrefix(upTo uint64) error {
	return m.Apply([]protocol.Write{{Kind: protocol.WriteDeletePrefix, Offset: upTo}})
}

// SetQuorumState implements Store (Apply of one write).
func (m *Memory) SetQuorumState(s protocol.QuorumState) error {
	return m.Apply([]protocol.Write{{Kind: protocol.WriteQuorumState, Quorum: s}})
}

// SetHWCheckpoint implements Store (Apply of one write).
func (m *Memory) SetHWCheckpoint(hw uint64) error {
	return m.Apply([]protocol.Write{{Kind: protocol.WriteHWCheckpoint, Offset: hw}})
}

// Entries implements Store.
func (m *Memory) Entries(from uint64, maxCount int, maxBytes int) ([]protocol.Entry, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return nil, ErrClosed
	}
	st := m.cur.st
	if from == st.leo {
		return nil, nil
	}
	if from < st.logStart || from > st.leo {
		return nil, fmt.Errorf("%w: offset %d outside [%d, %d)", ErrOutOfRange, from, st.logStart, st.leo)
	}
	src := m.cur.entries[from-st.logStart:]
	var out []protocol.Entry
	budget := protocol.Budget{Max: maxBytes}
	for i := range src {
		if maxCount > 0 && len(out) >= maxCount {
			break
		}
		if !budget.Take(len(src[i].Data)) {
			break
		}
		e := src[i]
		e.Data = append([]byte(nil), e.Data...)
		out = append(out, e)
	}
	return out, nil
}

func (m *Memory) state() *logState {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.cur.st
}

// LEO implements Store.
func (m *Memory) LEO() uint64 { return m.state().leo }

// LogStart implements Store.
func (m *Memory) LogStart() uint64 { return m.state().logStart }

// LastEpoch implements Store.
func (m *Memory) LastEpoch() uint64 { return m.state().lastEpoch() }

// EndOffsetForEpoch implements Store.
func (m *Memory) EndOffsetForEpoch(epoch uint64) (uint64, uint64) {
	return m.state().endOffsetForEpoch(epoch)
}

// EpochMap implements Store.
func (m *Memory) EpochMap() []protocol.EpochStart { return cloneEpochs(m.state().epochs) }

// VoterSets implements Store.
func (m *Memory) VoterSets() []protocol.VotersAt { return cloneVoters(m.state().voters) }

// QuorumState implements Store.
func (m *Memory) QuorumState() (protocol.QuorumState, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return protocol.QuorumState{}, ErrClosed
	}
	return m.cur.st.quorum, nil
}

// HWCheckpoint implements Store.
func (m *Memory) HWCheckpoint() (uint64, bool, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return 0, false, ErrClosed
	}
	return m.cur.st.hw, m.cur.st.hwOK, nil
}

// Close implements Store. Closing twice returns ErrClosed.
func (m *Memory) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	m.closed = true
	return nil
}

// Sync makes every Apply so far durable (deferred mode; a no-op otherwise).
func (m *Memory) Sync() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	m.syncLocked(len(m.pending))
	return nil
}

// syncLocked applies the first n pending Apply calls to the durable state.
func (m *Memory) syncLocked(n int) {
	for _, batch := range m.pending[:n] {
		for i := range batch {
			if _, err := m.durable.apply(&batch[i]); err != nil {
				// The write was valid on the visible state, which the
				// durable state plus the earlier pending writes equals.
				panic(fmt.Sprintf("storage: replaying a synced write failed: %v", err))
			}
		}
	}
	m.pending = append(m.pending[:0], m.pending[n:]...)
}

// Unsynced returns the number of Apply calls (that changed something) made
// since the last Sync; always 0 outside deferred mode.
func (m *Memory) Unsynced() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return len(m.pending)
}

// Crash simulates a crash and restart: it closes m (later calls on m return
// ErrClosed) and returns a new store, in the same mode, holding only m's
// durable state. It works on a closed store too.
func (m *Memory) Crash() *Memory { return m.CrashAfter(0) }

// CrashAfter is Crash keeping, besides the durable state, the first n Apply
// calls made since the last Sync (all of them if n ≥ Unsynced()), each
// whole, as if the crash happened while the disk was writing them back in
// order.
func (m *Memory) CrashAfter(n int) *Memory {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	if !m.deferred {
		return &Memory{cur: m.cur.clone(), keyCkpt: m.keyCkpt, cleaner: m.cleaner}
	}
	m.syncLocked(min(max(n, 0), len(m.pending)))
	m.pending = nil
	return &Memory{cur: m.durable.clone(), deferred: true, durable: m.durable.clone(), keyCkpt: m.keyCkpt, cleaner: m.cleaner}
}

// Compact rewrites the offsets [from, to) of the log without the entries
// drop reports true for, as DirStore.CompactSegment rewrites a sealed
// segment (docs/storage.md 13, docs/protocol.md R104): drop sees each
// entry of the range in offset order, never a placeholder; each removed
// entry becomes a hole, read back as a protocol.EntryHole placeholder
// with the entry's epoch, no data and the newest time of its run of holes
// (adjacent holes of one epoch within the range, earlier holes and
// stored placeholders among them), so that the log still holds one entry
// per offset. A stored placeholder reads as a hole does, so it is
// neither shown to drop nor counted in Removed.
//
// The rewrite replaces the range at once, as the Dir's rename does: a
// crash (Crash, CrashAfter) leaves it as before or as after, never a mix;
// in deferred mode it is durable when Compact returns (the Dir syncs the
// new file and its directory before the rename). It changes nothing, and
// Swapped is false, when nothing is removed or the range is not wholly in
// the log (in deferred mode, in the durable log, with the same entries
// there as visible: no unsynced write within it): a retention or reset
// took part of it, or it was never written. Refused tells the second case
// (drop saw nothing) from the first.
//
// Errors: ErrClosed.
func (m *Memory) Compact(from, to uint64, drop func(protocol.Entry) bool) (CompactResult, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var res CompactResult
	if m.closed {
		return res, ErrClosed
	}
	st := m.cur.st
	if from >= to || from < st.logStart || to > st.leo ||
		m.deferred && (from < m.durable.st.logStart || to > m.durable.st.leo) {
		res.Refused = true
		return res, nil
	}
	es := m.cur.entries[from-st.logStart : to-st.logStart]
	if m.deferred {
		// The pass rewrites the durable range from the visible one: they
		// must be the same entries, or unsynced writes (a truncation and
		// a new epoch's appends within the range) would become durable.
		ds := m.durable.st
		if !slices.EqualFunc(es, m.durable.entries[from-ds.logStart:to-ds.logStart], sameEntry) {
			res.Refused = true
			return res, nil
		}
	}
	out := make([]protocol.Entry, len(es))
	var runs holeRuns
	for i, e := range es {
		hole := e.Type == protocol.EntryHole
		if !hole {
			c := e
			c.Data = slices.Clone(e.Data) // drop's own: what it does with it cannot reach the store
			if drop(c) {
				res.Removed++
				hole = true
			}
		}
		res.BytesRead += int64(len(e.Data))
		if hole {
			runs.add(e.Offset, e.Epoch, storedTime(&e))
			continue
		}
		res.Kept++
		out[i] = e
	}
	for _, h := range runs {
		for off := h.start; off < h.end; off++ {
			out[off-from] = h.placeholder(off)
		}
	}
	if res.Removed == 0 {
		return res, nil
	}
	m.cur = m.cur.replaced(from, out)
	if m.deferred {
		m.durable = m.durable.replaced(from, out)
	}
	res.Swapped = true
	return res, nil
}

// sameEntry reports whether a and b are the same entry.
func sameEntry(a, b protocol.Entry) bool {
	return a.Offset == b.Offset && a.Epoch == b.Epoch && a.Type == b.Type && a.Time == b.Time && bytes.Equal(a.Data, b.Data)
}

// replaced returns s with the entries from offset from on replaced by es
// (within its log), in a new backing array: versions sharing the old one
// keep it.
func (s memState) replaced(from uint64, es []protocol.Entry) memState {
	n := memState{st: s.st, entries: slices.Clone(s.entries)}
	copy(n.entries[from-s.st.logStart:], es)
	return n
}

var _ Store = (*Memory)(nil)
