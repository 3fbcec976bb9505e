package storage

import (
	"fmt"
	"slices"
	"sort"

	"github.com/replog-io/replog/protocol"
)

// logState is the small part of a store's state that both implementations
// keep in memory: offsets, the epoch map, the voter-set rows, the quorum
// state and the HW checkpoint. A published logState is never mutated (its
// epochs and voters slices included, and the voter sets they hold), so
// readers may hold it without locks; writers build a new one.
type logState struct {
	logStart uint64
	leo      uint64
	epochs   []protocol.EpochStart
	// voters holds one row per EntryVoters entry of the log, in offset
	// order, and at most two rows below the log start: of those a prefix
	// deletion removed, the newest (the set in force at the log start) and
	// the newest before it with another set (the newest change;
	// protocol.KeptVoterRows, docs/protocol.md R55).
	voters []protocol.VotersAt
	quorum protocol.QuorumState
	hw     uint64
	hwOK   bool
}

func (s *logState) lastEpoch() uint64 {
	if len(s.epochs) == 0 {
		return 0
	}
	return s.epochs[len(s.epochs)-1].Epoch
}

// after validates w against s and returns the state after it: s itself if
// w is a valid no-op, a new logState otherwise (s is never modified). The
// error wraps ErrInvalidAppend, ErrOutOfRange or ErrInvalidWrite (see
// Store.Apply).
func (s *logState) after(w *protocol.Write) (*logState, error) {
	switch w.Kind {
	case protocol.WriteAppend:
		rows, err := validateAppend(s, w.Entries)
		if err != nil || len(w.Entries) == 0 {
			return s, err
		}
		return s.afterAppend(w.Entries, rows), nil
	case protocol.WriteTruncate:
		if noop, err := s.checkTruncate(w.Offset); noop || err != nil {
			return s, err
		}
		return s.afterTruncate(w.Offset), nil
	case protocol.WriteDeletePrefix:
		if noop, err := s.checkDeletePrefix(w.Offset, w.Voters); noop || err != nil {
			return s, err
		}
		n := s.afterDeletePrefix(w.Offset, w.Epoch)
		if w.Voters != nil {
			n.setRowsBelowStart(w.Voters)
		}
		return n, nil
	case protocol.WriteQuorumState:
		n := *s
		n.quorum = w.Quorum
		return &n, nil
	case protocol.WriteHWCheckpoint:
		if err := s.checkHW(w.Offset); err != nil {
			return s, err
		}
		n := *s
		n.hw, n.hwOK = w.Offset, true
		return &n, nil
	}
	return s, fmt.Errorf("%w: %v", ErrInvalidWrite, w.Kind)
}

// writeErr returns the error of ws[i], naming its place in ws when ws holds
// more than one write (the error of a one-write Apply reads as before).
func writeErr(ws []protocol.Write, i int, err error) error {
	if len(ws) == 1 {
		return err
	}
	return fmt.Errorf("%w (write %d of %d, %v)", err, i+1, len(ws), ws[i].Kind)
}

// validateAppend checks entries against s (see Store.Apply) and returns
// the voter-set rows their EntryVoters entries add (decoded once, here).
// It allows an empty slice.
func validateAppend(s *logState, entries []protocol.Entry) ([]protocol.VotersAt, error) {
	last := s.lastEpoch()
	var rows []protocol.VotersAt
	for i := range entries {
		e := &entries[i]
		if want := s.leo + uint64(i); e.Offset != want {
			return nil, fmt.Errorf("%w: entry %d has offset %d, want %d", ErrInvalidAppend, i, e.Offset, want)
		}
		if e.Epoch == 0 {
			return nil, fmt.Errorf("%w: entry at offset %d has epoch 0 (epochs start at 1)", ErrInvalidAppend, e.Offset)
		}
		if e.Epoch < last {
			return nil, fmt.Errorf("%w: entry at offset %d has epoch %d below epoch %d", ErrInvalidAppend, e.Offset, e.Epoch, last)
		}
		last = e.Epoch
		if !e.Type.Known() {
			return nil, fmt.Errorf("%w: entry at offset %d has %v", ErrInvalidAppend, e.Offset, e.Type)
		}
		if e.Type == protocol.EntryVoters {
			vs, owed, err := protocol.DecodeVoterSet(e.Data)
			if err != nil {
				return nil, fmt.Errorf("%w: voters entry at offset %d: %w", ErrInvalidAppend, e.Offset, err)
			}
			rows = append(rows, protocol.VotersAt{Offset: e.Offset, Voters: vs, Owed: owed})
		}
	}
	return rows, nil
}

// afterAppend returns the state after appending validated entries, with
// rows, the voter-set rows validateAppend returned for them.
func (s *logState) afterAppend(entries []protocol.Entry, rows []protocol.VotersAt) *logState {
	n := *s
	if len(entries) == 0 {
		return &n
	}
	if len(rows) > 0 {
		// The capacity limit makes append copy: published slices are
		// never mutated.
		n.voters = append(s.voters[:len(s.voters):len(s.voters)], rows...)
	}
	last, copied := s.lastEpoch(), false
	for i := range entries {
		if e := &entries[i]; e.Epoch > last {
			if !copied { // published slices are never mutated
				n.epochs, copied = cloneEpochs(s.epochs), true
			}
			if k := len(n.epochs) - 1; k >= 0 && n.epochs[k].StartOffset == e.Offset {
				// The last row starts at the LEO and covers no entry (a
				// prefix deletion up to the LEO kept it): the new epoch
				// replaces it, as Kafka's epoch cache does, so that start
				// offsets stay strictly increasing.
				n.epochs = n.epochs[:k]
			}
			n.epochs = append(n.epochs, protocol.EpochStart{Epoch: e.Epoch, StartOffset: e.Offset})
			last = e.Epoch
		}
	}
	n.leo = s.leo + uint64(len(entries))
	return &n
}

// checkTruncate validates a truncation to from; noop reports from ≥ LEO.
func (s *logState) checkTruncate(from uint64) (noop bool, err error) {
	if from >= s.leo {
		return true, nil
	}
	if from < s.logStart {
		return false, fmt.Errorf("%w: truncate to %d below log start %d", ErrOutOfRange, from, s.logStart)
	}
	return false, nil
}

// afterTruncate returns the state after a valid, non-noop truncation.
// An HW checkpoint above from is lowered to from, so that a checkpoint is
// never above the LEO (the protocol never truncates below its HW; if it
// does, that is its bug to report, and the store keeps its own invariant).
func (s *logState) afterTruncate(from uint64) *logState {
	n := *s
	n.leo = from
	if n.hwOK && n.hw > from {
		n.hw = from
	}
	i := sort.Search(len(s.epochs), func(i int) bool { return s.epochs[i].StartOffset >= from })
	if i == 0 && from == s.logStart && from > 0 && len(s.epochs) > 0 {
		// The first row starting at a non-zero log start covers the
		// entries below it that retention deleted (R52) or the leader's
		// below a reset (R53): it stays, so that the emptied log compares
		// in elections as before (R21).
		i = 1
	}
	n.epochs = s.epochs[:i:i]
	// A truncation below a voters entry brings back the set before it (R55).
	j := sort.Search(len(s.voters), func(j int) bool { return s.voters[j].Offset >= from })
	n.voters = s.voters[:j:j]
	return &n
}

// checkDeletePrefix validates a prefix deletion up to upTo, with the
// voter-set rows it sets below upTo (if not nil); noop reports upTo ≤ log
// start. Every upTo is valid: above the LEO it empties the log (a
// follower's reset to its leader's log start). Rows must be below upTo,
// in offset order, at most two, with valid sets.
func (s *logState) checkDeletePrefix(upTo uint64, rows []protocol.VotersAt) (noop bool, err error) {
	if len(rows) > 2 {
		return false, fmt.Errorf("%w: prefix deletion to %d with %d voter-set rows below it (at most 2)", ErrInvalidWrite, upTo, len(rows))
	}
	for i, r := range rows {
		if r.Offset >= upTo || i > 0 && r.Offset <= rows[i-1].Offset {
			return false, fmt.Errorf("%w: prefix deletion to %d with voter-set row at offset %d out of order or not below it", ErrInvalidWrite, upTo, r.Offset)
		}
		if err := protocol.ValidateVoterSet(r.Voters, r.Owed); err != nil {
			return false, fmt.Errorf("%w: prefix deletion to %d, voter-set row at offset %d: %w", ErrInvalidWrite, upTo, r.Offset, err)
		}
	}
	return upTo <= s.logStart, nil
}

// setRowsBelowStart replaces the voter-set rows below the log start with
// copies of rows (validated by checkDeletePrefix).
func (s *logState) setRowsBelowStart(rows []protocol.VotersAt) {
	k := sort.Search(len(s.voters), func(k int) bool { return s.voters[k].Offset >= s.logStart })
	n := make([]protocol.VotersAt, 0, len(rows)+len(s.voters)-k)
	n = append(n, cloneVoters(rows)...)
	s.voters = append(n, s.voters[k:]...)
}

// afterDeletePrefix returns the state after a valid, non-noop prefix
// deletion.
// Rows wholly below upTo go; the row covering upTo stays with its start
// moved up to upTo (as Kafka's truncateFromStart does), so every row starts
// at or above the log start. Of the voter-set rows below upTo the newest
// stays, even when the log is emptied: it is the set in force at the log
// start, which retention must never forget; so does the newest before it
// with another set, the newest change (protocol.KeptVoterRows, R55).
func (s *logState) afterDeletePrefix(upTo, epoch uint64) *logState {
	n := *s
	n.logStart = upTo
	if kept := protocol.KeptVoterRows(s.voters, upTo); len(kept) != len(s.voters) {
		n.voters = kept[:len(kept):len(kept)]
	}
	if upTo > s.leo || epoch != 0 && upTo == s.leo {
		// Kafka's truncateFullyAndStartAt: nothing is left, and none of
		// this log's rows may stay (the entries that come next bring their
		// own epochs, which may be below this log's last one: those
		// entries were never committed here). A reset's epoch, the
		// leader's below upTo, is the one row (Write.Epoch).
		n.leo = upTo
		n.epochs = nil
		if epoch != 0 {
			n.epochs = []protocol.EpochStart{{Epoch: epoch, StartOffset: upTo}}
		}
		return &n
	}
	// i = index of the last row starting at or below upTo (the covering row).
	i := sort.Search(len(s.epochs), func(i int) bool { return s.epochs[i].StartOffset > upTo }) - 1
	if i < 0 {
		return &n
	}
	rows := make([]protocol.EpochStart, len(s.epochs)-i)
	copy(rows, s.epochs[i:])
	rows[0].StartOffset = upTo
	n.epochs = rows
	return &n
}

// checkHW validates an HW checkpoint of hw.
func (s *logState) checkHW(hw uint64) error {
	if hw > s.leo {
		return fmt.Errorf("%w: HW checkpoint %d above LEO %d", ErrOutOfRange, hw, s.leo)
	}
	return nil
}

// endOffsetForEpoch implements Store.EndOffsetForEpoch on s.
func (s *logState) endOffsetForEpoch(epoch uint64) (uint64, uint64) {
	// i = index of the largest row with Epoch ≤ epoch.
	i := sort.Search(len(s.epochs), func(i int) bool { return s.epochs[i].Epoch > epoch }) - 1
	if i < 0 {
		return 0, s.logStart
	}
	if i+1 < len(s.epochs) {
		return s.epochs[i].Epoch, s.epochs[i+1].StartOffset
	}
	return s.epochs[i].Epoch, s.leo
}

// epochAt returns the epoch the map gives for offset (0 if no row covers it).
func epochAt(epochs []protocol.EpochStart, offset uint64) uint64 {
	i := sort.Search(len(epochs), func(i int) bool { return epochs[i].StartOffset > offset }) - 1
	if i < 0 {
		return 0
	}
	return epochs[i].Epoch
}

// checkEpochs validates the shape of an epoch map loaded from disk: epochs
// and start offsets strictly increasing, every start within [logStart, leo].
func checkEpochs(epochs []protocol.EpochStart, logStart, leo uint64) error {
	for i, r := range epochs {
		if r.Epoch == 0 {
			return fmt.Errorf("%w: epoch map row %d has epoch 0", ErrCorrupt, i)
		}
		if r.StartOffset < logStart || r.StartOffset > leo {
			return fmt.Errorf("%w: epoch map row (%d, %d) outside [%d, %d]", ErrCorrupt, r.Epoch, r.StartOffset, logStart, leo)
		}
		if i > 0 && (r.Epoch <= epochs[i-1].Epoch || r.StartOffset <= epochs[i-1].StartOffset) {
			return fmt.Errorf("%w: epoch map rows (%d, %d) and (%d, %d) out of order", ErrCorrupt,
				epochs[i-1].Epoch, epochs[i-1].StartOffset, r.Epoch, r.StartOffset)
		}
	}
	return nil
}

// checkVoters validates the voter-set rows loaded from disk: offsets
// strictly increasing and below leo, at most two below logStart (the set
// in force there and the newest change before it; R55).
func checkVoters(rows []protocol.VotersAt, logStart, leo uint64) error {
	for i, r := range rows {
		if r.Offset >= leo {
			return fmt.Errorf("%w: voter-set row at offset %d at or above the LEO %d", ErrCorrupt, r.Offset, leo)
		}
		if i > 0 && r.Offset <= rows[i-1].Offset {
			return fmt.Errorf("%w: voter-set rows at offsets %d and %d out of order", ErrCorrupt, rows[i-1].Offset, r.Offset)
		}
		if i > 1 && rows[i-2].Offset < logStart && r.Offset < logStart {
			return fmt.Errorf("%w: voter-set rows at offsets %d, %d and %d all below the log start %d", ErrCorrupt, rows[i-2].Offset, rows[i-1].Offset, r.Offset, logStart)
		}
	}
	return nil
}

// cloneVoters returns a copy of rows whose voter sets are copies too (the
// caller may change anything in it).
func cloneVoters(rows []protocol.VotersAt) []protocol.VotersAt {
	if len(rows) == 0 {
		return nil
	}
	out := make([]protocol.VotersAt, len(rows))
	for i, r := range rows {
		out[i] = protocol.VotersAt{Offset: r.Offset, Voters: slices.Clone(r.Voters), Owed: slices.Clone(r.Owed)}
	}
	return out
}

func cloneEpochs(e []protocol.EpochStart) []protocol.EpochStart {
	if len(e) == 0 {
		return nil
	}
	return append([]protocol.EpochStart(nil), e...)
}
