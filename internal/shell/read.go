package shell

import (
	"fmt"

	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/storage"
)

// Store is the read side of a store that a reader uses; every
// storage.Store has it.
type Store interface {
	LogStart() uint64
	LEO() uint64
	Entries(from uint64, maxCount, maxBytes int) ([]protocol.Entry, error)
}

// Batch is one step of a reader.
type Batch struct {
	// Entries are the data entries the reader sees, in offset order;
	// control entries are passed over (offsets have gaps where they sit).
	Entries []protocol.Entry
	// Next is where the reader continues: one past the last offset the
	// batch passed, control entries included.
	Next uint64
	// Keys are the entry keys of Entries (docs/protocol.md R102), index
	// for index, or nil when none of them has one (Key reads it).
	Keys []string
}

// Key returns the entry key of b.Entries[i] ("" if none).
func (b *Batch) Key(i int) string {
	if b.Keys == nil {
		return ""
	}
	return b.Keys[i]
}

// ReadBatch is the reader view: one batch of what a reader at offset from
// may see in store s when limit bounds it (the readable HW, or less when
// the reader has an upper bound of its own): at most maxCount entries and
// about maxBytes, all below limit. from must be below limit.
//
// Errors: one wrapping storage.ErrOutOfRange when from is below the log
// start; the store's error (wrapped, naming the offset; storage.ErrClosed
// or storage.ErrCorrupt among them); an internal error when the store ends
// at or before from, which would mean limit passed the durable log.
func ReadBatch(s Store, from, limit uint64, maxCount, maxBytes int) (Batch, error) {
	if start := s.LogStart(); from < start {
		return Batch{}, fmt.Errorf("%w: offset %d is below the log start %d", storage.ErrOutOfRange, from, start)
	}
	ents, err := s.Entries(from, maxCount, maxBytes)
	if err != nil {
		return Batch{}, fmt.Errorf("replog: read at offset %d: %w", from, err)
	}
	if len(ents) == 0 {
		// The readable HW never passes the durable log; if it did, say
		// so rather than spin.
		return Batch{}, fmt.Errorf("replog: internal error: readable high watermark %d is above the stored log end %d", limit, s.LEO())
	}
	b := Batch{Next: from}
	for _, e := range ents {
		if e.Offset >= limit {
			break
		}
		b.Next = e.Offset + 1
		if !e.Type.Visible() {
			continue
		}
		var key string
		if e.Type == protocol.EntryKeyed {
			// Readers see the record and its entry key (R102), not the
			// batch's key header (R61).
			key, e.Data = protocol.EntryKeyOf(e)
			e.Type = protocol.EntryData
		}
		if key != "" && b.Keys == nil {
			b.Keys = make([]string, len(b.Entries), len(ents))
		}
		if b.Keys != nil {
			b.Keys = append(b.Keys, key)
		}
		b.Entries = append(b.Entries, e)
	}
	return b, nil
}
