package storage

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/replog-io/replog/protocol"
	bolt "go.etcd.io/bbolt"
)

// A DirStore with the commit journal (DirOptions.Journal, format 2) makes
// an Apply durable with one write and one fdatasync of the journal; the
// segments take the journal's writes later, in large transactions (a
// checkpoint, run by the store's checkpointer goroutine), each a normal
// bbolt commit that also records the sequence number of the last journal
// record it holds (meta/journal_seq). Once it is committed the journal is
// cut (its header moved past those records). Open replays the records
// above the segments' sequence number into memory; they are checkpointed
// like any others.
//
// Between an Apply and the checkpoint that takes it, the log's state is
// the journal view: the segments' state with the pending batches applied,
// and the entries the segments cannot serve (from memLo up) in memory.

// journalLogID is the log ID of a DirStore's records: one log per journal
// until several logs share one.
const journalLogID = 0

// keyJournalSeq: meta key, 8-byte BE sequence number of the newest journal
// record the segments hold (absent before the first checkpoint).
var keyJournalSeq = []byte("journal_seq")

// journalView is one published version of a journaled store's state;
// never mutated.
type journalView struct {
	log *logState
	// memLo is the first offset served from mem: the segments hold the
	// entries of [log.logStart, memLo) as they are in this view.
	memLo uint64
	mem   []protocol.Entry // the entries of [memLo, log.leo)
	// truncs counts truncations applied: a read that saw the segments
	// while it changed is retried (a checkpoint of a truncation changes
	// the segments below memLo).
	truncs uint64
}

// pendingBatch is an Apply in the journal, not yet in the segments.
type pendingBatch struct {
	seq     uint64 // of the record holding it
	size    int64  // of its payload
	payload []byte // the batch as the journal holds it
	ws      []protocol.Write
	// vals holds each append's entries as the segments store them (nil:
	// encode them; a batch replayed at Open).
	vals [][][]byte
	// point: the lowest offset whose entry the batch changes
	// (math.MaxUint64 if none).
	point uint64
}

// after applies ws (validated against v's state) and returns the new view,
// the lowest offset ws changes, and whether anything changed. Entries'
// Data are kept as they are: the caller passes writes it owns.
func (v *journalView) after(ws []protocol.Write) (*journalView, uint64, bool, error) {
	n := *v
	st := v.log
	point := uint64(math.MaxUint64)
	changed := false
	for i := range ws {
		w := &ws[i]
		next, err := st.after(w)
		if err != nil {
			return nil, 0, false, writeErr(ws, i, err)
		}
		if next == st {
			continue
		}
		changed = true
		switch w.Kind {
		case protocol.WriteAppend:
			point = min(point, w.Entries[0].Offset)
			n.mem = append(n.mem, w.Entries...)
		case protocol.WriteTruncate:
			point = min(point, w.Offset)
			n.truncs++
			if w.Offset <= n.memLo {
				n.memLo, n.mem = w.Offset, nil
			} else {
				// A copy: readers of older views read the old backing array.
				n.mem = slices.Clone(n.mem[:w.Offset-n.memLo])
			}
		case protocol.WriteDeletePrefix:
			if next.leo == next.logStart && w.Offset >= st.leo { // emptied, restarted at Offset
				point = min(point, w.Offset)
				n.memLo, n.mem = w.Offset, nil
			} else if w.Offset > n.memLo {
				n.mem = n.mem[w.Offset-n.memLo:]
				n.memLo = w.Offset
			}
		}
		st = next
	}
	n.log = st
	return &n, point, changed, nil
}

// trimmed returns v with memLo raised to what the pending batches need
// (the segments hold everything below it).
func (v *journalView) trimmed(pending []pendingBatch) *journalView {
	lo := v.log.leo
	for _, b := range pending {
		lo = min(lo, b.point)
	}
	lo = max(lo, v.log.logStart)
	if lo <= v.memLo {
		return v
	}
	n := *v
	n.mem = v.mem[lo-v.memLo:]
	n.memLo = lo
	return &n
}

// checkpointer is a journaled store's goroutine: it runs a checkpoint when
// asked (the journal a quarter full, or an Apply waiting for room).
type checkpointer struct {
	ask    chan struct{}
	stop   chan struct{}
	exited chan struct{}
}

func (c *checkpointer) request() {
	select {
	case c.ask <- struct{}{}:
	default:
	}
}

func (d *DirStore) runCheckpointer() {
	c := d.ckpt
	defer close(c.exited)
	for {
		select {
		case <-c.stop:
			return
		case <-c.ask:
		}
		if err := d.checkpoint(); err != nil {
			return // latched: every later Apply returns it
		}
	}
}

// setFailed latches err (the store refuses writes from now on).
func (d *DirStore) setFailed(err error) {
	d.failMu.Lock()
	defer d.failMu.Unlock()
	if d.failed == nil {
		d.failed = err
	}
}

func (d *DirStore) failure() error {
	d.failMu.Lock()
	defer d.failMu.Unlock()
	return d.failed
}

// checkpointChunk is the journal bytes one checkpoint transaction takes at
// most: a segment overshoots SegmentBytes by at most one of them.
func (d *DirStore) checkpointChunk() int64 {
	return max(min(d.opts.SegmentBytes/4, 4<<20), 1)
}

// checkpoint moves every pending batch into the segments, a chunk per
// transaction, releasing its records in the journal after each (which
// cuts those no other log needs). A failure is latched.
func (d *DirStore) checkpoint() error {
	d.mu.Lock()
	batch := slices.Clone(d.pending)
	d.mu.Unlock()
	if len(batch) == 0 {
		return nil
	}
	for len(batch) > 0 {
		n, bytes := 0, int64(0)
		for n < len(batch) && (n == 0 || bytes+batch[n].size <= d.checkpointChunk()) {
			bytes += batch[n].size
			n++
		}
		var ws []protocol.Write
		var vals [][][]byte
		encoded := true
		for _, b := range batch[:n] {
			ws = append(ws, b.ws...)
			vals = append(vals, b.vals...)
			encoded = encoded && b.vals != nil
		}
		if !encoded {
			vals = nil
		}
		start := time.Now()
		// ckMu only around the transaction and the publication: the
		// release below wakes the Applies waiting for room, each under
		// its store's mu, which an Apply holds while it waits for ckMu
		// (applyDirect).
		d.ckMu.Lock()
		err := d.applyBolt(ws, vals, batch[n-1].seq)
		if err == nil {
			d.segJSeq = batch[n-1].seq
		}
		if err != nil {
			defer d.ckMu.Unlock()
			err = fmt.Errorf("replog: store %s: checkpoint of journal records %d to %d: %w", d.dir, batch[0].seq, batch[n-1].seq, err)
			d.log.Error("checkpoint failed", "dir", d.dir, "error", err)
			d.setFailed(fmt.Errorf("%w (the store refuses writes after a failed checkpoint; close and reopen it: the journal keeps the writes)", err))
			d.mu.Lock()
			d.cond.Broadcast()
			d.mu.Unlock()
			return err
		}
		// Counted before the cut wakes the Applies waiting for it.
		took := time.Since(start)
		d.checkpoints.Add(1)
		d.checkpointNanos.Add(uint64(took))
		for {
			old := d.checkpointMax.Load()
			if uint64(took) <= old || d.checkpointMax.CompareAndSwap(old, uint64(took)) {
				break
			}
		}
		if journalHook != nil {
			journalHook("cut")
		}
		d.mu.Lock()
		d.pending = d.pending[n:]
		d.jv.Store(d.jv.Load().trimmed(d.pending))
		// An Apply too large for the journal waits for pending to empty:
		// on a shared journal the release below may cut nothing (another
		// log's batch is at the front), so nothing else would wake it.
		d.cond.Broadcast()
		d.mu.Unlock()
		d.ckMu.Unlock()
		if err := d.j.release(d.logID, batch[n-1].seq); err != nil {
			d.setFailed(fmt.Errorf("replog: store %s: cut the journal: %w (the store refuses writes; close and reopen it)", d.dir, err))
			d.mu.Lock()
			d.cond.Broadcast()
			d.mu.Unlock()
			return err
		}
		batch = batch[n:]
	}
	return nil
}

// applyJournal is Apply for a journaled store (d.mu held): the writes are
// validated against the journal view, encoded once as a record (the store
// keeps the writes aliasing it, and the checkpoint puts its entries'
// encodings into the segments) and committed (one write and one
// fdatasync, shared with the other Applies of the round), then
// published; the checkpointer moves them into the segments later. A batch
// too large for the journal waits for every pending one to be
// checkpointed and is applied to the segments directly.
func (d *DirStore) applyJournal(ws []protocol.Write) error {
	d.applies.Add(1)
	d.writes.Add(uint64(len(ws)))
	p, err := d.prepareJournal(ws)
	if err != nil || p == nil {
		return err
	}
	for {
		if d.closed.Load() {
			return ErrClosed
		}
		if err := d.failure(); err != nil {
			return err
		}
		if p.direct(d.j) {
			if len(d.pending) > 0 {
				d.ckpt.request()
				d.cond.Wait()
				continue
			}
			return d.applyDirect(ws)
		}
		if changed, err := p.against(d.jv.Load()); err != nil || !changed {
			return err // !changed: another Apply, while this one waited, made it a no-op
		}
		cuts := d.j.cutCount()
		err = d.j.commit(p.req)
		if errors.Is(err, errJournalFull) {
			d.journalWaits.Add(1)
			if d.j.cutCount() == cuts {
				d.ckpt.request()
				d.j.askAll()
				d.cond.Wait() // a cut of the journal wakes it
			}
			continue
		}
		if err != nil {
			return d.commitFailed(len(ws), err)
		}
		d.publish(p)
		return nil
	}
}

// journalPrep is an Apply's record for a journaled store, validated and
// encoded, on its way to a round.
type journalPrep struct {
	eb    encodedBatch
	req   *journalReq
	next  *journalView // the view once it is applied (against)
	point uint64       // the lowest offset it changes (against)
}

// prepareJournal validates ws against the journal view and encodes its
// record (d.mu held); nil, nil if ws changes nothing (no fsync).
func (d *DirStore) prepareJournal(ws []protocol.Write) (*journalPrep, error) {
	// Validated first against the caller's writes (their errors name
	// them); again by against, on the state at its round.
	st, changed := d.jv.Load().log, false
	for i := range ws {
		next, err := st.after(&ws[i])
		if err != nil {
			return nil, writeErr(ws, i, err)
		}
		changed = changed || next != st
		st = next
	}
	if !changed {
		return nil, nil
	}
	eb, err := encodeRecordBatch(ws)
	if err != nil {
		return nil, err
	}
	return &journalPrep{eb: eb, req: &journalReq{logID: d.logID, rec: eb.rec, n: eb.n, crc: eb.crc}}, nil
}

// direct reports whether p is too large for journal j: applied to the
// segments directly once nothing is pending.
func (p *journalPrep) direct(j *Journal) bool {
	return recordSize(p.eb.n) > j.Capacity()/2 || p.eb.n > journalMaxPayload
}

// against applies p's writes to view jv, the store's current one
// (changed false: they change nothing any more).
func (p *journalPrep) against(jv *journalView) (changed bool, err error) {
	next, point, changed, err := jv.after(p.eb.writes)
	if err != nil || !changed {
		return false, err
	}
	p.next, p.point = next, point
	return true, nil
}

// publish makes p, committed, the store's state (d.mu held): readers see
// it at once, and the checkpointer takes it later.
func (d *DirStore) publish(p *journalPrep) {
	d.batches.Add(1)
	d.pending = append(d.pending, pendingBatch{seq: p.req.seq, size: int64(p.eb.n), payload: p.eb.rec[journalRecHeader : journalRecHeader+p.eb.n], ws: p.eb.writes, vals: p.eb.vals, point: p.point})
	d.jv.Store(p.next)
	// A prefix deletion frees its segment files only once a checkpoint
	// applies it to the segments: without asking for one now, a log that
	// writes little would keep them on disk until a quarter of the
	// journal had filled again, and retention would not bound the
	// directory.
	if d.dropsSealed(p.eb.writes) {
		d.ckpt.request()
	}
}

// commitFailed latches a failed journal write of an Apply of n writes
// and returns its error.
func (d *DirStore) commitFailed(n int, err error) error {
	d.log.Error("journal write failed", "dir", d.dir, "writes", n, "error", err)
	err = fmt.Errorf("replog: store %s: commit: %w", d.dir, err)
	d.setFailed(fmt.Errorf("%w (the store refuses writes after a failed commit; close and reopen it)", err))
	return err
}

// dropsSealed reports whether ws deletes a prefix that reaches past the
// end of the segments' first sealed segment: applied to the segments, it
// unlinks that file.
func (d *DirStore) dropsSealed(ws []protocol.Write) bool {
	sealed := d.state.Load().sealed
	if len(sealed) == 0 {
		return false
	}
	for i := range ws {
		if ws[i].Kind == protocol.WriteDeletePrefix && ws[i].Offset >= sealed[0].end {
			return true
		}
	}
	return false
}

// applyDirect applies ws to the segments (d.mu held, nothing pending).
func (d *DirStore) applyDirect(ws []protocol.Write) error {
	d.ckMu.Lock()
	defer d.ckMu.Unlock()
	if err := d.applyBolt(ws, nil, 0); err != nil {
		return err
	}
	jv := d.jv.Load()
	st := d.state.Load().log
	truncs := jv.truncs
	if truncates(ws) {
		truncs++
	}
	d.jv.Store(&journalView{log: st, memLo: st.leo, truncs: truncs})
	d.directApplies.Add(1)
	return nil
}

// openJournal opens the journal of a store just opened (before it is
// handed out), whose segments hold the journal's records up to jseq:
// the records after it are replayed into memory. Then, read-write, with
// DirOptions.Journal the directory is format 2 with a journal (created if
// missing) and the checkpointer runs; with DirOptions.SharedJournal it is
// format 3 on that journal (openShared); with neither, every record is
// checkpointed, the journal removed and the directory format 1.
// Read-only, the records are only replayed (nothing in the directory
// changes).
func (d *DirStore) openJournal(format int, stamped bool, jseq uint64) (err error) {
	defer func() {
		if err != nil && (d.ckpt == nil || d.ckpt.stop == nil) {
			// Open fails: Close must not checkpoint what a refused or
			// damaged journal left half replayed.
			d.ckpt, d.pending = nil, nil
		}
	}()
	d.segJSeq = jseq
	shared := d.opts.SharedJournal != nil && !d.readOnly
	if format == StorageFormatShared && !shared {
		return fmt.Errorf("%w: data directory %s keeps its latest writes in a shared journal: open it read-write with DirOptions.SharedJournal", ErrSharedJournal, d.dir)
	}
	path := filepath.Join(d.dir, JournalFileName)
	if !d.readOnly {
		if err := os.Remove(filepath.Join(d.dir, journalTmpName)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("replog: open store %s: %w", d.dir, err)
		}
	}
	_, err = os.Stat(path)
	exists := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("replog: open store %s: %w", d.dir, err)
	}
	if exists && format != StorageFormatJournal && stamped {
		d.log.Warn("journal file in a directory of another format (left by a crash while the journal was turned off or shared); replaying it", "path", path)
	}
	d.ckpt = &checkpointer{ask: make(chan struct{}, 1)}
	if exists {
		j, recs, err := openJournal(path, d.readOnly, d.opts.NoSync)
		if err != nil {
			return err
		}
		var parts []journalPart
		for _, r := range recs {
			if r.logID != journalLogID {
				err = fmt.Errorf("replog: journal %s: %w: record at offset %d (sequence %d) of log %d in a directory's own journal", path, ErrCorrupt, r.pos, r.seq, r.logID)
				break
			}
			parts = append(parts, journalPart{seq: r.seq, logID: r.logID, payload: r.payload})
		}
		if err == nil {
			_, err = j.attach(journalLogID, d, d.ckpt.request)
		}
		if err == nil {
			d.j, d.logID = j, journalLogID
			err = d.replay(parts, jseq)
		}
		if err != nil {
			_ = j.Close()
			d.j = nil
			return err
		}
		d.jstat.Store(j)
	}
	if d.readOnly {
		d.ckpt = nil // nothing is checkpointed
		return nil
	}
	if !d.opts.Journal || shared {
		if exists {
			if err := d.checkpoint(); err != nil {
				return err
			}
			_ = d.j.Close()
			d.j = nil
			d.jstat.Store(nil)
			d.jv.Store(nil)
			if err := os.Remove(path); err != nil {
				return fmt.Errorf("replog: open store %s: remove the journal: %w", d.dir, err)
			}
			if !d.opts.NoSync {
				if err := SyncDir(d.dir); err != nil {
					return fmt.Errorf("replog: open store %s: %w", d.dir, err)
				}
			}
			d.log.Info("own journal turned off: its records moved into the segments and the file removed", "path", path)
		}
		if shared {
			// d.segJSeq: the drain's checkpoints moved it.
			return d.openShared(format, stamped, d.segJSeq)
		}
		d.ckpt = nil
		if format != StorageFormatSegments || !stamped {
			return writeFormat(d.dir, StorageFormatSegments, d.opts.NoSync)
		}
		return nil
	}
	if format != StorageFormatJournal || !stamped {
		// Recorded before the journal exists: a build that reads the
		// format file never finds a journal in a directory it takes for
		// format 1.
		if err := writeFormat(d.dir, StorageFormatJournal, d.opts.NoSync); err != nil {
			return err
		}
	}
	if d.j == nil {
		return d.startJournal()
	}
	// What Open replayed is checkpointed as the Applies' writes are,
	// once the journal is a quarter full (or at Close).
	d.startCheckpointer()
	return nil
}

// replay takes the batches of the store's log read from its journal
// (d.j, attached): those the segments hold (sequence up to jseq, a crash
// between a checkpoint and its cut) are released, the others applied to
// the journal view and kept pending.
func (d *DirStore) replay(parts []journalPart, jseq uint64) error {
	st := d.state.Load().log
	jv := &journalView{log: st, memLo: st.leo}
	stale := 0
	for _, p := range parts {
		if p.seq <= jseq {
			stale++
			continue
		}
		ws, err := decodeBatch(p.payload)
		if err == nil {
			var point uint64
			var next *journalView
			if next, point, _, err = jv.after(ws); err == nil {
				jv = next
				d.pending = append(d.pending, pendingBatch{seq: p.seq, size: int64(len(p.payload)), payload: p.payload, ws: ws, point: point})
			}
		}
		if err != nil {
			return fmt.Errorf("replog: journal %s: %w: the record of sequence %d does not apply to log %d of %s (whose segments hold its records up to sequence %d): %v", d.j.path, ErrCorrupt, p.seq, d.logID, d.dir, jseq, err)
		}
	}
	d.j.mu.Lock()
	if d.j.nextSeq <= jseq {
		d.j.nextSeq = jseq + 1 // not reached: the segments never hold a record the journal has not written
	}
	d.j.mu.Unlock()
	d.jv.Store(jv)
	d.log.Debug("journal replayed", "path", d.j.path, "log", d.logID, "records", len(d.pending), "already_in_segments", stale)
	if stale > 0 && !d.readOnly {
		return d.j.release(d.logID, jseq)
	}
	return nil
}

// openShared puts the store on DirOptions.SharedJournal as log
// DirOptions.JournalLogID (its own journal already drained): the
// directory's journal reference must name that journal and log (a format
// 3 directory) or is written, then format 3 recorded; the log's batches
// still in the journal are replayed and the checkpointer started.
func (d *DirStore) openShared(format int, stamped bool, jseq uint64) error {
	j, id := d.opts.SharedJournal, d.opts.JournalLogID
	ref := journalRef{fingerprint: j.fingerprint(), logID: id}
	if format == StorageFormatShared {
		got, err := readJournalRef(d.dir)
		switch {
		case err != nil:
			return err
		case got == nil:
			return fmt.Errorf("replog: open store %s: %w: format 3 without its journal reference %s", d.dir, ErrCorrupt, JournalRefFileName)
		case *got != ref:
			return fmt.Errorf("%w: data directory %s is log %d of the shared journal %016x, not log %d of %s (%016x)",
				ErrSharedJournal, d.dir, got.logID, got.fingerprint, id, j.path, ref.fingerprint)
		}
	} else {
		// Moving onto the journal (a reference left by a crash before
		// format 3 was recorded is rewritten: the directory may have run
		// on a journal of its own since). A directory writes batches to
		// the journal only once it is format 3, so batches of this log ID
		// in it are another directory's (one wiped or moved away before
		// they were checkpointed): taking them would give this one
		// entries it never had.
		if j.holdsUnclaimed(id) {
			return fmt.Errorf("%w: data directory %s is new to the shared journal %s, which holds unreplayed batches of log %d from another directory: open that directory as log %d first, or give this one another JournalLogID",
				ErrSharedJournal, d.dir, j.path, id, id)
		}
		if jseq != 0 {
			// The segments' journal sequence number counts another
			// journal's records (the directory's own, drained): the
			// shared journal numbers its own, so it goes first.
			if d.check != nil {
				// As every write: not before the walk of the file Open
				// left to the background has passed the free list.
				if err := d.check.awaitWrite(false); err != nil {
					return fmt.Errorf("replog: open store %s: %w", d.dir, err)
				}
			}
			if err := d.state.Load().active.db.Update(func(tx *bolt.Tx) error {
				return tx.Bucket(bucketMeta).Delete(keyJournalSeq)
			}); err != nil {
				return fmt.Errorf("replog: open store %s: %w", d.dir, err)
			}
			jseq, d.segJSeq = 0, 0
		}
		if err := writeJournalRef(d.dir, ref, d.opts.NoSync); err != nil {
			return err
		}
	}
	if format != StorageFormatShared || !stamped {
		// After the reference: a format 3 directory always names its
		// journal.
		if err := writeFormat(d.dir, StorageFormatShared, d.opts.NoSync); err != nil {
			return err
		}
	}
	parts, err := j.attach(id, d, d.ckpt.request)
	if err != nil {
		return err
	}
	d.j, d.logID = j, id
	if err := d.replay(parts, jseq); err != nil {
		j.detach(id, parts)
		d.j = nil
		return err
	}
	d.jstat.Store(j)
	d.startCheckpointer()
	return nil
}

// startCheckpointer starts the goroutine of d.ckpt.
func (d *DirStore) startCheckpointer() {
	d.ckpt.stop, d.ckpt.exited = make(chan struct{}), make(chan struct{})
	go d.runCheckpointer()
}

// startJournal creates the journal of a store without one, the directory
// already recorded as format 2, and starts the checkpointer (d.mu held,
// or before the store is handed out).
func (d *DirStore) startJournal() error {
	j, err := createJournal(filepath.Join(d.dir, JournalFileName), d.opts.JournalBytes, d.segJSeq+1, d.opts.NoSync)
	if err != nil {
		return err
	}
	if d.ckpt == nil {
		d.ckpt = &checkpointer{ask: make(chan struct{}, 1)}
	}
	if _, err := j.attach(journalLogID, d, d.ckpt.request); err != nil {
		_ = j.Close()
		return err
	}
	st := d.state.Load().log
	d.jv.Store(&journalView{log: st, memLo: st.leo})
	d.j, d.logID = j, journalLogID
	d.jstat.Store(j)
	d.startCheckpointer()
	return nil
}

// EnableJournal turns the commit journal on in an open store, as if it
// had been opened with DirOptions.Journal: the directory is recorded as
// storage format 2, the journal created (DirOptions.JournalBytes) and the
// checkpointer started; the next Apply goes to the journal. A no-op if
// the journal is on. A node calls it once its cluster's feature level
// allows format 2, and from then on opens the directory with
// DirOptions.Journal (DirFormat tells it the directory is format 2):
// opened without it, the journal's writes go back into the segments and
// the directory is format 1 again. It waits for the Apply in progress.
// Errors: ErrClosed, ErrReadOnly, the error latched by a failed commit, or
// the error of writing the format file or the journal.
func (d *DirStore) EnableJournal() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case d.closed.Load():
		return ErrClosed
	case d.readOnly:
		return ErrReadOnly
	case d.j != nil:
		return nil
	}
	if err := d.failure(); err != nil {
		return err
	}
	if err := writeFormat(d.dir, StorageFormatJournal, d.opts.NoSync); err != nil {
		return err
	}
	if err := d.startJournal(); err != nil {
		return fmt.Errorf("replog: store %s: enable the journal: %w", d.dir, err)
	}
	d.log.Info("commit journal turned on", "dir", d.dir)
	return nil
}

// DirFormat returns the storage format of the data directory dir (1 for
// a directory from before formats were recorded, or one that does not
// exist yet). A format newer than this build reads is ErrNewerFormat; a
// damaged format file ErrCorrupt.
func DirFormat(dir string) (int, error) {
	v, _, err := readFormat(dir)
	return v, err
}

// closeJournal stops the checkpointer and checkpoints what is pending, so
// that a closed directory's segments hold the whole log (a failure leaves
// the records in the journal, replayed at the next open), and leaves a
// shared journal (its records of this log cut once checkpointed).
func (d *DirStore) closeJournal() {
	d.mu.Lock()
	c := d.ckpt
	d.cond.Broadcast() // Applies waiting for room return ErrClosed
	d.mu.Unlock()
	if c == nil {
		return
	}
	if c.stop != nil {
		close(c.stop)
		<-c.exited
	}
	if d.failure() == nil && !d.abandon {
		_ = d.checkpoint()
	}
	if d.j != nil {
		// What is still pending stays in the journal, for the log's next
		// store to claim.
		d.mu.Lock()
		parts := make([]journalPart, len(d.pending))
		for i, b := range d.pending {
			parts[i] = journalPart{seq: b.seq, logID: d.logID, payload: b.payload}
		}
		d.mu.Unlock()
		d.j.detach(d.logID, parts)
	}
}

// journalEntries is Entries for a journaled store: the entries below the
// view's memLo come from the segments, the rest from memory.
func (d *DirStore) journalEntries(from uint64, maxCount int, maxBytes int) ([]protocol.Entry, error) {
	for retries := 0; ; retries++ {
		jv := d.jv.Load()
		st := jv.log
		if from == st.leo {
			return nil, nil
		}
		if from < st.logStart || from > st.leo {
			return nil, fmt.Errorf("%w: offset %d outside [%d, %d)", ErrOutOfRange, from, st.logStart, st.leo)
		}
		budget := protocol.Budget{Max: maxBytes}
		var out []protocol.Entry
		off := from
		if off < jv.memLo {
			var err error
			out, err = d.boltEntries(off, jv.memLo, maxCount, &budget, nil)
			if now := d.jv.Load(); now.truncs != jv.truncs || (err != nil && now != jv) {
				if retries < 1000 {
					continue // the segments changed under the read
				}
			}
			if err != nil {
				return nil, err
			}
			off += uint64(len(out))
			if off < jv.memLo {
				return out, nil // the count or the budget ran out
			}
		}
		n := len(out)
		size := 0
		for ; off < st.leo; off++ {
			if maxCount > 0 && len(out) >= maxCount {
				break
			}
			e := jv.mem[off-jv.memLo]
			if !budget.Take(len(e.Data)) {
				break
			}
			size += len(e.Data)
			out = append(out, e)
		}
		arena := make([]byte, 0, size)
		for i := n; i < len(out); i++ {
			start := len(arena)
			arena = append(arena, out[i].Data...)
			out[i].Data = arena[start:len(arena):len(arena)]
		}
		return out, nil
	}
}
