package simulation

import (
	"fmt"
	"slices"

	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/storage"
)

// Apply makes memStore a storage.Store now that the store's write API is
// Apply (every write of ws in order, all or nothing).
//
// temporary: added by the storage helper only to keep this package
// compiling; nothing in the simulation calls it yet. It goes when the
// simulation applies a Ready's writes with Store.Apply and memStore is
// replaced by storage.Memory (issue 10: one in-memory store).
func (s *memStore) Apply(ws []protocol.Write) error {
	if s.closed {
		return storage.ErrClosed
	}
	var saved *memStore
	if len(ws) > 1 { // one write validates before it changes anything
		c := *s
		c.entries, c.epochs = slices.Clone(s.entries), slices.Clone(s.epochs)
		saved = &c
	}
	for i := range ws {
		var err error
		switch w := &ws[i]; w.Kind {
		case protocol.WriteAppend:
			err = s.Append(w.Entries)
		case protocol.WriteTruncate:
			err = s.TruncateSuffix(w.Offset)
		case protocol.WriteDeletePrefix:
			err = s.DeletePrefix(w.Offset)
		case protocol.WriteQuorumState:
			err = s.SetQuorumState(w.Quorum)
		case protocol.WriteHWCheckpoint:
			err = s.SetHWCheckpoint(w.Offset)
		default:
			err = fmt.Errorf("%w: %v", storage.ErrInvalidWrite, w.Kind)
		}
		if err != nil {
			if saved != nil {
				*s = *saved
			}
			return err
		}
	}
	return nil
}
