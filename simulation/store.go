package simulation

import (
	"fmt"

	"github.com/replog-io/replog/storage"
)

// memStore is the simulation's durable store: a small in-memory
// storage.Store. The simulator applies a write to it only when that write's
// simulated disk completion fires, so whatever is in a memStore is exactly
// what survives a crash. It is single-threaded like the rest of the
// simulation and validates every write as strictly as the real stores do,
// so a core that issues an invalid write is caught.
type memStore struct {
	start   uint64
	entries []storage.Entry // entries[i] has offset start+i; Data owned by the store
	epochs  []storage.EpochStart
	quorum  storage.QuorumState
	hw      uint64
	hwOK    bool
	closed  bool
}

var _ durable = (*memStore)(nil)

// durable is a node's durable store: what a crash leaves behind.
type durable interface {
	storage.Store
	// reopen models a process restart: the same durable contents through a
	// new handle; the old handle is closed.
	reopen() durable
}

// memoryStore adapts storage.Memory (made by NewMemory: every write is
// durable when it returns; the simulator applies writes only when their
// simulated disk completion fires).
type memoryStore struct{ *storage.Memory }

func (m memoryStore) reopen() durable { return memoryStore{m.Crash()} }

// newStore makes an empty durable store of the kind the run asks for.
func (s *sim) newStore() durable {
	if s.opts.LyingDisk {
		return memoryStore{storage.NewMemoryDeferred()}
	}
	if s.opts.Store == "sim" {
		return newMemStore()
	}
	return memoryStore{storage.NewMemory()}
}

// entryAt returns the entry at offset o of st, if it holds one.
func entryAt(st storage.Store, o uint64) (entryKey, bool) {
	if o < st.LogStart() || o >= st.LEO() {
		return entryKey{}, false
	}
	es, err := st.Entries(o, 1, 0)
	if err != nil || len(es) != 1 {
		return entryKey{}, false
	}
	return keyOf(es[0]), true
}

func newMemStore() *memStore { return &memStore{} }

func (s *memStore) leo() uint64 { return s.start + uint64(len(s.entries)) }

func (s *memStore) Append(entries []storage.Entry) error {
	if s.closed {
		return storage.ErrClosed
	}
	if len(entries) == 0 {
		return nil
	}
	last := s.LastEpoch()
	next := s.leo()
	for i, e := range entries {
		if e.Offset != next+uint64(i) {
			return fmt.Errorf("%w: entry %d has offset %d, want %d", storage.ErrInvalidAppend, i, e.Offset, next+uint64(i))
		}
		if e.Epoch < last {
			return fmt.Errorf("%w: offset %d has epoch %d below %d", storage.ErrInvalidAppend, e.Offset, e.Epoch, last)
		}
		if e.Type != storage.EntryData && e.Type != storage.EntryControl {
			return fmt.Errorf("%w: offset %d has type %s", storage.ErrInvalidAppend, e.Offset, e.Type)
		}
		last = e.Epoch
	}
	for _, e := range entries {
		if len(s.epochs) == 0 || e.Epoch > s.epochs[len(s.epochs)-1].Epoch {
			s.epochs = append(s.epochs, storage.EpochStart{Epoch: e.Epoch, StartOffset: e.Offset})
		}
		e.Data = append([]byte(nil), e.Data...)
		s.entries = append(s.entries, e)
	}
	return nil
}

func (s *memStore) TruncateSuffix(from uint64) error {
	if s.closed {
		return storage.ErrClosed
	}
	if from < s.start {
		return fmt.Errorf("%w: truncate at %d below log start %d", storage.ErrOutOfRange, from, s.start)
	}
	if from >= s.leo() {
		return nil
	}
	clear(s.entries[from-s.start:])
	s.entries = s.entries[:from-s.start]
	i := len(s.epochs)
	for i > 0 && s.epochs[i-1].StartOffset >= from {
		i--
	}
	s.epochs = s.epochs[:i]
	return nil
}

func (s *memStore) DeletePrefix(upTo uint64) error {
	if s.closed {
		return storage.ErrClosed
	}
	if upTo <= s.start {
		return nil
	}
	if upTo > s.leo() {
		return fmt.Errorf("%w: delete prefix to %d above LEO %d", storage.ErrOutOfRange, upTo, s.leo())
	}
	s.entries = append([]storage.Entry(nil), s.entries[upTo-s.start:]...)
	s.start = upTo
	// Keep the row covering upTo: drop rows wholly below it.
	i := 0
	for i+1 < len(s.epochs) && s.epochs[i+1].StartOffset <= upTo {
		i++
	}
	s.epochs = append([]storage.EpochStart(nil), s.epochs[i:]...)
	return nil
}

func (s *memStore) Entries(from uint64, maxCount int, maxBytes int) ([]storage.Entry, error) {
	if s.closed {
		return nil, storage.ErrClosed
	}
	leo := s.leo()
	if from == leo {
		return nil, nil
	}
	if from < s.start || from > leo {
		return nil, fmt.Errorf("%w: offset %d outside [%d, %d)", storage.ErrOutOfRange, from, s.start, leo)
	}
	var out []storage.Entry
	budget := storage.Budget{Max: maxBytes}
	for o := from; o < leo && (maxCount <= 0 || len(out) < maxCount); o++ {
		e := s.entries[o-s.start]
		if !budget.Take(len(e.Data)) {
			break
		}
		e.Data = append([]byte(nil), e.Data...)
		out = append(out, e)
	}
	return out, nil
}

func (s *memStore) LEO() uint64      { return s.leo() }
func (s *memStore) LogStart() uint64 { return s.start }

func (s *memStore) LastEpoch() uint64 {
	if len(s.epochs) == 0 {
		return 0
	}
	return s.epochs[len(s.epochs)-1].Epoch
}

func (s *memStore) EndOffsetForEpoch(epoch uint64) (uint64, uint64) {
	// The map is short (one row per epoch with entries): a backward scan.
	for i := len(s.epochs) - 1; i >= 0; i-- {
		if s.epochs[i].Epoch <= epoch {
			if i == len(s.epochs)-1 {
				return s.epochs[i].Epoch, s.leo()
			}
			return s.epochs[i].Epoch, s.epochs[i+1].StartOffset
		}
	}
	return 0, s.start
}

func (s *memStore) EpochMap() []storage.EpochStart {
	return append([]storage.EpochStart(nil), s.epochs...)
}

func (s *memStore) QuorumState() (storage.QuorumState, error) {
	if s.closed {
		return storage.QuorumState{}, storage.ErrClosed
	}
	return s.quorum, nil
}

func (s *memStore) SetQuorumState(q storage.QuorumState) error {
	if s.closed {
		return storage.ErrClosed
	}
	s.quorum = q
	return nil
}

func (s *memStore) HWCheckpoint() (uint64, bool, error) {
	if s.closed {
		return 0, false, storage.ErrClosed
	}
	return s.hw, s.hwOK, nil
}

func (s *memStore) SetHWCheckpoint(hw uint64) error {
	if s.closed {
		return storage.ErrClosed
	}
	if hw > s.leo() {
		return fmt.Errorf("%w: HW checkpoint %d above LEO %d", storage.ErrOutOfRange, hw, s.leo())
	}
	s.hw, s.hwOK = hw, true
	return nil
}

func (s *memStore) Close() error {
	s.closed = true
	return nil
}

// reopen models a process restart: the same durable contents, a new handle.
func (s *memStore) reopen() durable {
	n := *s
	n.closed = false
	s.closed = true
	return &n
}
