package replica

import (
	"cmp"
	"encoding/binary"
	"errors"
	"maps"
	"math"
	"slices"

	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/replica/internal/bugs"
)

// Checkpoints of the keyed-state table (docs/protocol.md R76). Rebuilding
// the table after a restart by reading the whole retained log costs time
// and page cache in proportion to the log; a checkpoint of the table as of
// offset O lets a restart replay [O, LEO) only. The core hands one out in
// Ready every Config.KeyCheckpointBytes of applied log; the shell gives it
// to the store, which keeps the newest apart from the log (any order, any
// crash: New checks it against the log before it uses it).

// KeyCheckpointReader is implemented by a LogReader that keeps the newest
// key checkpoint the shell gave it (storage.DirStore and storage.Memory).
// New reads it once; an error or none means a replay from the log start.
type KeyCheckpointReader interface {
	KeyCheckpoint() (cp protocol.KeyCheckpoint, ok bool, err error)
}

// keyCheckpointVersion is the first byte of KeyCheckpoint.Data. A replica
// ignores a checkpoint of another version (it replays the log instead), so
// the encoding may change in a later release without a storage format.
const keyCheckpointVersion = 2

// keyCheckpointVersionNoLogs is the version before the catalog of named
// logs (R80): no logs section, and undo records without a log's state. It
// is still read (a table of that release holds no named log).
const keyCheckpointVersionNoLogs = 1

// errBadKeyCheckpoint: the data does not decode (never written so by this
// package; a store returns what it was given, its own checksum aside).
var errBadKeyCheckpoint = errors.New("malformed key checkpoint")

// maybeKeyCheckpoint sets r.keyCkpt when the table, caught up with the
// log, has applied KeyCheckpointBytes since the last checkpoint.
func (r *Replica) maybeKeyCheckpoint() {
	t := &r.keys
	if r.cfg.KeyCheckpointBytes <= 0 || t.sinceCkpt < r.cfg.KeyCheckpointBytes ||
		t.applied != r.log.LEO() || t.applied <= r.log.logStart {
		return
	}
	t.sinceCkpt = 0
	r.keyCkpt = &protocol.KeyCheckpoint{Offset: t.applied, Epoch: r.log.epochAt(t.applied - 1), Data: t.encode()}
}

// restoreKeyCheckpoint loads the store's key checkpoint into the empty
// table if it describes this log (R76): its offset O above the log start
// and at most the LEO, and the log's entry at O-1 of the checkpoint's
// epoch. An entry of one epoch at one offset is the same entry in every
// log that holds it, and so is every entry below it (R-log matching): the
// log below O is the one the checkpoint was made from, though it may have
// been truncated and fetched again since. A truncation below O that was
// not followed by the same entries leaves another epoch at O-1 (re-appended
// in a later epoch) or a LEO below O; a deletion past O-1 leaves a log
// start above it. What the table holds of entries below the log start
// (retention deleted them since the checkpoint) is dropped, as a replay
// from the log start would never have seen it.
func (r *Replica) restoreKeyCheckpoint(log LogReader) {
	cr, ok := log.(KeyCheckpointReader)
	if !ok {
		return
	}
	cp, ok, err := cr.KeyCheckpoint()
	switch {
	case err != nil:
		r.logger.Warn("reading the key checkpoint; replaying the log instead", "error", err)
		return
	case !ok:
		return
	case cp.Epoch == 0 || cp.Offset <= r.log.logStart || cp.Offset > r.log.LEO() ||
		r.log.epochAt(cp.Offset-1) != cp.Epoch && !bugs.KeyCheckpointNoEpoch:
		r.logger.Info("key checkpoint of another log ignored", "offset", cp.Offset, "epoch", cp.Epoch,
			"log_start", r.log.logStart, "leo", r.log.LEO(), "log_epoch", r.log.epochAt(max(cp.Offset, 1)-1))
		return
	}
	t, err := decodeKeyTable(cp.Data)
	if err == nil && t.applied != cp.Offset {
		err = errBadKeyCheckpoint
	}
	if err != nil {
		r.logger.Warn("key checkpoint not decoded; replaying the log instead", "offset", cp.Offset, "error", err)
		return
	}
	t.dropBelow(r.log.logStart)
	t.completeFrom = r.keys.completeFrom // the log's, as a replay's (R82)
	t.waiting = r.keys.waiting
	r.keys = t
	r.restoredFrom, r.restored = cp.Offset, true
	r.logger.Debug("key checkpoint restored", "offset", cp.Offset, "producers", len(t.producers), "ids", len(t.ids), "cursors", len(t.cursors))
}

// KeyCheckpointRestored reports whether New rebuilt the keyed-state table
// from the store's key checkpoint (R76), and the checkpoint's offset: New
// replays the log from there instead of from the log start.
func (r *Replica) KeyCheckpointRestored() (offset uint64, ok bool) {
	return r.restoredFrom, r.restored
}

// dropBelow removes what only entries below start record: a replay from
// start holds none of it. A producer's sequence numbers recorded below
// start go (R66 moved the live ones' records above it), and so does the
// producer if its newest entry is below start; IDs, cursors and level rows
// recorded below start go. An undo record's previous state that only an
// entry below start recorded becomes none (for a producer: created).
func (t *keyTable) dropBelow(start uint64) {
	for pid, p := range t.producers {
		if p.at < start {
			delete(t.producers, pid)
			continue
		}
		for s, rec := range p.seqs {
			if rec.src < start {
				delete(p.seqs, s)
			}
		}
	}
	for id, s := range t.ids {
		if s.at < start {
			delete(t.ids, id)
		}
	}
	for name, c := range t.cursors {
		if c.at < start {
			delete(t.cursors, name)
		}
	}
	for name, l := range t.logs {
		if l.at < start {
			delete(t.logs, name)
		}
	}
	n := 0
	for n < len(t.levels) && t.levels[n].off < start {
		n++
	}
	t.levels = t.levels[n:]
	for i := range t.undo {
		u := &t.undo[i]
		if u.kind == protocol.StateProducer && !u.created && u.prevAt < start {
			u.created = true
		}
		for s, src := range u.moved {
			if src < start {
				delete(u.moved, s)
			}
		}
		if u.prevID != nil && u.prevID.at < start {
			u.prevID = nil
		}
		if u.prevCursor != nil && u.prevCursor.at < start {
			u.prevCursor = nil
		}
		if u.prevLog != nil && u.prevLog.at < start {
			u.prevLog = nil
		}
	}
}

// encode returns the table's checkpoint data: maps in key order, so that
// the same table gives the same bytes.
func (t *keyTable) encode() []byte {
	b := []byte{keyCheckpointVersion}
	b = binary.AppendUvarint(b, t.applied)
	b = binary.AppendUvarint(b, uint64(len(t.producers)))
	for _, pid := range slices.Sorted(maps.Keys(t.producers)) {
		p := t.producers[pid]
		b = binary.AppendUvarint(b, pid)
		b = binary.AppendUvarint(b, p.low)
		b = binary.AppendVarint(b, p.last)
		b = binary.AppendUvarint(b, p.at)
		b = binary.AppendUvarint(b, uint64(len(p.seqs)))
		for _, s := range slices.Sorted(maps.Keys(p.seqs)) {
			rec := p.seqs[s]
			b = binary.AppendUvarint(b, s)
			b = binary.AppendUvarint(b, rec.first)
			b = binary.AppendUvarint(b, rec.n)
			b = binary.AppendUvarint(b, rec.src)
		}
	}
	b = binary.AppendUvarint(b, uint64(len(t.ids)))
	for _, id := range slices.Sorted(maps.Keys(t.ids)) {
		b = appendString(b, id)
		b = appendIDState(b, t.ids[id])
	}
	b = binary.AppendUvarint(b, uint64(len(t.cursors)))
	for _, name := range slices.Sorted(maps.Keys(t.cursors)) {
		b = appendString(b, name)
		b = appendCursorState(b, t.cursors[name])
	}
	b = binary.AppendUvarint(b, uint64(len(t.levels)))
	for _, l := range t.levels {
		b = binary.AppendUvarint(b, l.off)
		b = binary.AppendVarint(b, int64(l.level))
	}
	b = binary.AppendUvarint(b, uint64(len(t.undo)))
	for i := range t.undo {
		b = appendUndo(b, &t.undo[i])
	}
	b = binary.AppendUvarint(b, t.undoFloor)
	b = binary.AppendUvarint(b, uint64(len(t.logs)))
	for _, name := range slices.Sorted(maps.Keys(t.logs)) {
		b = appendString(b, name)
		b = appendLogState(b, t.logs[name])
	}
	return b
}

func appendLogState(b []byte, l *logState) []byte {
	if l == nil {
		return append(b, 0)
	}
	b = append(b, 1)
	b = binary.AppendUvarint(b, l.created)
	b = binary.AppendUvarint(b, l.at)
	b = binary.AppendUvarint(b, uint64(len(l.spec)))
	return append(b, l.spec...)
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendIDState(b []byte, s *idState) []byte {
	if s == nil {
		return append(b, 0)
	}
	b = append(b, 1)
	b = binary.AppendUvarint(b, s.first)
	b = binary.AppendUvarint(b, s.n)
	b = binary.AppendVarint(b, s.time)
	return binary.AppendUvarint(b, s.at)
}

func appendCursorState(b []byte, c *cursorState) []byte {
	if c == nil {
		return append(b, 0)
	}
	b = append(b, 1)
	b = binary.AppendUvarint(b, c.next)
	return binary.AppendUvarint(b, c.at)
}

func appendUndo(b []byte, u *keyUndo) []byte {
	b = binary.AppendUvarint(b, u.off)
	b = append(b, byte(u.kind))
	var flags byte
	if u.created {
		flags |= 1
	}
	if u.hasAddedOne {
		flags |= 2
	}
	b = append(b, flags)
	b = binary.AppendUvarint(b, u.producer)
	b = binary.AppendVarint(b, u.prevLast)
	b = binary.AppendUvarint(b, u.prevAt)
	b = binary.AppendUvarint(b, u.addedOne)
	b = binary.AppendUvarint(b, uint64(len(u.added)))
	for _, s := range u.added {
		b = binary.AppendUvarint(b, s)
	}
	b = binary.AppendUvarint(b, uint64(len(u.moved)))
	for _, s := range slices.Sorted(maps.Keys(u.moved)) {
		b = binary.AppendUvarint(b, s)
		b = binary.AppendUvarint(b, u.moved[s])
	}
	b = appendString(b, u.name)
	b = appendIDState(b, u.prevID)
	b = appendCursorState(b, u.prevCursor)
	return appendLogState(b, u.prevLog)
}

// ckptReader decodes checkpoint data; the first failure sticks.
type ckptReader struct {
	b   []byte
	err error
}

func (d *ckptReader) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = errBadKeyCheckpoint
		return 0
	}
	d.b = d.b[n:]
	return v
}

// varint undoes binary.AppendVarint's zig-zag over uvarint.
func (d *ckptReader) varint() int64 {
	u := d.uvarint()
	return int64(u>>1) ^ -int64(u&1)
}

func (d *ckptReader) byte() byte {
	if d.err != nil || len(d.b) == 0 {
		d.err = errBadKeyCheckpoint
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

// count reads a length of items of at least min bytes each: more than the
// data left could hold is malformed (no allocation sized by a bad count).
func (d *ckptReader) count(min int) int {
	n := d.uvarint()
	if d.err == nil && n > uint64(len(d.b)/min) {
		d.err = errBadKeyCheckpoint
		return 0
	}
	return int(n)
}

func (d *ckptReader) string() string {
	n := d.count(1)
	if d.err != nil {
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

func (d *ckptReader) idState() *idState {
	if d.byte() == 0 {
		return nil
	}
	return &idState{first: d.uvarint(), n: d.uvarint(), time: d.varint(), at: d.uvarint()}
}

func (d *ckptReader) cursorState() *cursorState {
	if d.byte() == 0 {
		return nil
	}
	return &cursorState{next: d.uvarint(), at: d.uvarint()}
}

func (d *ckptReader) logState() *logState {
	if d.byte() == 0 {
		return nil
	}
	l := &logState{created: d.uvarint(), at: d.uvarint()}
	n := d.count(1)
	if d.err == nil {
		l.spec = slices.Clone(d.b[:n])
		d.b = d.b[n:]
	}
	return l
}

// decodeKeyTable is encode's inverse (of this version or the one before
// named logs).
func decodeKeyTable(data []byte) (keyTable, error) {
	d := &ckptReader{b: data}
	version := d.byte()
	if version != keyCheckpointVersion && version != keyCheckpointVersionNoLogs {
		return keyTable{}, errBadKeyCheckpoint
	}
	t := newKeyTable(d.uvarint())
	for range d.count(5) {
		pid := d.uvarint()
		p := &producerState{low: d.uvarint(), last: d.varint(), at: d.uvarint()}
		n := d.count(4)
		p.seqs = make(map[uint64]seqRecord, n)
		for range n {
			s := d.uvarint()
			p.seqs[s] = seqRecord{first: d.uvarint(), n: d.uvarint(), src: d.uvarint()}
		}
		t.producers[pid] = p
	}
	for range d.count(2) {
		id := d.string()
		if s := d.idState(); s != nil {
			t.ids[id] = s
		}
	}
	for range d.count(2) {
		name := d.string()
		if c := d.cursorState(); c != nil {
			t.cursors[name] = c
		}
	}
	for range d.count(2) {
		off, level := d.uvarint(), d.varint()
		if level < 0 || level > math.MaxInt32 {
			d.err = errBadKeyCheckpoint
		}
		t.levels = append(t.levels, levelRow{off: off, level: int(level)})
	}
	n := d.count(12)
	if n > 0 {
		t.undo = make([]keyUndo, 0, n)
	}
	for range n {
		u := keyUndo{off: d.uvarint(), kind: protocol.StateKind(d.byte())}
		flags := d.byte()
		u.created, u.hasAddedOne = flags&1 != 0, flags&2 != 0
		u.producer, u.prevLast, u.prevAt, u.addedOne = d.uvarint(), d.varint(), d.uvarint(), d.uvarint()
		for range d.count(1) {
			u.added = append(u.added, d.uvarint())
		}
		if m := d.count(2); m > 0 {
			u.moved = make(map[uint64]uint64, m)
			for range m {
				s := d.uvarint()
				u.moved[s] = d.uvarint()
			}
		}
		u.name, u.prevID, u.prevCursor = d.string(), d.idState(), d.cursorState()
		if version != keyCheckpointVersionNoLogs {
			u.prevLog = d.logState()
		}
		t.undo = append(t.undo, u)
	}
	t.undoArr = t.undo[:cap(t.undo)]
	t.undoFloor = t.applied // a version-1 table's undo records may start anywhere below
	if version != keyCheckpointVersionNoLogs {
		t.undoFloor = d.uvarint()
		for range d.count(2) {
			name := d.string()
			if l := d.logState(); l != nil {
				t.logs[name] = l
			}
		}
	}
	if d.err == nil && len(d.b) != 0 {
		d.err = errBadKeyCheckpoint
	}
	if d.err != nil {
		return keyTable{}, d.err
	}
	if !slices.IsSortedFunc(t.undo, func(a, b keyUndo) int { return cmp.Compare(a.off, b.off) }) {
		return keyTable{}, errBadKeyCheckpoint
	}
	return t, nil
}
