package simulation

import (
	"github.com/replog-io/replog/storage"
)

// durable is a node's durable store: what a crash leaves behind.
type durable interface {
	storage.Store
	storage.KeyCheckpointStore
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
