package storage

import (
	"fmt"
	"sync"

	"github.com/replog-io/replog/protocol"
)

// Memory is an in-memory Store with the same contract as Bolt, for tests and
// the deterministic simulation. It is safe for concurrent use.
//
// A Memory made by NewMemory treats every write as durable when it returns:
// Crash returns a store with everything written so far (like closing and
// reopening a Bolt).
//
// A Memory made by NewMemoryDeferred simulates a disk with a volatile write
// cache: writes are visible to reads at once but become durable only at the
// next Sync. Crash returns a store holding only the durable state (what was
// synced); CrashAfter also keeps the first n unsynced writes, which models a
// crash in the middle of a run of writes (each write is still wholly applied
// or wholly absent, and never applied without the writes before it, as the
// Store contract requires).
type Memory struct {
	mu       sync.RWMutex
	closed   bool
	cur      memState
	deferred bool
	durable  memState // deferred mode: the state as of the last Sync
	pending  []memOp  // deferred mode: valid writes since the last Sync
}

// memState is one version of a Memory's contents. Two memStates never share
// the backing array of entries; Entry Data is never mutated once stored, so
// it may be shared.
type memState struct {
	st      *logState
	entries []protocol.Entry // entries[i].Offset == st.logStart+i
}

type memOpKind uint8

const (
	opAppend memOpKind = iota + 1
	opTruncate
	opDeletePrefix
	opQuorum
	opHW
)

// memOp is one write, kept so that unsynced writes can be replayed onto the
// durable state.
type memOp struct {
	kind    memOpKind
	entries []protocol.Entry // opAppend; Data owned by the store
	n       uint64           // opTruncate, opDeletePrefix, opHW
	qs      protocol.QuorumState
}

// NewMemory returns an empty in-memory store whose writes are durable when
// they return.
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

// apply validates op against s and applies it. noop reports a valid write
// that changes nothing.
func (s *memState) apply(op *memOp) (noop bool, err error) {
	switch op.kind {
	case opAppend:
		if err := validateAppend(s.st, op.entries); err != nil {
			return false, err
		}
		if len(op.entries) == 0 {
			return true, nil
		}
		s.entries = append(s.entries, op.entries...)
		s.st = s.st.afterAppend(op.entries)
	case opTruncate:
		if noop, err := s.st.checkTruncate(op.n); noop || err != nil {
			return noop, err
		}
		s.entries = s.entries[:op.n-s.st.logStart]
		s.st = s.st.afterTruncate(op.n)
	case opDeletePrefix:
		if noop, err := s.st.checkDeletePrefix(op.n); noop || err != nil {
			return noop, err
		}
		s.entries = append([]protocol.Entry(nil), s.entries[op.n-s.st.logStart:]...)
		s.st = s.st.afterDeletePrefix(op.n)
	case opQuorum:
		n := *s.st
		n.quorum = op.qs
		s.st = &n
	case opHW:
		if err := s.st.checkHW(op.n); err != nil {
			return false, err
		}
		n := *s.st
		n.hw, n.hwOK = op.n, true
		s.st = &n
	default:
		panic(fmt.Sprintf("storage: unknown memOp kind %d", op.kind))
	}
	return false, nil
}

func (s *memState) clone() memState {
	return memState{st: s.st, entries: append([]protocol.Entry(nil), s.entries...)}
}

func (m *Memory) write(op *memOp) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	noop, err := m.cur.apply(op)
	if err == nil && !noop && m.deferred {
		m.pending = append(m.pending, *op)
	}
	return err
}

// Append implements Store.
func (m *Memory) Append(entries []protocol.Entry) error {
	own := make([]protocol.Entry, len(entries))
	for i, e := range entries {
		e.Data = append([]byte(nil), e.Data...)
		own[i] = e
	}
	return m.write(&memOp{kind: opAppend, entries: own})
}

// TruncateSuffix implements Store.
func (m *Memory) TruncateSuffix(from uint64) error {
	return m.write(&memOp{kind: opTruncate, n: from})
}

// DeletePrefix implements Store.
func (m *Memory) DeletePrefix(upTo uint64) error {
	return m.write(&memOp{kind: opDeletePrefix, n: upTo})
}

// SetQuorumState implements Store.
func (m *Memory) SetQuorumState(s protocol.QuorumState) error {
	return m.write(&memOp{kind: opQuorum, qs: s})
}

// SetHWCheckpoint implements Store.
func (m *Memory) SetHWCheckpoint(hw uint64) error {
	return m.write(&memOp{kind: opHW, n: hw})
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

// Sync makes every write so far durable (deferred mode; a no-op otherwise).
func (m *Memory) Sync() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	m.syncLocked(len(m.pending))
	return nil
}

// syncLocked applies the first n pending writes to the durable state.
func (m *Memory) syncLocked(n int) {
	for i := range m.pending[:n] {
		if _, err := m.durable.apply(&m.pending[i]); err != nil {
			// The write was valid on the visible state, which the durable
			// state plus the earlier pending writes equals.
			panic(fmt.Sprintf("storage: replaying a synced write failed: %v", err))
		}
	}
	m.pending = append(m.pending[:0], m.pending[n:]...)
}

// Unsynced returns the number of writes (that changed something) made since
// the last Sync; always 0 outside deferred mode.
func (m *Memory) Unsynced() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return len(m.pending)
}

// Crash simulates a crash and restart: it closes m (later calls on m return
// ErrClosed) and returns a new store, in the same mode, holding only m's
// durable state. It works on a closed store too.
func (m *Memory) Crash() *Memory { return m.CrashAfter(0) }

// CrashAfter is Crash keeping, besides the durable state, the first n writes
// made since the last Sync (all of them if n ≥ Unsynced()), as if the crash
// happened while the disk was writing them back in order.
func (m *Memory) CrashAfter(n int) *Memory {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	if !m.deferred {
		return &Memory{cur: m.cur.clone()}
	}
	m.syncLocked(min(max(n, 0), len(m.pending)))
	m.pending = nil
	return &Memory{cur: m.durable.clone(), deferred: true, durable: m.durable.clone()}
}

var _ Store = (*Memory)(nil)
