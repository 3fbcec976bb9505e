package storage

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
)

// Journal is a commit journal file: a DirStore's own (DirOptions.Journal)
// or one that several stores share (OpenJournal, DirOptions.SharedJournal).
// Every store attached to it hands its Apply's record to commit (or a
// node's writer, several stores' at once, to ApplyGroup); the call that
// finds no round under way leads: it writes every record queued by then
// as one write and one fdatasync (group commit, across the stores), and
// the others wait for that round, each woken once. A record may be cut
// once each store whose batch it holds has checkpointed it into its
// segments. See docs/storage.md section 10.
type Journal struct {
	path     string
	f        *os.File
	size     int64
	key      journalKey // the file's record MAC key (from its header)
	noSync   bool
	readOnly bool
	shared   bool // opened by OpenJournal; closed by its caller
	syncer   fileSyncer

	// hdrMu serializes header writes (cuts and rewinds); taken before mu.
	hdrMu sync.Mutex

	mu       sync.Mutex
	counter  uint64 // of the newest header
	start    int64  // offset of the oldest live record (durable in the header)
	startSeq uint64
	tail     int64  // where the next record goes, unless it wraps
	nextSeq  uint64 // of the next record
	live     int64  // bytes of live records
	recs     []liveRecord
	queue    []*journalReq // waiting for the next round
	// roundBuf is the leading call's buffer for a record of several
	// batches (at most maxRoundBuf kept between rounds).
	roundBuf []byte
	// writing: a committer leads the rounds (one at a time, mu released
	// for the I/O), or the lead is being handed to the committer of
	// queue[0].
	writing bool
	cuts    uint64 // header moves; an Apply that found no room retries after one
	stores  map[uint32]*attachment
	// unclaimed holds, per log ID, the batches read at open that no store
	// has claimed yet (shared journals: a store claims its own when it
	// attaches).
	unclaimed map[uint32][]journalPart
	closed    bool
	failed    error // a round's write or sync failed: the file may hold anything past the tail

	syncs, records, batches, bytes atomic.Uint64
	// wakeups counts the waiting committers woken: each at most once per
	// commit (its requests done, or the lead handed to it).
	wakeups atomic.Uint64
}

// attachment is a store attached to a journal.
type attachment struct {
	d   *DirStore
	ask func() // asks the store's checkpointer for a checkpoint
}

// liveRecord is a record not yet cut: logs are the log IDs whose batch in
// it their store has not checkpointed yet.
type liveRecord struct {
	seq       uint64
	pos, size int64
	logs      []uint32
}

// journalPart is one log's batch in a record.
type journalPart struct {
	seq     uint64
	logID   uint32
	payload []byte
}

// journalReq is one Apply's record waiting for a round: rec holds
// journalRecHeader bytes of room, then the payload (n bytes, checksum crc)
// and its padding.
type journalReq struct {
	logID uint32
	rec   []byte
	n     int
	crc   uint32

	seq  uint64 // of the record that holds it, once done
	err  error
	done bool
	c    *committer // the call waiting for it
}

// committer is one commit call waiting for its requests (fields under the
// journal's mu). It has its own wake-up, so that a round's end wakes only
// the calls whose requests it completed and the one it hands the next
// round to, never every waiter of every store on the journal.
type committer struct {
	wake    chan struct{} // cap 1
	left    int           // its requests not done
	lead    bool          // the next round is handed to it
	waiting bool          // blocked on wake
}

// maxRoundBuf is the largest record buffer a journal keeps between
// rounds.
const maxRoundBuf = 1 << 20

// errJournalFull: the round had no room for the record; the store waits
// for a cut and tries again.
var errJournalFull = errors.New("replog: journal full")

// journalMultiLog is the log ID of a record holding the batches of
// several requests of one round (multiPayload); no store has it.
const journalMultiLog = 1<<32 - 1

// JournalOptions configures OpenJournal. The zero value is usable.
type JournalOptions struct {
	// Bytes is the journal file's size, preallocated when OpenJournal
	// creates it (an existing file keeps its size). Default
	// DefaultJournalBytes; below 64 KiB (other than 0) is invalid.
	Bytes int64
	// NoSync skips the fdatasyncs (tests and benchmarks only, as
	// DirOptions.NoSync). Default false.
	NoSync bool
}

// Validate reports the first invalid field of o, as an error wrapping
// ErrInvalidOptions that names it. It does not modify o.
func (o JournalOptions) Validate() error {
	if o.Bytes != 0 && o.Bytes < minJournalBytes {
		return fmt.Errorf("%w: JournalOptions.Bytes is %d, below the minimum %d", ErrInvalidOptions, o.Bytes, minJournalBytes)
	}
	return nil
}

// OpenJournal opens the commit journal file at path, creating it
// (preallocated, JournalOptions.Bytes) if it does not exist, to be shared
// by several DirStores (DirOptions.SharedJournal, each with its own
// DirOptions.JournalLogID): their Applies that wait at the same moment
// are made durable by one write and one fdatasync. The records it holds
// are kept for the stores to claim as they open (each replays its own);
// a record is cut once every store with a batch in it has checkpointed
// it. Close it after every store on it is closed. Errors: ErrInvalidOptions,
// ErrCorrupt naming the file and offset (a damaged record before the
// tail), or the error of creating or reading the file.
func OpenJournal(path string, opts JournalOptions) (*Journal, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if opts.Bytes == 0 {
		opts.Bytes = DefaultJournalBytes
	}
	var j *Journal
	var recs []journalRecord
	var err error
	if _, serr := os.Stat(path); serr == nil {
		j, recs, err = openJournal(path, false, opts.NoSync)
	} else if errors.Is(serr, os.ErrNotExist) {
		j, err = createJournal(path, opts.Bytes, 1, opts.NoSync)
	} else {
		err = fmt.Errorf("replog: open journal %s: %w", path, serr)
	}
	if err != nil {
		return nil, err
	}
	j.shared = true
	for _, r := range recs {
		parts, err := recordParts(r)
		if err != nil {
			_ = j.f.Close()
			return nil, fmt.Errorf("replog: journal %s: %w: record at offset %d (sequence %d): %v", path, ErrCorrupt, r.pos, r.seq, err)
		}
		for _, p := range parts {
			j.unclaimed[p.logID] = append(j.unclaimed[p.logID], p)
		}
	}
	return j, nil
}

// recordParts splits a record into its logs' batches.
func recordParts(r journalRecord) ([]journalPart, error) {
	if r.logID != journalMultiLog {
		return []journalPart{{seq: r.seq, logID: r.logID, payload: r.payload}}, nil
	}
	ids, payloads, err := decodeMultiPayload(r.payload)
	if err != nil {
		return nil, err
	}
	parts := make([]journalPart, len(ids))
	for i := range ids {
		parts[i] = journalPart{seq: r.seq, logID: ids[i], payload: payloads[i]}
	}
	return parts, nil
}

// A record of several batches (log ID journalMultiLog) has the payload:
// uvarint count, then per batch uvarint log ID, uvarint length and the
// batch's payload (journal_codec.go). Each log has at most one batch in a
// record (a store has one Apply at a time).
func appendMultiPayload(dst []byte, reqs []*journalReq) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(reqs)))
	for _, r := range reqs {
		dst = binary.AppendUvarint(dst, uint64(r.logID))
		dst = binary.AppendUvarint(dst, uint64(r.n))
		dst = append(dst, r.rec[journalRecHeader:journalRecHeader+r.n]...)
	}
	return dst
}

func multiPayloadSize(reqs []*journalReq) int {
	n := uvarintLen(uint64(len(reqs)))
	for _, r := range reqs {
		n += uvarintLen(uint64(r.logID)) + uvarintLen(uint64(r.n)) + r.n
	}
	return n
}

// decodeMultiPayload splits a multi-batch payload; the batches alias p.
// It never panics.
func decodeMultiPayload(p []byte) (ids []uint32, payloads [][]byte, err error) {
	r := &batchReader{p: p}
	n := r.count("batch count", 2)
	seen := map[uint32]bool{}
	for i := 0; i < n && r.err == nil; i++ {
		id := r.uvarint("log ID")
		b := r.bytes("batch")
		if r.err != nil {
			break
		}
		if id >= journalMultiLog || seen[uint32(id)] {
			return nil, nil, fmt.Errorf("%w: multi-batch record: log ID %d repeated or reserved", ErrCorrupt, id)
		}
		seen[uint32(id)] = true
		ids, payloads = append(ids, uint32(id)), append(payloads, b)
	}
	if r.err == nil && len(r.p) != 0 {
		r.fail(fmt.Sprintf("%d trailing bytes", len(r.p)))
	}
	if r.err == nil && n == 0 {
		r.fail("empty multi-batch record")
	}
	if r.err != nil {
		return nil, nil, fmt.Errorf("%w: multi-batch record: bad %v", ErrCorrupt, r.err)
	}
	return ids, payloads, nil
}

// sealRecord fills the header of rec (journalRecHeader bytes, then a
// payload of n bytes with CRC-32C crc, then padding) for (seq, logID),
// MACed under key.
func sealRecord(rec []byte, key *journalKey, seq uint64, logID uint32, n int, crc uint32) {
	h := rec[:journalRecHeader]
	binary.BigEndian.PutUint32(h[0:], journalRecMagic)
	binary.BigEndian.PutUint32(h[4:], uint32(n))
	binary.BigEndian.PutUint64(h[8:], seq)
	binary.BigEndian.PutUint32(h[16:], logID)
	binary.BigEndian.PutUint32(h[20:], crc)
	copy(h[24:], recordMAC(key, h))
}

// createJournal creates the journal file at path of size bytes, empty,
// its first record numbered firstSeq, under a new random key: written
// whole under a temporary name, synced, renamed into place and the
// directory synced.
func createJournal(path string, size int64, firstSeq uint64, noSync bool) (*Journal, error) {
	tmp := filepath.Join(filepath.Dir(path), journalTmpName)
	size &^= 7
	img := make([]byte, size)
	key, err := newJournalKey()
	if err != nil {
		return nil, fmt.Errorf("replog: create journal %s: key: %w", path, err)
	}
	copy(img, encodeJournalHeader(1, size, journalDataStart, firstSeq, &key))
	err = writeFileSynced(tmp, img, noSync)
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil && !noSync {
		err = SyncDir(filepath.Dir(path))
	}
	if err != nil {
		return nil, fmt.Errorf("replog: create journal %s: %w", path, err)
	}
	j, recs, err := openJournal(path, false, noSync)
	if err == nil && len(recs) != 0 {
		err = fmt.Errorf("replog: journal %s: %w: a new journal holds records", path, ErrCorrupt)
	}
	return j, err
}

// openJournal opens the journal at path and returns its live records (see
// scanJournal), each also live in the Journal's accounting (for the logs
// it holds) until released. Errors wrap ErrCorrupt and name the file.
func openJournal(path string, readOnly, noSync bool) (*Journal, []journalRecord, error) {
	flag := os.O_RDWR
	if readOnly {
		flag = os.O_RDONLY
	}
	f, err := os.OpenFile(path, flag, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("replog: open journal %s: %w", path, err)
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, nil, fmt.Errorf("replog: read journal %s: %w", path, err)
	}
	// Read through a mapping where there is one: its pages leave the
	// process's memory with it (a heap copy of the file would stay until
	// the collector returns it).
	img, unmap, merr := mapFile(f, fi.Size())
	if merr != nil {
		img, unmap = make([]byte, fi.Size()), func() {}
		if _, err := f.ReadAt(img, 0); err != nil && !errors.Is(err, io.EOF) {
			_ = f.Close()
			return nil, nil, fmt.Errorf("replog: read journal %s: %w", path, err)
		}
	}
	h, recs, tail, err := scanJournalProtected(img)
	// The records' payloads alias img: keep only theirs.
	for i := range recs {
		recs[i].payload = append([]byte(nil), recs[i].payload...)
	}
	unmap()
	if err != nil {
		_ = f.Close()
		return nil, nil, fmt.Errorf("replog: journal %s: %w", path, err)
	}
	j := &Journal{path: path, f: f, size: h.size, key: h.key, noSync: noSync, readOnly: readOnly, counter: h.counter,
		start: h.start, startSeq: h.startSeq, tail: tail, nextSeq: h.startSeq + uint64(len(recs)),
		stores: map[uint32]*attachment{}, unclaimed: map[uint32][]journalPart{}}
	if len(recs) > 0 {
		j.start = recs[0].pos // the header's start, or the wrapped first record
	} else {
		j.start = tail
	}
	for _, r := range recs {
		j.live += r.size
		lr := liveRecord{seq: r.seq, pos: r.pos, size: r.size}
		if r.logID != journalMultiLog {
			lr.logs = []uint32{r.logID}
		} else if ids, _, err := decodeMultiPayload(r.payload); err == nil {
			lr.logs = ids
		} else {
			_ = f.Close()
			return nil, nil, fmt.Errorf("replog: journal %s: %w: record at offset %d (sequence %d): %v", path, ErrCorrupt, r.pos, r.seq, err)
		}
		j.recs = append(j.recs, lr)
	}
	return j, recs, nil
}

// Capacity is the bytes of records the journal holds at most.
func (j *Journal) Capacity() int64 { return j.size - journalDataStart }

// Live is the bytes of records not yet cut.
func (j *Journal) Live() int64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.live
}

// JournalStats are a Journal's counters since it was opened.
type JournalStats struct {
	// Fsyncs counts the journal's fdatasyncs (one per round, one per
	// header write), Records its records written (one per round),
	// Batches the stores' batches in them (Batches/Records is the group
	// commit's reach across Applies), Bytes the bytes of the records.
	Fsyncs, Records, Batches, Bytes uint64
	// Wakeups counts the commits that waited for another's round and
	// were woken: once each, when their batches were written or the
	// next round was handed to them.
	Wakeups uint64
	// Live is the bytes of records not yet cut, Capacity the most it holds.
	Live, Capacity int64
}

// Stats returns the journal's counters.
func (j *Journal) Stats() JournalStats {
	return JournalStats{Fsyncs: j.syncs.Load(), Records: j.records.Load(), Batches: j.batches.Load(),
		Bytes: j.bytes.Load(), Wakeups: j.wakeups.Load(), Live: j.Live(), Capacity: j.Capacity()}
}

// attach registers store d as log id (ask requests its checkpoint) and
// returns the batches of that log read at open; an ID already attached is
// ErrInvalidOptions.
func (j *Journal) attach(id uint32, d *DirStore, ask func()) ([]journalPart, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return nil, fmt.Errorf("replog: journal %s: %w", j.path, ErrClosed)
	}
	if id == journalMultiLog {
		return nil, fmt.Errorf("%w: DirOptions.JournalLogID %d is reserved", ErrInvalidOptions, id)
	}
	if _, ok := j.stores[id]; ok {
		return nil, fmt.Errorf("%w: DirOptions.JournalLogID %d: another store on journal %s has it", ErrInvalidOptions, id, j.path)
	}
	j.stores[id] = &attachment{d: d, ask: ask}
	parts := j.unclaimed[id]
	delete(j.unclaimed, id)
	return parts, nil
}

// holdsUnclaimed reports whether the journal holds live batches of log id
// that no store has claimed since it was opened.
func (j *Journal) holdsUnclaimed(id uint32) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.unclaimed[id]) > 0
}

// InUse reports whether log id is taken on the journal: a store is
// attached as id, or the journal holds batches of id no store has claimed
// since it was opened. A store new to the journal must take another ID.
func (j *Journal) InUse(id uint32) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	_, attached := j.stores[id]
	return attached || len(j.unclaimed[id]) > 0
}

// Forget drops the batches of log id that no store has claimed, for a log
// whose data directory is gone (deleted before they were checkpointed):
// no store will ever claim them, and until they are dropped the journal
// is never cut past them, so its ring fills and every store's Applies
// wait. Errors: ErrInvalidOptions if a store is attached as id; those of
// writing the journal's header.
func (j *Journal) Forget(id uint32) error {
	j.mu.Lock()
	if _, ok := j.stores[id]; ok {
		j.mu.Unlock()
		return fmt.Errorf("%w: journal %s: log %d has a store attached", ErrInvalidOptions, j.path, id)
	}
	parts := j.unclaimed[id]
	delete(j.unclaimed, id)
	j.mu.Unlock()
	if len(parts) == 0 {
		return nil
	}
	return j.release(id, parts[len(parts)-1].seq)
}

// detach unregisters log id; parts are its batches still live, which
// stay in the journal for the next store that attaches as id.
func (j *Journal) detach(id uint32, parts []journalPart) {
	j.mu.Lock()
	defer j.mu.Unlock()
	delete(j.stores, id)
	if len(parts) > 0 {
		j.unclaimed[id] = parts
	}
}

// place returns where a record of rs bytes goes, or ok false if the
// journal has no room for it until a cut (j.mu held).
func (j *Journal) place(rs int64) (pos int64, ok bool) {
	if j.live == 0 {
		// Empty: the record may go at the tail or at the start of the
		// ring, where a reader starting at the header's start looks.
		if j.tail+rs <= j.size {
			return j.tail, true
		}
		return journalDataStart, rs <= j.size-journalDataStart && (journalDataStart+rs <= j.start || j.start == journalDataStart)
	}
	if j.tail == j.start {
		return 0, false // wrapped round to the oldest record: full
	}
	if j.tail > j.start { // not wrapped: the ring's free space is after tail and before start
		if j.tail+rs <= j.size {
			return j.tail, true
		}
		return journalDataStart, journalDataStart+rs <= j.start
	}
	return j.tail, j.tail+rs <= j.start
}

// commit makes r durable: it joins the next round, and leads the rounds
// if no one does (one write and one fdatasync for every request queued
// by then, in one record). It returns errJournalFull if the round had no
// room for r, or the round's write or sync error (the journal is then
// unusable: the stores latch it).
func (j *Journal) commit(r *journalReq) error {
	if err := j.commitAll([]*journalReq{r}); err != nil {
		return err
	}
	return r.err
}

// commitAll makes reqs durable together (a node's writer committing
// several stores' batches at once): they join the next round side by
// side, so that one record holds them all if it has room. Each request's
// outcome is its err once commitAll returns (errJournalFull for one the
// ring had no room for, a failed round's error); commitAll itself fails,
// with nothing queued, only on a closed or failed journal.
//
// The calls waiting for rounds are led, not herded: the call that finds
// no round under way runs rounds until its own requests are done, then
// hands the lead to the call of the oldest request still queued, and a
// round's end wakes only the calls it completed. A waiting call is
// woken once per commit.
func (j *Journal) commitAll(reqs []*journalReq) error {
	c := &committer{wake: make(chan struct{}, 1), left: len(reqs)}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return fmt.Errorf("replog: journal %s: %w", j.path, ErrClosed)
	}
	if j.failed != nil {
		return j.failed
	}
	for _, r := range reqs {
		r.c, r.done, r.err = c, false, nil
	}
	j.queue = append(j.queue, reqs...)
	for c.left > 0 {
		if !j.writing || c.lead {
			c.lead, j.writing = false, true
			for c.left > 0 {
				j.round()
			}
			j.handOver()
			break
		}
		c.waiting = true
		j.mu.Unlock()
		<-c.wake
		j.wakeups.Add(1)
		j.mu.Lock()
	}
	return nil
}

// handOver ends a leader's rounds (j.mu held): the call of the oldest
// request still queued leads the next, or no one does.
func (j *Journal) handOver() {
	if len(j.queue) == 0 {
		j.writing = false
		return
	}
	c := j.queue[0].c
	c.lead = true
	j.wakeCommitter(c)
}

// finish completes r with err (j.mu held), waking its call once its
// last request is done.
func (j *Journal) finish(r *journalReq, err error) {
	r.err, r.done = err, true
	r.c.left--
	if r.c.left == 0 {
		j.wakeCommitter(r.c)
	}
}

// wakeCommitter wakes c if it is blocked (j.mu held); one that is not
// sees its state before it would block.
func (j *Journal) wakeCommitter(c *committer) {
	if !c.waiting {
		return
	}
	c.waiting = false
	c.wake <- struct{}{}
}

// round writes the requests queued as one record (j.mu held, released for
// the I/O; run by the leading call only). Requests that do not fit wait
// for the next round; a first one that does not fit fails with
// errJournalFull.
func (j *Journal) round() {
	reqs := j.queue
	var rs int64
	var pos int64
	for len(reqs) > 0 {
		rs = roundSize(reqs)
		var ok bool
		if pos, ok = j.place(rs); ok {
			break
		}
		if j.live == 0 && len(j.recs) == 0 && j.tail != journalDataStart {
			// Empty but the ring's free space is split: move it to the
			// beginning (a header write) and place again.
			j.mu.Unlock()
			err := j.rewind()
			j.mu.Lock()
			if err != nil {
				j.fail(err)
				return
			}
			if pos, ok = j.place(rs); ok {
				break
			}
		}
		reqs = reqs[:len(reqs)-1]
	}
	if len(reqs) == 0 {
		first := j.queue[0]
		j.queue = j.queue[1:]
		j.finish(first, errJournalFull)
		return
	}
	j.queue = j.queue[len(reqs):]
	seq := j.nextSeq
	var rec []byte
	var logs []uint32
	if len(reqs) == 1 {
		r := reqs[0]
		sealRecord(r.rec, &j.key, seq, r.logID, r.n, r.crc)
		rec, logs = r.rec[:rs], []uint32{r.logID}
	} else {
		// The leading call's buffer: only it writes rounds, and the file
		// holds the record once writeRecord returns.
		if int64(cap(j.roundBuf)) < rs {
			j.roundBuf = make([]byte, 0, rs)
		}
		rec = j.roundBuf[:journalRecHeader]
		rec = appendMultiPayload(rec, reqs)
		n := len(rec) - journalRecHeader
		rec = rec[:rs]
		clear(rec[journalRecHeader+n:]) // the padding: a reused buffer holds an earlier round's bytes there
		sealRecord(rec, &j.key, seq, journalMultiLog, n, crc32.Checksum(rec[journalRecHeader:journalRecHeader+n], castagnoli))
		logs = make([]uint32, len(reqs))
		for i, r := range reqs {
			logs[i] = r.logID
		}
	}
	j.mu.Unlock()
	err := j.writeRecord(pos, rec)
	j.mu.Lock()
	if err != nil {
		for _, r := range reqs {
			j.finish(r, err)
		}
		j.fail(err)
		return
	}
	if cap(j.roundBuf) > maxRoundBuf {
		j.roundBuf = nil // a rare large round: not kept for the small ones
	}
	j.records.Add(1)
	j.batches.Add(uint64(len(reqs)))
	j.bytes.Add(uint64(len(rec)))
	if j.live == 0 {
		j.start, j.startSeq = pos, seq
	}
	j.recs = append(j.recs, liveRecord{seq: seq, pos: pos, size: rs, logs: logs})
	j.tail, j.nextSeq = pos+rs, seq+1
	j.live += rs
	for _, r := range reqs {
		r.seq = seq
		j.finish(r, nil)
	}
	if j.live >= j.Capacity()/4 {
		j.askFront()
	}
}

// askFront asks for a checkpoint the stores whose batches hold the
// journal's cut back (j.mu held): those with a batch in the oldest record
// still needed. Only their checkpoints move the header; any other store's
// would cut nothing yet and cost a bbolt commit (with many logs on one
// journal, asking every store at every round past the quarter multiplied
// the checkpoints by the logs, each taking a few batches). The next
// round past the quarter asks the stores of the record the cut reached,
// so each store is asked about when its oldest pending batch holds the
// ring, and its checkpoint takes everything it has pending by then.
func (j *Journal) askFront() {
	for i := range j.recs {
		if len(j.recs[i].logs) == 0 {
			continue // released by every log, the cut not yet made
		}
		for _, id := range j.recs[i].logs {
			if a, ok := j.stores[id]; ok {
				a.ask()
			}
		}
		return
	}
}

// fail latches err (j.mu held): the requests queued and every later
// commit fail with it.
func (j *Journal) fail(err error) {
	j.failed = err
	q := j.queue
	j.queue = nil
	for _, r := range q {
		j.finish(r, err)
	}
}

// roundSize is the bytes of the record holding reqs.
func roundSize(reqs []*journalReq) int64 {
	if len(reqs) == 1 {
		return recordSize(reqs[0].n)
	}
	return recordSize(multiPayloadSize(reqs))
}

// writeRecord writes rec at pos and syncs the file (fdatasync): the one
// write and one sync of a round.
func (j *Journal) writeRecord(pos int64, rec []byte) error {
	if _, err := j.f.WriteAt(rec, pos); err != nil {
		return fmt.Errorf("replog: journal %s: write at offset %d: %w", j.path, pos, err)
	}
	if journalHook != nil {
		journalHook("append")
	}
	if !j.noSync {
		if err := j.syncer.sync(j.f); err != nil {
			return fmt.Errorf("replog: journal %s: sync: %w", j.path, err)
		}
		j.syncs.Add(1)
	}
	return nil
}

// askAll asks every attached store for a checkpoint (a request found no
// room: the waiting store cannot tell which stores hold the cut back, and
// the journal is to be emptied as fast as every store can go).
func (j *Journal) askAll() {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, a := range j.stores {
		a.ask()
	}
}

// cutCount is the number of header moves so far.
func (j *Journal) cutCount() uint64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.cuts
}

// release records that log id's segments hold its batches up to sequence
// upto, durably, and cuts the records no store needs any more (the
// header moved past them and synced), then wakes the Applies waiting for
// room. Read-only, nothing is written.
func (j *Journal) release(id uint32, upto uint64) error {
	j.mu.Lock()
	front := false
	for i := range j.recs {
		r := &j.recs[i]
		if r.seq > upto {
			break
		}
		for k, l := range r.logs {
			if l == id {
				r.logs = append(r.logs[:k:k], r.logs[k+1:]...)
				break
			}
		}
		front = front || (i == 0 && len(r.logs) == 0)
	}
	j.mu.Unlock()
	if !front || j.readOnly {
		return nil
	}
	if err := j.cutFront(); err != nil {
		return err
	}
	j.notifyRoom()
	return nil
}

// cutFront moves the header past the leading records no log needs: to the
// oldest record still needed or, if none, to the tail (where the next
// record goes).
func (j *Journal) cutFront() error {
	j.hdrMu.Lock()
	defer j.hdrMu.Unlock()
	j.mu.Lock()
	k := 0
	for k < len(j.recs) && len(j.recs[k].logs) == 0 {
		k++
	}
	if k == 0 {
		j.mu.Unlock()
		return nil
	}
	pos, seq := j.tail, j.nextSeq
	if k < len(j.recs) {
		pos, seq = j.recs[k].pos, j.recs[k].seq
	}
	counter := j.counter + 1
	j.mu.Unlock()
	if err := j.writeHeader(counter, pos, seq); err != nil {
		return err
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, r := range j.recs[:k] {
		j.live -= r.size
	}
	j.recs = append(j.recs[:0:0], j.recs[k:]...)
	j.counter = counter
	if len(j.recs) > 0 {
		j.start, j.startSeq = j.recs[0].pos, j.recs[0].seq
	} else {
		j.start, j.startSeq = pos, seq
	}
	j.cuts++
	return nil
}

// notifyRoom wakes every attached store's Applies waiting for room (no
// store lock held by the caller).
func (j *Journal) notifyRoom() {
	j.mu.Lock()
	ds := make([]*DirStore, 0, len(j.stores))
	for _, a := range j.stores {
		ds = append(ds, a.d)
	}
	j.mu.Unlock()
	for _, d := range ds {
		d.mu.Lock()
		d.cond.Broadcast()
		d.mu.Unlock()
	}
}

// rewind moves an empty journal's ring to its beginning (the header
// rewritten and synced), so that a record that fits in the ring but not
// between the tail and the end of the file finds room. Called by a round
// (j.mu not held, no record live).
func (j *Journal) rewind() error {
	j.hdrMu.Lock()
	defer j.hdrMu.Unlock()
	j.mu.Lock()
	counter, seq := j.counter+1, j.nextSeq
	j.mu.Unlock()
	if err := j.writeHeader(counter, journalDataStart, seq); err != nil {
		return err
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	j.counter, j.start, j.startSeq, j.tail = counter, journalDataStart, seq, journalDataStart
	j.cuts++
	return nil
}

// writeHeader writes the header of generation counter (the ring starting
// at pos with sequence seq) into its slot and syncs it: the slots
// alternate, so a torn header write leaves the other generation whole.
func (j *Journal) writeHeader(counter uint64, pos int64, seq uint64) error {
	slot := int64(counter%2) * journalSlotSize
	if _, err := j.f.WriteAt(encodeJournalHeader(counter, j.size, pos, seq, &j.key), slot); err != nil {
		return fmt.Errorf("replog: journal %s: write header: %w", j.path, err)
	}
	if !j.noSync {
		if err := j.syncer.sync(j.f); err != nil {
			return fmt.Errorf("replog: journal %s: sync: %w", j.path, err)
		}
		j.syncs.Add(1)
	}
	return nil
}

// Close closes the file. A shared journal is closed by its caller once
// every store on it is closed (a store still attached is an error).
// Errors: ErrClosed if closed before, ErrInvalidOptions if a store is
// still attached, or the file's close error.
func (j *Journal) Close() error {
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		return ErrClosed
	}
	if n := len(j.stores); n > 0 && j.shared {
		j.mu.Unlock()
		return fmt.Errorf("%w: journal %s: %d stores still open on it", ErrInvalidOptions, j.path, n)
	}
	j.closed = true
	j.mu.Unlock()
	j.syncer.close()
	return j.f.Close()
}

// fingerprint names the journal file: the first 8 bytes of a hash of its
// key (drawn when the file was created), which a format 3 directory
// records, so that it is never opened on another journal.
func (j *Journal) fingerprint() uint64 {
	h := sha256.Sum256(append([]byte("replog journal fingerprint\n"), j.key[:]...))
	return binary.BigEndian.Uint64(h[:8])
}
