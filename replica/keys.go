package replica

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/replica/internal/bugs"
)

// The keyed-state table (docs/protocol.md R62): producers, caller IDs and
// cursors, derived from the log alone. Every replica builds it by applying
// its log's keyed entries in offset order (its own appends and fetched ones
// alike), undoes what a truncation removes, and rebuilds it after a restart
// by reading its log in bounded steps per round: from its newest
// checkpoint (R76, keyckpt.go) if the store keeps one that describes the
// log, else from the log start. The
// leader decides duplicates from it (producers.go), and keeps every live
// key above its log start (R66).

// keyCatchUpBytes bounds what one round reads to rebuild the table after a
// restart: a long log costs rounds, never one long round.
const keyCatchUpBytes = 4 << 20

// keySweepInterval is how often (core time) expired keys are looked for.
const keySweepInterval = 10 * time.Second

// maxCopyBytes bounds the state records of one copy entry (R66).
const maxCopyBytes = 64 << 10

type producerState struct {
	low  uint64
	last int64  // last activity, ms (entry time)
	at   uint64 // offset of its newest entry
	// seqs are the producer's sequence numbers at or above low, each with
	// its batch and the offset of the entry that records it (src: the
	// batch's last entry, or a copy).
	seqs map[uint64]seqRecord
}

type seqRecord struct {
	first, n uint64
	src      uint64
}

type idState struct {
	first, n uint64
	time     int64
	at       uint64
}

type cursorState struct {
	next uint64
	at   uint64
}

// keyUndo undoes what the entry at off did to one key.
type keyUndo struct {
	off  uint64
	kind protocol.StateKind
	// producer: its ID, whether the entry created it, its last activity
	// and newest entry before, the sequence numbers the entry added, and
	// the sources the entry (a copy) moved.
	created bool
	// hasAddedOne: addedOne is the one sequence number a keyed batch adds
	// (no slice to allocate on the append path).
	hasAddedOne bool
	producer    uint64
	prevLast    int64
	prevAt      uint64
	added       []uint64
	addedOne    uint64
	moved       map[uint64]uint64
	// ID, cursor or named log: its name and value before (nil: none).
	name       string
	prevID     *idState
	prevCursor *cursorState
	prevLog    *logState
}

type keyTable struct {
	// budgeted says the last catch-up stopped at keyCatchUpBytes, not
	// at the LEO or a read error: the next round goes on (NextDeadline
	// says it is due at once; a failed read waits for an event instead
	// of spinning the loop).
	budgeted  bool
	producers map[uint64]*producerState
	ids       map[string]*idState
	cursors   map[string]*cursorState
	// logs is the catalog of named logs (R80), uncommitted entries
	// included. logsDirty says a change to it may have reached the
	// readable HW since the catalog was last published (or the table is
	// new); completeFrom is the lowest readable HW from which the table
	// holds every live log (R82: unknownCompleteness until a leader's
	// answer or this replica's own leadership tells).
	logs         map[string]*logState
	logsDirty    bool
	completeFrom uint64
	// undoFloor: the undo records hold every change of the entries at or
	// above it (those below were dropped, or are not in a restored
	// checkpoint), so the table as of any offset from it on can be told.
	undoFloor uint64
	// undo holds, in offset order, how to undo the changes of entries at or
	// above the readable HW (a truncation never reaches below it, R33).
	// undoArr is its whole array: records are dropped from the front
	// every round and added at the back with every keyed entry, and
	// pushUndo moves the live ones down to reuse the array rather than
	// allocate a new one.
	undo    []keyUndo
	undoArr []keyUndo
	// levels has one row per EntryFeature entry applied (R68), in offset
	// order: the cluster feature level rides on the table's rebuild and
	// undo, though it is not a key.
	levels []levelRow
	// applied: the entries below it are in the table.
	applied uint64
	// sinceCkpt counts the bytes applied since the last key checkpoint
	// (R76), as keyCatchUpBytes counts them.
	sinceCkpt int
	// waiting are keyed proposals a leader holds until the table has caught
	// up with its log (R62).
	waiting   []heldProposal
	nextSweep time.Time
}

func newKeyTable(start uint64) keyTable {
	t := keyTable{
		producers:    make(map[uint64]*producerState),
		ids:          make(map[string]*idState),
		cursors:      make(map[string]*cursorState),
		logs:         make(map[string]*logState),
		logsDirty:    true,
		completeFrom: unknownCompleteness,
		undoFloor:    start,
		applied:      start,
	}
	if start == 0 || bugs.CatalogTrustsRebuild {
		// A log that never lost a prefix: a replay from it sees every
		// change (R82).
		t.completeFrom = 0
	}
	return t
}

// keyedEntry reports whether entries of type t may change the table.
func keyedEntry(t protocol.EntryType) bool {
	return t == protocol.EntryKeyed || t == protocol.EntryState
}

// keysAppended applies entries just added at the LEO, if the table has
// caught up with them (else the catch-up reads them later).
func (r *Replica) keysAppended(entries []protocol.Entry) {
	if len(entries) == 0 || r.keys.applied != entries[0].Offset {
		return
	}
	for i := range entries {
		r.keys.apply(&entries[i], r.logger)
	}
	r.keys.applied = entries[len(entries)-1].Offset + 1
}

// keysTruncated undoes what the entries at or above to did (R62).
func (r *Replica) keysTruncated(to uint64) {
	t := &r.keys
	for len(t.undo) > 0 && t.undo[len(t.undo)-1].off >= to {
		t.undoOne(t.undo[len(t.undo)-1])
		t.undo = t.undo[:len(t.undo)-1]
	}
	for len(t.levels) > 0 && t.levels[len(t.levels)-1].off >= to {
		t.levels = t.levels[:len(t.levels)-1]
	}
	t.applied = min(t.applied, to)
	if t.completeFrom != unknownCompleteness {
		// What made the table whole (copies of live logs, R82) is
		// committed: a truncation keeps it, below to.
		t.completeFrom = min(t.completeFrom, to)
	}
}

// keysReset empties the table: the log restarts at start (R53). What a
// live key needs is above the leader's log start (R66) and comes with the
// fetches.
func (r *Replica) keysReset(start uint64) {
	waiting := r.keys.waiting
	r.keys = newKeyTable(start)
	r.keys.waiting = waiting
}

// keysCatchUp reads what the table has not applied yet (after a restart),
// at most keyCatchUpBytes per call, drops undo records below the readable
// HW and, now and then, expired keys. It reports whether the table covers
// the whole log.
func (r *Replica) keysCatchUp() bool {
	t := &r.keys
	t.applied = max(t.applied, r.log.logStart)
	budget := keyCatchUpBytes
	t.budgeted = false
	for t.applied < r.log.LEO() && budget > 0 {
		es, err := r.log.read(t.applied, budget)
		if err != nil || len(es) == 0 {
			r.logger.Error("reading the log to rebuild the keyed state", "offset", t.applied, "error", err)
			return false
		}
		for i := range es {
			t.apply(&es[i], r.logger)
			budget -= len(es[i].Data) + protocol.EntryOverhead
		}
		t.applied = es[len(es)-1].Offset + 1
	}
	t.budgeted = t.applied < r.log.LEO() && !bugs.DeadlineIgnoresKeyCatchUp
	floor := min(r.hw, r.log.durableEnd)
	n := 0
	for n < len(t.undo) && t.undo[n].off < floor {
		if t.undo[n].kind == protocol.StateLog {
			t.logsDirty = true // a log change became readable (R80)
		}
		n++
	}
	if n > 0 {
		clear(t.undo[:n])
		t.undo = t.undo[n:]
	}
	t.undoFloor = max(t.undoFloor, floor)
	// Level rows below the floor cannot be truncated either: the newest
	// of them is all the level needs (retention's copies would otherwise
	// add a row per deletion for ever).
	n = 0
	for n+1 < len(t.levels) && t.levels[n+1].off < floor {
		n++
	}
	if n > 0 {
		t.levels = append(t.levels[:0], t.levels[n:]...)
	}
	r.publishCatalog(floor)
	if !r.now.Before(t.nextSweep) {
		t.nextSweep = r.now.Add(keySweepInterval)
		r.sweepExpiredKeys()
	}
	r.maybeKeyCheckpoint()
	return t.applied >= r.log.LEO()
}

// apply changes the table as entry e says.
func (t *keyTable) apply(e *protocol.Entry, logger interface {
	Warn(string, ...any)
}) {
	t.sinceCkpt += len(e.Data) + protocol.EntryOverhead
	if e.Type == protocol.EntryFeature {
		t.applyLevel(e, logger)
		return
	}
	if !keyedEntry(e.Type) || e.Type == protocol.EntryKeyed && protocol.KeyedPart(e.Data) {
		return // not keyed, or a keyed batch's entry before its last
	}
	hb, rest, err := protocol.SplitKeyed(e.Data)
	if err != nil {
		logger.Warn("malformed keyed entry", "offset", e.Offset, "error", err)
		return
	}
	keyed := len(hb) > 0
	if keyed {
		h, err := protocol.DecodeKeyHeader(hb)
		if err != nil || h.N > e.Offset+1 {
			logger.Warn("malformed key header", "offset", e.Offset, "error", err)
			return
		}
		first := e.Offset + 1 - h.N
		if h.Producer != 0 {
			t.applyProducer(e.Offset, h.Producer, h.Low, e.Time, []protocol.SeqAt{{Seq: h.Seq, First: first, N: h.N}}, false)
		}
		if h.ID != "" {
			t.setID(e.Offset, h.ID, &idState{first: first, n: h.N, time: e.Time, at: e.Offset})
		}
	}
	if e.Type != protocol.EntryState {
		return
	}
	rs, err := protocol.DecodeStateRecords(rest)
	if err != nil {
		logger.Warn("malformed state entry", "offset", e.Offset, "error", err)
		return
	}
	for _, rec := range rs {
		switch rec.Kind {
		case protocol.StateCursor:
			t.pushUndo(keyUndo{off: e.Offset, kind: protocol.StateCursor, name: rec.Name, prevCursor: t.cursors[rec.Name]})
			t.cursors[rec.Name] = &cursorState{next: rec.Next, at: e.Offset}
		case protocol.StateProducer:
			t.applyProducer(e.Offset, rec.Producer, rec.Low, rec.Time, rec.Seqs, true)
		case protocol.StateID:
			t.setID(e.Offset, rec.Name, &idState{first: rec.First, n: rec.N, time: rec.Time, at: e.Offset})
		case protocol.StateLog:
			t.applyLog(e.Offset, rec, keyed)
		}
	}
}

func (t *keyTable) setID(off uint64, id string, s *idState) {
	t.pushUndo(keyUndo{off: off, kind: protocol.StateID, name: id, prevID: t.ids[id]})
	t.ids[id] = s
}

// applyProducer records seqs of producer pid at off (copy: a copy of its
// state, whose records now live at off). Low only rises and is never
// undone: the producer's promise not to retry below it holds whether or
// not the entry that carried it survives.
func (t *keyTable) applyProducer(off, pid, low uint64, last int64, seqs []protocol.SeqAt, copy bool) {
	p := t.producers[pid]
	u := keyUndo{off: off, kind: protocol.StateProducer, producer: pid}
	if p == nil {
		p = &producerState{seqs: make(map[uint64]seqRecord)}
		t.producers[pid] = p
		u.created = true
	}
	u.prevLast, u.prevAt = p.last, p.at
	if low > p.low {
		// Sequence numbers below low are dead (never looked up: R63 checks
		// low first): dropped as low passes them, one by one (each is
		// dropped once: amortised O(1) per entry, no sweep of the map),
		// or by a sweep when low jumps further than the map is long.
		if low-p.low <= uint64(len(p.seqs)) {
			for s := p.low; s < low; s++ {
				delete(p.seqs, s)
			}
		} else {
			for s := range p.seqs {
				if s < low {
					delete(p.seqs, s)
				}
			}
		}
		p.low = low
	}
	for _, s := range seqs {
		if s.Seq < p.low {
			continue
		}
		if old, ok := p.seqs[s.Seq]; ok {
			if copy && old.src != off {
				if u.moved == nil {
					u.moved = make(map[uint64]uint64)
				}
				u.moved[s.Seq] = old.src
				old.src = off
				p.seqs[s.Seq] = old
			}
			continue
		}
		p.seqs[s.Seq] = seqRecord{first: s.First, n: s.N, src: off}
		if !copy {
			u.addedOne, u.hasAddedOne = s.Seq, true
		} else {
			u.added = append(u.added, s.Seq)
		}
	}
	p.last = max(p.last, last)
	p.at = off
	t.pushUndo(u)
}

// pushUndo appends u to t.undo; when the array is full and the records
// dropped from its front left at least half of it free, the live ones move
// down instead of to a new array (amortised O(1), no allocation in a
// steady stream of keyed entries).
func (t *keyTable) pushUndo(u keyUndo) {
	if len(t.undo) == cap(t.undo) && 2*len(t.undo) <= cap(t.undoArr) && len(t.undoArr) > 0 {
		n := copy(t.undoArr[:cap(t.undoArr)], t.undo)
		clear(t.undoArr[n:cap(t.undoArr)])
		t.undo = t.undoArr[:n]
	}
	if len(t.undo) == cap(t.undo) {
		t.undo = append(t.undo, u)
		t.undoArr = t.undo[:cap(t.undo)]
		return
	}
	t.undo = append(t.undo, u)
}

func (t *keyTable) undoOne(u keyUndo) {
	switch u.kind {
	case protocol.StateCursor:
		if u.prevCursor == nil {
			delete(t.cursors, u.name)
		} else {
			t.cursors[u.name] = u.prevCursor
		}
	case protocol.StateID:
		if u.prevID == nil {
			delete(t.ids, u.name)
		} else {
			t.ids[u.name] = u.prevID
		}
	case protocol.StateLog:
		if u.prevLog == nil {
			delete(t.logs, u.name)
		} else {
			t.logs[u.name] = u.prevLog
		}
	case protocol.StateProducer:
		p := t.producers[u.producer]
		if p == nil {
			return
		}
		if u.created {
			delete(t.producers, u.producer)
			return
		}
		for _, s := range u.added {
			delete(p.seqs, s)
		}
		if u.hasAddedOne {
			delete(p.seqs, u.addedOne)
		}
		for s, src := range u.moved {
			if rec, ok := p.seqs[s]; ok {
				rec.src = src
				p.seqs[s] = rec
			}
		}
		p.last, p.at = u.prevLast, u.prevAt
	}
}

// anchor is the oldest offset whose entry the producer's state still needs:
// the entries that record its sequence numbers at or above low. A producer
// with none has nothing a retry could need (ok false): every append it made
// was answered, and a late copy of an old request is refused by R47's epoch
// rule, not by the producer's state.
func (p *producerState) anchor() (a uint64, ok bool) {
	a = p.at
	for seq, s := range p.seqs {
		if seq >= p.low {
			a, ok = min(a, s.src), true
		}
	}
	return a, ok
}

// producerExpired and idExpired say whether a key is no longer live at now
// (R66): a producer idle for ProducerIdleTimeout, an ID older than
// DedupWindow. Cursors never expire.
func (r *Replica) producerExpired(p *producerState) bool {
	return r.now.UnixMilli()-p.last >= r.cfg.ProducerIdleTimeout.Milliseconds()
}

func (r *Replica) idExpired(s *idState) bool {
	return r.now.UnixMilli()-s.time >= r.cfg.DedupWindow.Milliseconds()
}

// sweepExpiredKeys drops expired keys whose newest entry is committed (a
// truncation could not bring back a newer one, R33).
func (r *Replica) sweepExpiredKeys() {
	t := &r.keys
	for pid, p := range t.producers {
		if p.at < r.hw && r.producerExpired(p) {
			delete(t.producers, pid)
		}
	}
	for id, s := range t.ids {
		if s.at < r.hw && r.idExpired(s) {
			delete(t.ids, id)
		}
	}
}

// keepLiveKeys is the leader's part of R66 before a deletion up to upTo:
// it appends copies of the live keys whose state needs an entry below
// upTo, and returns how far the deletion may go: never past an entry a
// live key needs, as far as what is committed says (an uncommitted copy
// does not count until it commits; the next request moves on).
func (r *Replica) keepLiveKeys(upTo uint64) uint64 {
	t := &r.keys
	if t.applied < r.log.LEO() {
		return r.log.logStart // not caught up: the table cannot tell yet
	}
	bound := upTo
	var recs []protocol.StateRecord
	for pid, p := range t.producers {
		a, ok := p.anchor()
		if !ok || r.producerExpired(p) {
			continue
		}
		bound = min(bound, a)
		if a < upTo {
			rec := protocol.StateRecord{Kind: protocol.StateProducer, Producer: pid, Low: p.low, Time: p.last}
			for s, sr := range p.seqs {
				if s >= p.low {
					rec.Seqs = append(rec.Seqs, protocol.SeqAt{Seq: s, First: sr.first, N: sr.n})
				}
			}
			recs = append(recs, rec)
		}
	}
	for id, s := range t.ids {
		if r.idExpired(s) {
			continue
		}
		bound = min(bound, s.at)
		if s.at < upTo {
			recs = append(recs, protocol.StateRecord{Kind: protocol.StateID, Name: id, First: s.first, N: s.n, Time: s.time})
		}
	}
	for name, c := range t.cursors {
		bound = min(bound, c.at)
		if c.at < upTo {
			recs = append(recs, protocol.StateRecord{Kind: protocol.StateCursor, Name: name, Next: c.next})
		}
	}
	for name, l := range t.logs { // R81: a live log's record, never a deleted one's
		bound = min(bound, l.at)
		if l.at < upTo {
			recs = append(recs, protocol.StateRecord{Kind: protocol.StateLog, Name: name, First: l.created, Data: l.spec})
		}
	}
	// What uncommitted entries changed may still be undone: the offsets
	// they replaced bound the deletion until they commit.
	for _, u := range t.undo {
		if u.off < r.hw {
			continue
		}
		if u.kind == protocol.StateProducer && !u.created {
			bound = min(bound, u.prevAt)
		}
		for _, src := range u.moved {
			bound = min(bound, src)
		}
		if u.prevID != nil {
			bound = min(bound, u.prevID.at)
		}
		if u.prevCursor != nil {
			bound = min(bound, u.prevCursor.at)
		}
		if u.prevLog != nil {
			bound = min(bound, u.prevLog.at)
		}
	}
	if len(recs) > 0 && !r.transferring() {
		sortStateRecords(recs)
		r.appendStateCopies(recs)
	}
	return r.keepFeatureLevel(upTo, bound)
}

// sortStateRecords puts copies gathered from the table's maps in one order
// (kind, then producer or name, a producer's sequence numbers ascending):
// the entries a leader appends must not depend on map iteration order, or
// the same inputs would give different logs (and a simulated seed would
// not reproduce).
func sortStateRecords(recs []protocol.StateRecord) {
	for i := range recs {
		slices.SortFunc(recs[i].Seqs, func(a, b protocol.SeqAt) int { return cmp.Compare(a.Seq, b.Seq) })
	}
	slices.SortFunc(recs, func(a, b protocol.StateRecord) int {
		if c := cmp.Compare(a.Kind, b.Kind); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Producer, b.Producer); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	})
}

// appendStateCopies appends recs as EntryState entries of at most
// maxCopyBytes of records each, without a key header.
func (r *Replica) appendStateCopies(recs []protocol.StateRecord) {
	var entries []protocol.Entry
	var buf []byte
	flush := func() {
		if len(buf) == 0 {
			return
		}
		entries = append(entries, protocol.Entry{Offset: r.log.LEO() + uint64(len(entries)), Epoch: r.epoch,
			Time: r.now.UnixMilli(), Type: protocol.EntryState, Data: protocol.KeyedData(nil, buf)})
		buf = nil
	}
	for _, rec := range recs {
		buf = protocol.EncodeStateRecords(buf, rec)
		if len(buf) >= maxCopyBytes {
			flush()
		}
	}
	flush()
	r.logger.Debug("copying live keys above the log start", "records", len(recs), "entries", len(entries))
	r.appendEntries(entries)
}

// keyedPart reports whether e is an entry of a keyed batch before its last
// (its key prefix is empty, or holds only its entry key, R102).
func keyedPart(e *protocol.Entry) bool {
	return e.Type == protocol.EntryKeyed && protocol.KeyedPart(e.Data)
}

// wholeBatches makes a fetch answer end at a keyed batch's boundary (R61):
// a batch cut by the byte or count limit is left for the next answer, and
// one that starts the answer is sent whole (the first batch is always sent
// whole, as R9's first entry). So every log holds keyed batches whole.
func (r *Replica) wholeBatches(es []protocol.Entry) []protocol.Entry {
	n := len(es)
	if n == 0 || !keyedPart(&es[n-1]) {
		return es
	}
	j := n - 1
	for j >= 0 && keyedPart(&es[j]) {
		j--
	}
	if j >= 0 {
		return es[:j+1]
	}
	for next := es[n-1].Offset + 1; next < r.log.LEO(); {
		more, err := r.log.read(next, keyCatchUpBytes)
		if err != nil || len(more) == 0 {
			r.logger.Error("reading the rest of a keyed batch for a fetch", "offset", next, "error", err)
			return es
		}
		for i := range more {
			es = append(es, more[i])
			if !keyedPart(&more[i]) {
				return es
			}
		}
		next = more[len(more)-1].Offset + 1
	}
	return es
}

// dropTornBatch truncates a keyed batch cut short at the end of the log
// (R61): a store whose crash left a prefix of an append (a torn write; the
// stores of this module apply a write whole, but the contract the core
// relies on is only "a prefix of what was written") holds records of a
// batch whose key header, on its last entry, never landed. Left there,
// they could be committed without the key, and the producer's retry would
// append them again. They were not reported durable before the crash, so
// they are above every HW this replica announced, and nothing committed is
// lost: replicas that hold the batch whole still have it. New calls it.
func (r *Replica) dropTornBatch() {
	leo := r.log.LEO()
	if leo == r.log.logStart {
		return
	}
	start := leo
	for start > r.log.logStart {
		from := start - min(start-r.log.logStart, 1024)
		es, err := r.log.read(from, math.MaxInt)
		if err != nil {
			r.logger.Error("reading the log end for a torn keyed batch", "offset", from, "error", err)
			return
		}
		i := len(es) - 1
		for i >= 0 && es[i].Offset >= start {
			i--
		}
		for i >= 0 && keyedPart(&es[i]) {
			i--
		}
		if i >= 0 {
			start = es[i].Offset + 1
			break
		}
		start = from
	}
	if start < leo {
		r.logger.Warn("truncating a keyed batch cut short at the end of the log (a torn write)", "from", start, "leo", leo)
		r.truncate(start)
	}
}
