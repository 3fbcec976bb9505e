package storage

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/replog-io/replog/protocol"
)

// ErrReadOnly: Apply on a store opened with OpenDirReadOnly.
var ErrReadOnly = errors.New("replog: store is read-only")

// DirStore is the Store of a data directory (OpenDir): the log is a
// sequence of bbolt segment files, each a contiguous offset range. The
// last one, the active segment (DataFileName), is the only file written:
// it holds the newest entries and the whole of the log's small state — the
// log start, the epoch map, the voter-set rows, the quorum state, the HW
// checkpoint, the directory's identity, and the table of sealed segments
// before it — so that every Apply is one bbolt transaction of one file
// (bbolt commits it with two fsyncs: the pages, then the meta page).
//
// When the active file holds DirOptions.SegmentBytes, the next Apply that
// appends rolls it: a new active file gets that state and the Apply's own
// writes in one transaction under a temporary name, the old one gets its
// sealed name (a hard link), and a rename of the new file over
// DataFileName commits the roll and the Apply. The new file is made ahead,
// off the append path, by the store's goroutine (background) once the
// active file is half full. Sealed segments are never written again; a
// truncation into one lowers its end in the table, and a prefix deletion
// drops the segments wholly below the new log start from the table, their
// files closed and unlinked by the store's goroutine after the Apply: work
// per deletion independent of the entries it drops, none of it waited for
// by appends.
//
// Open reads only the active file, and of it only the pages it needs
// (verified first; the rest of the file is verified by a goroutine of the
// store's from Open until its end or Close, see activeCheck), and lists
// the directory; a sealed segment is opened read-only, and
// verified, when a read first needs it, and at most maxOpenSealed unused
// ones stay open. Reads take no lock that Apply takes (only a short one
// around the open-file cache), so reads of old segments never hold up
// appends. See docs/storage.md.
type DirStore struct {
	dir      string
	opts     DirOptions // defaults applied
	log      hclog.Logger
	readOnly bool
	dirLock  *os.File // the directory, flocked for the store's lifetime
	state    atomic.Pointer[dirState]
	identity *Identity // recorded in the active file; set before the store is handed out
	closed   atomic.Bool

	// check verifies in the background the pages of the active file that
	// Open did not (nil: Open verified it all); see activeCheck.
	check *activeCheck

	// mu serializes Apply and Close, and guards nextAsked (with the
	// journal: ckMu guards it) and pending.
	mu        sync.Mutex
	nextAsked *segFile // the active file for which bg was last asked to prepare the next one
	// compactions counts the segments CompactSegment replaced.
	compactions atomic.Uint64
	// sealedReads counts the reads of sealed segments (acquire's).
	sealedReads atomic.Uint64
	// failMu guards failed, the latched error of a failed commit or
	// checkpoint.
	failMu sync.Mutex
	failed error

	// With the commit journal (dirjournal.go): j is the journal, jv the
	// published journal view (nil without a journal), pending the batches
	// in the journal not yet in the segments, ckMu serializes the
	// transactions of the segments (checkpoints, and an Apply too large
	// for the journal), cond (on mu) wakes Applies waiting for room when
	// a checkpoint cuts the journal, ckpt is the checkpointer goroutine.
	j       *Journal
	logID   uint32                  // the store's log ID in j
	jstat   atomic.Pointer[Journal] // j, for Stats (which takes no lock)
	segJSeq uint64                  // the newest journal record in the segments (guarded by ckMu)
	jv      atomic.Pointer[journalView]
	pending []pendingBatch
	ckMu    sync.Mutex
	cond    *sync.Cond
	ckpt    *checkpointer
	// abandon (tests): Close checkpoints nothing, as if the process died.
	abandon bool

	// bg is the goroutine of a read-write store: the next active file made
	// ahead of the roll, a deletion's files closed and unlinked after its
	// Apply (nil when read-only).
	bg *background

	// cacheMu guards the segFiles' handles, refs and flags, openFiles and
	// useClock; it is never held across a read or an open of a file.
	cacheMu   sync.Mutex
	openFiles map[*segFile]struct{} // sealed segments with an open handle
	useClock  uint64

	applies, writes, commits, rolls, segsDeleted                             atomic.Uint64
	checkpoints, checkpointNanos, checkpointMax, journalWaits, directApplies atomic.Uint64
	batches                                                                  atomic.Uint64
}

// dirState is one published version of a DirStore's state; never mutated.
type dirState struct {
	log    *logState
	base   uint64      // the active segment's first offset
	sealed []sealedSeg // in offset order: sealed[i].end == sealed[i+1].base, the last end == base
	active *segFile
	format byte // of the active file
}

// DirStats are a DirStore's counters, for tests and benchmarks.
type DirStats struct {
	// Applies is the number of Apply calls that ran a transaction (those
	// refused because the store was closed, read-only or had failed are
	// not counted), and Writes the number of writes (protocol.Write) in
	// them.
	Applies, Writes uint64
	// Commits is the number of write transactions committed to the
	// segment files: at most one per Apply, whatever it holds (none for
	// an Apply that changed nothing), so one bbolt commit (two fsyncs)
	// per Apply; a rolling Apply's commit is the new active file's. With
	// the journal, one per checkpoint transaction and per Apply too large
	// for the journal instead.
	Commits uint64
	// Rolls is the number of segments sealed since the store was opened.
	Rolls uint64
	// SegmentsDeleted is the number of sealed segment files unlinked since
	// the store was opened (a prefix deletion's by the store's goroutine,
	// after its Apply returned).
	SegmentsDeleted uint64
	// Compactions is the number of sealed segments CompactSegment
	// replaced with their rewritten file since the store was opened.
	Compactions uint64
	// SealedReads is the number of reads of a sealed segment's file since
	// the store was opened: one per segment an Entries call reads in, and
	// one per CompactSegment.
	SealedReads uint64
	// Sealed is the number of sealed segments in the log now, and Open how
	// many of them have an open handle.
	Sealed, Open int
	// PagesWritten is the number of bbolt pages (meta pages included) the
	// active segment file has written since it was opened or became the
	// active one (0 once the store is closed), and PageSize their size:
	// the store's own share of write amplification.
	PagesWritten uint64
	PageSize     int

	// Fsyncs is the number of fsyncs (fdatasyncs) of the store's commits
	// and checkpoints: two per bbolt commit (its pages, then its meta
	// page) and one per journal record and per journal cut (a roll's
	// syncs of the new file and of the directory are not counted).
	// Without the journal it is 2 × Commits; with it, an Apply costs one.
	Fsyncs uint64
	// GroupCommits is the number of journal records written: one per
	// round of the journal (0 without the journal), and JournalBatches
	// the store's Applies in them (one per Apply that changed something).
	// A round takes every Apply waiting for it, so on a shared journal
	// (DirOptions.SharedJournal) GroupCommits, Fsyncs' journal share,
	// JournalBytes and JournalLive are the journal's, counted for all the
	// stores on it (JournalStats), and JournalBatches the store's own.
	GroupCommits, JournalBatches uint64
	// JournalBytes is the bytes written to the journal's records (headers
	// and padding included), and JournalLive the bytes of those not yet
	// cut (in the journal, waiting for a checkpoint).
	JournalBytes uint64
	JournalLive  int64
	// JournalWaits is the number of times an Apply waited for a
	// checkpoint because the journal was full, and DirectApplies the
	// number of Applies too large for the journal, applied to the
	// segments directly.
	JournalWaits, DirectApplies uint64
	// Checkpoints is the number of checkpoint transactions (journal
	// writes moved into the segments, each a bbolt commit followed by a
	// cut of the journal), CheckpointTime the total duration of their
	// segment transactions and CheckpointMax the longest.
	Checkpoints                   uint64
	CheckpointTime, CheckpointMax time.Duration
}

// activeMeta is what an active file says about the log.
type activeMeta struct {
	st       *logState
	base     uint64
	table    [][2]uint64 // sealed segments: base, end
	identity *Identity
	format   byte
	jseq     uint64 // the newest journal record the file holds (0: none)
}

// openDirStore opens the store of data directory dir, whose flocked
// directory handle lock it takes over on success. A missing or empty
// active file becomes a new empty store (OpenDir decides before whether
// that is allowed), except read-only.
func openDirStore(dir string, lock *os.File, opts DirOptions, readOnly bool) (*DirStore, error) {
	d := &DirStore{dir: dir, opts: opts, log: opts.Logger, readOnly: readOnly, openFiles: map[*segFile]struct{}{}}
	d.cond = sync.NewCond(&d.mu)
	format, stamped, err := readFormat(dir)
	if err != nil {
		return nil, err
	}
	activePath := filepath.Join(dir, DataFileName)
	kind := kindActive
	if readOnly {
		kind = kindReadOnly
	} else if err := os.Remove(filepath.Join(dir, nextActiveName)); err == nil {
		d.log.Info("removed the new active file of a roll that did not complete", "path", filepath.Join(dir, nextActiveName))
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("replog: open store %s: %w", dir, err)
	}
	if !readOnly {
		if err := removeCompactLeftovers(dir); err != nil {
			return nil, err
		}
	}
	db, check, err := openSegment(activePath, kind, &d.opts)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*DirStore, error) {
		if check != nil {
			check.abort()
		}
		_ = db.Close()
		return nil, err
	}
	var paths func(lo uint64) error
	if check != nil {
		paths = check.paths
	}
	m, err := loadActiveProtected(db, !readOnly, paths)
	if errors.Is(err, errFullWalk) {
		// A read of Open's would leave the pages checked so far: verify
		// the whole file now, as a sealed segment is.
		check.abort()
		check = nil
		if err = verifyFile(activePath); err == nil {
			m, err = loadActiveProtected(db, !readOnly, nil)
		}
	}
	if err != nil {
		return fail(fmt.Errorf("replog: open store %s: %w", activePath, err))
	}
	d.identity = m.identity
	active := &segFile{path: activePath, db: db, active: true, check: check, pageSize: db.Info().PageSize}
	st := &dirState{log: m.st, base: m.base, active: active, format: m.format}
	if err := d.attachSealed(st, m.table); err != nil {
		return fail(err)
	}
	d.state.Store(st)
	d.dirLock = lock
	if !readOnly {
		d.bg = newBackground()
		go d.bg.run(d)
	}
	if check != nil {
		// The walk holds the file (through a roll, which makes it a
		// sealed segment, until its end).
		check.seg = active
		active.refs++
		d.check = check
		go check.run(d)
	}
	if err := d.openJournal(format, stamped, m.jseq); err != nil {
		d.dirLock = nil // the caller keeps its lock
		_ = d.Close()
		return nil, err
	}
	d.log.Debug("store opened", "dir", dir, "log_start", m.st.logStart, "leo", m.st.leo, "last_epoch", m.st.lastEpoch(),
		"sealed_segments", len(st.sealed), "active_base", m.base, "read_only", readOnly, "no_sync", opts.NoSync)
	return d, nil
}

// attachSealed checks the table of sealed segments against the directory
// (every file present) and fills st.sealed; unless read-only it removes
// orphans: sealed files no longer in the table (a crash between a
// deletion's commit and its unlink, or a roll's link and its rename).
func (d *DirStore) attachSealed(st *dirState, table [][2]uint64) error {
	ents, err := os.ReadDir(d.dir)
	if err != nil {
		return fmt.Errorf("replog: open store %s: %w", d.dir, err)
	}
	present := map[uint64]bool{}
	for _, e := range ents {
		if base, ok := parseSegmentFileName(e.Name()); ok {
			present[base] = true
		}
	}
	for _, r := range table {
		p := filepath.Join(d.dir, segmentFileName(r[0]))
		if !present[r[0]] {
			return fmt.Errorf("replog: segment %s: %w: the file of offsets [%d, %d) is missing (restore it, or wipe the directory so the node rejoins as a new incarnation)",
				p, ErrCorrupt, r[0], r[1])
		}
		delete(present, r[0])
		st.sealed = append(st.sealed, sealedSeg{f: &segFile{path: p}, base: r[0], end: r[1]})
	}
	for base := range present {
		p := filepath.Join(d.dir, segmentFileName(base))
		if d.readOnly {
			d.log.Info("segment file not in the log (left by a crash; the next read-write open removes it)", "path", p)
			continue
		}
		d.log.Info("removing a segment file no longer in the log (left by a crash)", "path", p)
		if err := os.Remove(p); err != nil {
			return fmt.Errorf("replog: open store %s: remove orphan segment: %w", d.dir, err)
		}
	}
	return nil
}

// loadActiveProtected is loadActive with faults and bbolt's assertions
// turned into ErrCorrupt.
func loadActiveProtected(db *bolt.DB, create bool, paths func(lo uint64) error) (m *activeMeta, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			m, err = nil, fmt.Errorf("%w: reading the store's records: %v", ErrCorrupt, r)
		}
	}()
	return loadActive(db, create, paths)
}

// loadActive reads and checks the state an active file records; a fresh
// file (no buckets) gets format 1's buckets when create is set. Only the
// active file is read: the sealed segments' ranges come from its table,
// their files are checked when first read. paths, if set, checks the
// entries tree's pages the reads of entries will touch, given the lowest
// live offset of the file (see activeCheck).
func loadActive(db *bolt.DB, create bool, paths func(lo uint64) error) (*activeMeta, error) {
	m := &activeMeta{st: &logState{}}
	fresh := false
	load := func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if meta == nil && !tx.Writable() {
			fresh = true
			return nil
		}
		if meta == nil {
			if tx.Bucket(bucketEntries) != nil || tx.Bucket(bucketEpochs) != nil {
				return fmt.Errorf("%w: metadata bucket missing", ErrCorrupt)
			}
			for _, name := range [][]byte{bucketEntries, bucketEpochs, bucketQuorum, bucketMeta, bucketVoters} {
				if _, err := tx.CreateBucket(name); err != nil {
					return err
				}
			}
			meta = tx.Bucket(bucketMeta)
			m.format = boltFormat
			if err := meta.Put(keyFormat, []byte{boltFormat}); err != nil {
				return err
			}
			return meta.Put(keyLogStart, u64key(0))
		}
		return readActive(tx, m, paths)
	}
	if err := db.View(load); err != nil {
		return nil, err
	}
	if fresh {
		if !create {
			return nil, fmt.Errorf("%w: the active file holds no store", ErrCorrupt)
		}
		if err := db.Update(load); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// readActive fills m from an existing active file's transaction (paths: as
// for loadActive).
func readActive(tx *bolt.Tx, m *activeMeta, paths func(lo uint64) error) error {
	st := m.st
	meta := tx.Bucket(bucketMeta)
	eb, epb, qb := tx.Bucket(bucketEntries), tx.Bucket(bucketEpochs), tx.Bucket(bucketQuorum)
	if eb == nil || epb == nil || qb == nil {
		return fmt.Errorf("%w: bucket missing", ErrCorrupt)
	}
	f := meta.Get(keyFormat)
	if len(f) != 1 || (f[0] != boltFormat && f[0] != boltFormatSegmented) {
		return fmt.Errorf("%w: unknown store format %x", ErrCorrupt, f)
	}
	m.format = f[0]
	v := meta.Get(keyLogStart)
	if len(v) != 8 {
		return fmt.Errorf("%w: log start record of %d bytes", ErrCorrupt, len(v))
	}
	st.logStart = binary.BigEndian.Uint64(v)
	if v := meta.Get(keyHW); v != nil {
		if len(v) != 8 {
			return fmt.Errorf("%w: HW checkpoint record of %d bytes", ErrCorrupt, len(v))
		}
		st.hw, st.hwOK = binary.BigEndian.Uint64(v), true
	}
	if v := meta.Get(keyJournalSeq); v != nil {
		if len(v) != 8 {
			return fmt.Errorf("%w: journal sequence record of %d bytes", ErrCorrupt, len(v))
		}
		m.jseq = binary.BigEndian.Uint64(v)
	}
	if v := meta.Get(keyIdentity); v != nil {
		r, err := decodeIdentity(v)
		if err != nil {
			return fmt.Errorf("%w: identity record: %v", ErrCorrupt, err)
		}
		m.identity = &r.Identity
	}
	if v := qb.Get(keyQuorum); v != nil {
		qs, err := decodeQuorumState(v)
		if err != nil {
			return err
		}
		st.quorum = qs
	}
	if m.format == boltFormatSegmented {
		v := meta.Get(keyBase)
		if len(v) != 8 {
			return fmt.Errorf("%w: segment base record of %d bytes", ErrCorrupt, len(v))
		}
		m.base = binary.BigEndian.Uint64(v)
		sb := tx.Bucket(bucketSegments)
		if sb == nil {
			return fmt.Errorf("%w: segments bucket missing", ErrCorrupt)
		}
		err := sb.ForEach(func(k, v []byte) error {
			if len(k) != 8 || len(v) != 8 {
				return fmt.Errorf("%w: segment table row of bad length", ErrCorrupt)
			}
			m.table = append(m.table, [2]uint64{binary.BigEndian.Uint64(k), binary.BigEndian.Uint64(v)})
			return nil
		})
		if err != nil {
			return err
		}
	}
	if err := checkTable(m.table, m.base, st.logStart); err != nil {
		return err
	}
	if paths != nil {
		if err := paths(max(m.base, st.logStart)); err != nil {
			return err
		}
	}
	c := eb.Cursor()
	st.leo = max(m.base, st.logStart)
	first, _ := c.First()
	last, _ := c.Last()
	if (first != nil && len(first) != 8) || (last != nil && len(last) != 8) {
		return fmt.Errorf("%w: entry key of bad length", ErrCorrupt)
	}
	if first != nil && binary.BigEndian.Uint64(first) < m.base {
		return fmt.Errorf("%w: entry at offset %d below the segment's base %d", ErrCorrupt, binary.BigEndian.Uint64(first), m.base)
	}
	if last != nil && binary.BigEndian.Uint64(last)+1 > st.leo {
		st.leo = binary.BigEndian.Uint64(last) + 1
	}
	err := epb.ForEach(func(k, v []byte) error {
		if len(k) != 8 || len(v) != 8 {
			return fmt.Errorf("%w: epoch map row of bad length", ErrCorrupt)
		}
		st.epochs = append(st.epochs, protocol.EpochStart{Epoch: binary.BigEndian.Uint64(k), StartOffset: binary.BigEndian.Uint64(v)})
		return nil
	})
	if err != nil {
		return err
	}
	if err := checkEpochs(st.epochs, st.logStart, st.leo); err != nil {
		return err
	}
	if st.voters, err = readVoters(tx); err != nil {
		return err
	}
	if err := checkVoters(st.voters, st.logStart, st.leo); err != nil {
		return err
	}
	if st.hwOK && st.hw > st.leo {
		return fmt.Errorf("%w: HW checkpoint %d above LEO %d", ErrCorrupt, st.hw, st.leo)
	}
	// The active segment's first and last live entries decode and carry
	// the epoch the map gives them (the sealed segments' are checked when
	// first read).
	if lo := max(m.base, st.logStart); st.leo > lo {
		for _, off := range []uint64{lo, st.leo - 1} {
			if err := checkEntryAt(eb, st.epochs, off); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkEntryAt checks that the entry at off exists, decodes, and has the
// epoch epochs gives it.
func checkEntryAt(eb *bolt.Bucket, epochs []protocol.EpochStart, off uint64) error {
	return checkEntryOrHoleAt(eb, nil, epochs, off)
}

// checkEntryOrHoleAt is checkEntryAt in a segment whose holes bucket is hb
// (nil: none): a compacted offset passes if its run carries the epoch the
// map gives.
func checkEntryOrHoleAt(eb, hb *bolt.Bucket, epochs []protocol.EpochStart, off uint64) error {
	v := eb.Get(u64key(off))
	var e protocol.Entry
	if v == nil {
		h, ok, err := holeAt(hb, off)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%w: entry at offset %d missing", ErrCorrupt, off)
		}
		e = h.placeholder(off)
	} else {
		var err error
		if e, err = decodeEntry(v); err != nil {
			return fmt.Errorf("entry at offset %d: %w", off, err)
		}
	}
	if want := epochAt(epochs, off); e.Epoch != want {
		return fmt.Errorf("%w: entry at offset %d has epoch %d, epoch map says %d", ErrCorrupt, off, e.Epoch, want)
	}
	return nil
}

// checkTable checks the sealed segments' ranges: non-empty, contiguous,
// ending at the active base, the first covering the log start (a table
// without rows: the log start at or above the base).
func checkTable(table [][2]uint64, base, logStart uint64) error {
	if len(table) == 0 {
		if logStart < base {
			return fmt.Errorf("%w: log start %d below the active segment's base %d and no sealed segment", ErrCorrupt, logStart, base)
		}
		return nil
	}
	for i, r := range table {
		if r[0] >= r[1] || (i > 0 && r[0] != table[i-1][1]) {
			return fmt.Errorf("%w: segment table row [%d, %d) out of order", ErrCorrupt, r[0], r[1])
		}
	}
	if table[len(table)-1][1] != base {
		return fmt.Errorf("%w: the last sealed segment ends at %d, the active segment starts at %d", ErrCorrupt, table[len(table)-1][1], base)
	}
	if logStart < table[0][0] || logStart >= table[0][1] {
		return fmt.Errorf("%w: log start %d outside the first segment [%d, %d)", ErrCorrupt, logStart, table[0][0], table[0][1])
	}
	return nil
}

// openSealed opens the sealed segment at path, of offsets [base, end),
// verified, and checks that its first and last live entries decode and
// carry the epochs st's map gives them. Errors name the file and the
// offsets.
func (d *DirStore) openSealed(path string, base, end uint64, st *dirState) (*bolt.DB, error) {
	if sealedOpenHook != nil {
		sealedOpenHook(path)
	}
	db, _, err := openSegment(path, kindSealed, &d.opts)
	if err != nil {
		return nil, fmt.Errorf("segment of offsets [%d, %d): %w", base, end, err)
	}
	err = func() (err error) {
		defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("%w: %v", ErrCorrupt, r)
			}
		}()
		return db.View(func(tx *bolt.Tx) error {
			eb := tx.Bucket(bucketEntries)
			if eb == nil {
				return fmt.Errorf("%w: entries bucket missing", ErrCorrupt)
			}
			if lo := max(base, st.log.logStart); lo < end {
				for _, off := range []uint64{lo, end - 1} {
					if err := checkEntryOrHoleAt(eb, tx.Bucket(bucketHoles), st.log.epochs, off); err != nil {
						return err
					}
				}
			}
			return nil
		})
	}()
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("replog: segment %s of offsets [%d, %d): %w", path, base, end, err)
	}
	return db, nil
}

// storeIdentity records id in the active file (durably unless NoSync), so
// that the data names its directory's identity even if the identity file
// is lost; rolls copy it into each new active file. Called by OpenDir
// before the store is handed out; Apply never touches this key.
func (d *DirStore) storeIdentity(id Identity) error {
	d.ckMu.Lock() // a checkpoint may be rolling the active file
	defer d.ckMu.Unlock()
	db := d.state.Load().active.db
	if d.check != nil {
		if err := d.check.awaitWrite(false); err != nil {
			return fmt.Errorf("replog: store %s: record identity: %w", db.Path(), err)
		}
	}
	err := db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMeta).Put(keyIdentity, encodeIdentity(identityRecord{Identity: id, ready: true}))
	})
	if err != nil {
		return fmt.Errorf("replog: store %s: record identity: %w", db.Path(), err)
	}
	d.identity = &id
	return nil
}

// Apply implements Store: one bbolt transaction of the active file for all
// of ws, on the caller's goroutine. When the active file is full and ws
// appends, the transaction is instead the first one of a new active file,
// which a roll then puts in place (see rolling): the roll and ws commit
// together. Sealed segments that a truncation in ws drops are unlinked
// after the commit; those a prefix deletion drops are closed and unlinked
// after it by the store's goroutine (see background), Apply does not wait.
// On a read-only store: ErrReadOnly. Right after Open it may wait for the
// verification that follows Open (until it has checked the free list, or,
// with a truncation, all of the file; see WaitVerified); once that found
// damage, every Apply returns it (wrapping ErrCorrupt, naming the file).
//
// With the commit journal (DirOptions.Journal) the writes are validated
// the same way, then written as one journal record and synced (one
// fdatasync), and Apply returns; a checkpoint moves them into the
// segments later (see dirjournal.go). A full journal makes Apply wait for
// the checkpoint's cut; a record larger than half the journal is applied
// to the segments directly. A failed journal write or checkpoint latches
// as a failed commit does.
func (d *DirStore) Apply(ws []protocol.Write) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed.Load() {
		return ErrClosed
	}
	if d.readOnly {
		return ErrReadOnly
	}
	if err := d.failure(); err != nil {
		return err
	}
	if d.j != nil {
		return d.applyJournal(ws)
	}
	return d.applyBolt(ws, nil, 0)
}

// applyBolt applies ws in one transaction of the active segment file (see
// Apply), recording jseq as the newest journal record the segments hold
// if it is not 0 (a checkpoint). vals, if not nil, holds each append's
// entries already encoded as stored (a checkpoint's, from the journal
// record). The caller holds mu, or with the journal ckMu.
func (d *DirStore) applyBolt(ws []protocol.Write, vals [][][]byte, jseq uint64) error {
	if d.check != nil {
		// Until the walk of the active file as Open found it has passed
		// the free list (a page both free and in use would be handed out
		// and overwritten), and for a truncation every leaf, wait.
		if err := d.check.awaitWrite(truncates(ws)); err != nil {
			if errors.Is(err, ErrClosed) {
				return ErrClosed
			}
			return fmt.Errorf("replog: store %s: %w (the store refuses writes once its files are found damaged; close it, then restore the directory or wipe it)", d.dir, err)
		}
	}
	if d.j == nil {
		d.applies.Add(1)
		d.writes.Add(uint64(len(ws)))
	}
	cur := d.state.Load()
	tx, err := cur.active.db.Begin(true)
	if err != nil {
		return d.fail(err, len(ws))
	}
	defer func() { _ = tx.Rollback() }() // no-op after Commit
	var r *rolling
	if tx.Size() >= d.opts.SegmentBytes && cur.log.leo > cur.base && appends(ws) {
		_ = tx.Rollback()
		if r, err = d.beginRoll(cur); err != nil {
			return d.fail(err, len(ws))
		}
		defer r.end() // runs before the Rollback above: the next file goes back unless the roll committed
		cur, tx = r.cur, r.tx
	}
	eb := tx.Bucket(bucketEntries)
	eb.FillPercent = 1.0 // entries are only appended at the end: pack pages full
	st, base, sealed := cur.log, cur.base, cur.sealed
	var truncated, deleted []*segFile
	changed := false
	for i := range ws {
		w := &ws[i]
		next, err := st.after(w)
		if err != nil {
			return writeErr(ws, i, err) // rolled back: nothing applied
		}
		if next == st {
			continue
		}
		var wv [][]byte
		if vals != nil {
			wv = vals[i]
		}
		if err := putWrite(tx, eb, st, next, w, wv, d.log); err != nil {
			return d.fail(err, len(ws))
		}
		switch w.Kind {
		case protocol.WriteTruncate:
			if w.Offset < base {
				var gone []*segFile
				sealed, gone = truncateSealed(sealed, w.Offset)
				truncated, base = append(truncated, gone...), w.Offset
			}
		case protocol.WriteDeletePrefix:
			var gone []*segFile
			sealed, gone = pruneSealed(sealed, next.logStart)
			deleted = append(deleted, gone...)
		}
		st, changed = next, true
	}
	if !changed {
		return nil // nothing to write: no fsync (no roll either)
	}
	if jseq == 0 && r != nil {
		// A roll starts a file whose meta holds only what is written
		// now: the segments' journal sequence number goes with it, or
		// the next Open would replay records the segments hold (they
		// stay in the journal until it is cut, on a shared journal until
		// every log in them has checkpointed).
		jseq = d.segJSeq
	}
	if jseq != 0 {
		if err := tx.Bucket(bucketMeta).Put(keyJournalSeq, u64key(jseq)); err != nil {
			return d.fail(err, len(ws))
		}
	}
	if base != cur.base || len(truncated)+len(deleted) > 0 || !slices.Equal(sealed, cur.sealed) {
		if err := writeTable(tx, cur, base, sealed); err != nil {
			return d.fail(err, len(ws))
		}
	}
	hwm := tx.Size()
	next := &dirState{log: st, base: base, sealed: sealed, active: cur.active, format: cur.format}
	if r != nil {
		if err := d.commitRoll(r, next); err != nil {
			return d.fail(err, len(ws))
		}
	} else {
		if err := tx.Commit(); err != nil {
			return d.fail(err, len(ws))
		}
		d.state.Store(next)
	}
	d.commits.Add(1)
	// A truncation's segments go now: their names may be used again by
	// the next roll (a segment starting at or above the point). A
	// deletion's are all below the log start, their names never used again.
	d.drop(truncated)
	d.dropLater(deleted)
	if hwm >= d.opts.SegmentBytes/2 && d.nextAsked != next.active {
		// Half full: have the next active file ready before the roll.
		d.nextAsked = next.active
		d.bg.request()
	}
	return nil
}

// truncates reports whether ws holds a truncation.
func truncates(ws []protocol.Write) bool {
	for i := range ws {
		if ws[i].Kind == protocol.WriteTruncate {
			return true
		}
	}
	return false
}

func appends(ws []protocol.Write) bool {
	for i := range ws {
		if ws[i].Kind == protocol.WriteAppend && len(ws[i].Entries) > 0 {
			return true
		}
	}
	return false
}

// truncateSealed returns the sealed segments left by a truncation to t
// below the active base (t is at or above the log start, so inside one of
// them), and those it drops.
func truncateSealed(sealed []sealedSeg, t uint64) (kept []sealedSeg, dropped []*segFile) {
	i := sort.Search(len(sealed), func(i int) bool { return sealed[i].base > t }) - 1
	if i < 0 {
		i = 0 // not reached: the log start is in the first segment
	}
	keep := i + 1
	if sealed[i].base == t {
		keep = i
	}
	kept = append([]sealedSeg(nil), sealed[:keep]...)
	if keep > i {
		kept[i].end = t
	}
	for _, s := range sealed[keep:] {
		dropped = append(dropped, s.f)
	}
	return kept, dropped
}

// pruneSealed returns the sealed segments left when the log starts at
// logStart (those ending after it), and those it drops.
func pruneSealed(sealed []sealedSeg, logStart uint64) (kept []sealedSeg, dropped []*segFile) {
	i := 0
	for i < len(sealed) && sealed[i].end <= logStart {
		dropped = append(dropped, sealed[i].f)
		i++
	}
	return sealed[i:len(sealed):len(sealed)], dropped
}

// writeTable writes the active base and the segment table in tx, turning
// cur's into (base, sealed). Only a format 2 file has sealed segments to
// change.
func writeTable(tx *bolt.Tx, cur *dirState, base uint64, sealed []sealedSeg) error {
	sb := tx.Bucket(bucketSegments)
	if cur.format != boltFormatSegmented || sb == nil {
		return fmt.Errorf("storage: segment table change in a format %d file", cur.format) // not reached
	}
	if base != cur.base {
		if err := tx.Bucket(bucketMeta).Put(keyBase, u64key(base)); err != nil {
			return err
		}
	}
	now := make(map[uint64]uint64, len(sealed))
	for _, s := range sealed {
		now[s.base] = s.end
	}
	for _, s := range cur.sealed {
		end, ok := now[s.base]
		switch {
		case !ok:
			if err := sb.Delete(u64key(s.base)); err != nil {
				return err
			}
		case end != s.end:
			if err := sb.Put(u64key(s.base), u64key(end)); err != nil {
				return err
			}
		}
	}
	return nil
}

// rolling is a roll under way in an Apply (the caller holds mu): the next
// active file's transaction, which holds the log's state (writeNewActive)
// and then the Apply's writes, and the state the roll leaves (cur) for
// those writes to start from.
type rolling struct {
	d        *DirStore
	old      *dirState // the state before the roll
	cur      *dirState // the state after it, before the Apply's writes (active set at commit)
	db       *bolt.DB  // the next active file, under nextActiveName until committed
	tx       *bolt.Tx
	keep     bool  // the old active holds live entries: it becomes a sealed segment
	hwm      int64 // the old active's pages
	written  bool  // tx committed (then the file is never given back as prepared)
	renamed  bool  // the roll is committed: db is the active file
	released bool
}

// beginRoll starts a roll of cur's active segment to a new one at the LEO:
// it takes the next active file (the one the store's goroutine prepared,
// waiting for it if it is being prepared; else one made now), begins its
// transaction and writes the log's state into it. The caller's Apply adds
// its writes to the transaction, then commitRoll commits the roll, or end
// abandons it.
func (d *DirStore) beginRoll(cur *dirState) (r *rolling, err error) {
	st := cur.log
	r = &rolling{d: d, old: cur, keep: st.leo > st.logStart}
	sealed := append([]sealedSeg(nil), cur.sealed...)
	if r.keep {
		sealed = append(sealed, sealedSeg{f: cur.active, base: cur.base, end: st.leo})
	}
	if err := cur.active.db.View(func(tx *bolt.Tx) error { r.hwm = tx.Size(); return nil }); err != nil {
		return nil, err
	}
	r.db = d.bg.take()
	defer func() {
		if err != nil {
			r.end()
			err = fmt.Errorf("roll to a new segment at offset %d: %w", st.leo, err)
		}
	}()
	if r.db == nil {
		nextPath := filepath.Join(d.dir, nextActiveName)
		if err := os.Remove(nextPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return r, err
		}
		if r.db, _, err = openSegment(nextPath, kindNew, &d.opts); err != nil {
			return r, err
		}
	}
	if r.tx, err = r.db.Begin(true); err != nil {
		return r, err
	}
	if err := writeNewActive(r.tx, st, st.leo, sealed, d.identity); err != nil {
		return r, err
	}
	r.cur = &dirState{log: st, base: st.leo, sealed: sealed, format: boltFormatSegmented}
	return r, nil
}

// end releases what a roll took: if it did not commit, its transaction is
// rolled back and an unwritten next file goes back to the store's
// goroutine for the next roll (a written one is removed). Idempotent.
func (r *rolling) end() {
	if r.released {
		return
	}
	r.released = true
	if r.tx != nil && !r.written {
		_ = r.tx.Rollback()
	}
	var back *bolt.DB
	switch {
	case r.renamed || r.db == nil:
	case r.written:
		r.d.discardNext(r.db)
	default:
		back = r.db // as prepared: the rolled-back transaction left no trace
	}
	r.d.bg.put(back)
}

// commitRoll commits the roll r with the Apply's writes in its transaction
// and publishes next (whose active it sets to the new file): (1) the new
// file's transaction is committed and the file synced, (2) the old active
// file is linked to its sealed name, directory synced, (3) the new file is
// renamed over DataFileName, directory synced: the commit point of the
// roll and of the Apply (docs/storage.md lists what a crash
// between the steps leaves). The old file's trimming and the closing of
// handles it evicts are left to the store's goroutine.
func (d *DirStore) commitRoll(r *rolling, next *dirState) (err error) {
	defer r.end()
	activePath := filepath.Join(d.dir, DataFileName)
	nextPath := filepath.Join(d.dir, nextActiveName)
	sealedPath := filepath.Join(d.dir, segmentFileName(r.old.base))
	base := r.old.log.leo
	defer func() {
		if err != nil {
			err = fmt.Errorf("roll to a new segment at offset %d: %w", base, err)
		}
	}()
	// (1) One sync of the file instead of bbolt's two (pages, then meta
	// page): the order of its writes does not matter, the file is not in
	// the log until (3) and is synced whole before it.
	r.db.NoSync = true
	err = r.tx.Commit()
	r.db.NoSync = d.opts.NoSync
	r.written = true // (a failed commit may have written some of it)
	if err == nil && !d.opts.NoSync {
		err = r.db.Sync()
	}
	if err != nil {
		return err
	}
	if rollHook != nil {
		rollHook("next")
	}
	// (2)
	if r.keep {
		if err = os.Remove(sealedPath); errors.Is(err, fs.ErrNotExist) { // an orphan not in the table
			err = nil
		}
		if err == nil {
			err = os.Link(activePath, sealedPath)
		}
		if err == nil && !d.opts.NoSync {
			err = SyncDir(d.dir)
		}
		if err != nil {
			return err
		}
		if rollHook != nil {
			rollHook("linked")
		}
	}
	// (3)
	if err := os.Rename(nextPath, activePath); err != nil {
		return err
	}
	r.renamed = true
	next.active = &segFile{path: activePath, db: r.db, active: true, pageSize: r.db.Info().PageSize}
	d.state.Store(next)
	d.rolls.Add(1)
	old := r.old.active
	var closes []*bolt.DB
	d.cacheMu.Lock()
	old.active = false
	if r.keep {
		old.path = sealedPath
		d.openFiles[old] = struct{}{}
	} else if old.dropped = true; old.refs == 0 {
		// Nothing live in it: the file has no name left, and is freed when
		// its last reader closes it.
		closes = append(closes, old.db)
		old.db = nil
	}
	closes = append(closes, d.evictLocked()...)
	d.cacheMu.Unlock()
	var trim *os.File
	if r.keep {
		// bbolt grows its file ahead of its pages: the sealed file keeps
		// only its pages (never read beyond them). Through a handle opened
		// now: the name may belong to another file by the time the job
		// runs (a truncation drops this segment, a roll reuses its name).
		var oerr error
		if trim, oerr = os.OpenFile(sealedPath, os.O_WRONLY, 0); oerr != nil {
			d.log.Warn("could not trim a sealed segment", "path", sealedPath, "error", oerr)
		}
	}
	if len(closes) > 0 || trim != nil {
		hwm := r.hwm
		d.bg.enqueue(func() {
			closeDBs(d, closes)
			if trim != nil {
				if err := trim.Truncate(hwm); err != nil {
					d.log.Warn("could not trim a sealed segment", "path", sealedPath, "error", err)
				}
				_ = trim.Close()
			}
		})
	}
	if !d.opts.NoSync {
		if err := SyncDir(d.dir); err != nil {
			return fmt.Errorf("sync directory: %w", err)
		}
	}
	if rollHook != nil {
		rollHook("renamed")
	}
	d.log.Debug("rolled to a new segment", "base", base, "sealed", sealedPath, "sealed_bytes", r.hwm)
	return nil
}

// createBuckets creates a segment file's buckets in tx (those it has
// already are kept) and puts them in bs if not nil.
func createBuckets(tx *bolt.Tx, bs map[string]*bolt.Bucket) error {
	for _, name := range [][]byte{bucketEntries, bucketEpochs, bucketQuorum, bucketMeta, bucketSegments, bucketVoters} {
		b, err := tx.CreateBucketIfNotExists(name)
		if err != nil {
			return err
		}
		if bs != nil {
			bs[string(name)] = b
		}
	}
	return nil
}

// writeNewActive writes a roll's new active file (a file without buckets
// or with empty ones): format 2, the log's state st (voter-set rows
// included), base, the sealed segments' table, the identity; no entries.
func writeNewActive(tx *bolt.Tx, st *logState, base uint64, sealed []sealedSeg, id *Identity) error {
	bs := map[string]*bolt.Bucket{}
	if err := createBuckets(tx, bs); err != nil {
		return err
	}
	meta := bs[string(bucketMeta)]
	puts := [][2][]byte{{keyFormat, {boltFormatSegmented}}, {keyLogStart, u64key(st.logStart)}, {keyBase, u64key(base)}}
	if st.hwOK {
		puts = append(puts, [2][]byte{keyHW, u64key(st.hw)})
	}
	if id != nil {
		puts = append(puts, [2][]byte{keyIdentity, encodeIdentity(identityRecord{Identity: *id, ready: true})})
	}
	for _, kv := range puts {
		if err := meta.Put(kv[0], kv[1]); err != nil {
			return err
		}
	}
	if st.quorum != (protocol.QuorumState{}) {
		if err := bs[string(bucketQuorum)].Put(keyQuorum, encodeQuorumState(st.quorum)); err != nil {
			return err
		}
	}
	for _, r := range st.epochs {
		if err := bs[string(bucketEpochs)].Put(u64key(r.Epoch), u64key(r.StartOffset)); err != nil {
			return err
		}
	}
	for _, r := range st.voters {
		if err := bs[string(bucketVoters)].Put(u64key(r.Offset), encodeVotersRow(r)); err != nil {
			return err
		}
	}
	for _, s := range sealed {
		if err := bs[string(bucketSegments)].Put(u64key(s.base), u64key(s.end)); err != nil {
			return err
		}
	}
	return nil
}

// fail latches err, an error of the transaction of an Apply of n writes
// (the caller holds mu), and returns what that Apply returns: after a
// failed fsync or page write the file and bbolt's in-memory free list may
// disagree, so no later transaction may run.
func (d *DirStore) fail(err error, n int) error {
	d.log.Error("commit failed", "dir", d.dir, "writes", n, "error", err)
	err = fmt.Errorf("replog: store %s: commit: %w", d.dir, err)
	d.setFailed(fmt.Errorf("%w (the store refuses writes after a failed commit; close and reopen it)", err))
	return err
}

// Entries implements Store. A read that spans segments reads each in turn
// (copying its entries out before moving on); a sealed segment's file is
// opened, and verified, at its first read; a read of entries of the active
// file (as Open found it) waits until the verification that follows Open
// has passed their pages. A damaged segment returns an error wrapping
// ErrCorrupt naming its file and the offset.
func (d *DirStore) Entries(from uint64, maxCount int, maxBytes int) (out []protocol.Entry, err error) {
	if d.closed.Load() {
		return nil, ErrClosed
	}
	if d.jv.Load() != nil {
		return d.journalEntries(from, maxCount, maxBytes)
	}
	budget := protocol.Budget{Max: maxBytes}
	return d.boltEntries(from, math.MaxUint64, maxCount, &budget, nil)
}

// boltEntries is Entries of the segments, of the offsets below hi,
// appended to out and counted against budget.
func (d *DirStore) boltEntries(from, hi uint64, maxCount int, budget *protocol.Budget, out []protocol.Entry) (_ []protocol.Entry, err error) {
	where, off := d.dir, from
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("replog: store %s: %w: reading entries from offset %d: %v", where, ErrCorrupt, off, r)
		}
	}()
	st := d.state.Load()
	for retries := 0; ; {
		if maxCount > 0 && len(out) >= maxCount {
			return out, nil
		}
		cont := len(out) > 0 // continuing at the end of a segment just read
		f, base, end, isActive := st.active, uint64(0), uint64(0), off >= st.base
		if !isActive {
			if !cont && off < st.log.logStart {
				return nil, fmt.Errorf("%w: offset %d outside [%d, %d)", ErrOutOfRange, off, st.log.logStart, st.log.leo)
			}
			i := sort.Search(len(st.sealed), func(i int) bool { return st.sealed[i].base > off }) - 1
			if i < 0 {
				return nil, fmt.Errorf("%w: offset %d outside [%d, %d)", ErrOutOfRange, off, st.log.logStart, st.log.leo)
			}
			f, base, end = st.sealed[i].f, st.sealed[i].base, st.sealed[i].end
		}
		if f.check != nil {
			// The file's pages below off's may not be verified yet.
			if err := f.check.awaitRead(off); err != nil {
				if errors.Is(err, ErrClosed) {
					return nil, ErrClosed
				}
				if cont {
					return out, nil // the next read, from off, gets the error
				}
				return nil, fmt.Errorf("replog: store %s: reading offset %d: %w", d.dir, off, err)
			}
		}
		db, path, err := d.acquire(f, st, base, end)
		if errors.Is(err, errSegmentGone) {
			if d.closed.Load() {
				return nil, ErrClosed
			}
			if cont {
				return out, nil
			}
			if retries++; retries > 1000 {
				return nil, fmt.Errorf("replog: store %s: the log changed under the read of offset %d 1000 times", d.dir, off)
			}
			st = d.state.Load()
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("replog: store %s: reading offset %d: %w", d.dir, off, err)
		}
		where = path
		var next uint64
		if isActive {
			out, err = readActiveRange(db, path, off, cont, st.base, hi, maxCount, budget, out)
		} else {
			if sealedReadHook != nil {
				sealedReadHook(path)
			}
			out, next, err = readSealedRange(db, path, off, min(end, hi), maxCount, budget, out)
		}
		d.release(f)
		if err != nil {
			return nil, err
		}
		if isActive || next < end || next >= hi {
			return out, nil // the active segment is the last
		}
		off = next
	}
}

// readActiveRange appends to out the entries of the active file db from
// off, within the bounds its own transaction sees (a write committed since
// the caller's state was published is seen whole). cont: off is where a
// sealed segment just read ended, expected to be this file's base; if the
// file says otherwise (a truncation below it since), out is returned as
// it is.
func readActiveRange(db *bolt.DB, path string, off uint64, cont bool, wantBase, hi uint64, maxCount int, budget *protocol.Budget, out []protocol.Entry) ([]protocol.Entry, error) {
	tx, err := db.Begin(false)
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		return nil, ErrClosed
	}
	if err != nil {
		return nil, fmt.Errorf("replog: store %s: %w", path, err)
	}
	defer func() { _ = tx.Rollback() }()
	meta := tx.Bucket(bucketMeta)
	logStart := binary.BigEndian.Uint64(meta.Get(keyLogStart))
	base := uint64(0)
	if v := meta.Get(keyBase); len(v) == 8 {
		base = binary.BigEndian.Uint64(v)
	}
	c := tx.Bucket(bucketEntries).Cursor()
	leo := max(base, logStart)
	if k, _ := c.Last(); k != nil && binary.BigEndian.Uint64(k)+1 > leo {
		leo = binary.BigEndian.Uint64(k) + 1
	}
	if cont {
		if base != wantBase || off < logStart || off >= leo {
			return out, nil
		}
	} else {
		if off == leo {
			return nil, nil
		}
		if off < logStart || off > leo || off < base {
			return nil, fmt.Errorf("%w: offset %d outside [%d, %d)", ErrOutOfRange, off, logStart, leo)
		}
	}
	out, _, err = readRange(c, nil, path, off, min(leo, hi), maxCount, budget, out)
	return out, err
}

// readSealedRange appends to out the entries of sealed segment db in [off,
// end), and returns the offset after the last one read.
func readSealedRange(db *bolt.DB, path string, off, end uint64, maxCount int, budget *protocol.Budget, out []protocol.Entry) ([]protocol.Entry, uint64, error) {
	tx, err := db.Begin(false)
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		return nil, off, ErrClosed
	}
	if err != nil {
		return nil, off, fmt.Errorf("replog: segment %s: %w", path, err)
	}
	defer func() { _ = tx.Rollback() }()
	eb := tx.Bucket(bucketEntries)
	if eb == nil {
		return nil, off, fmt.Errorf("replog: segment %s: %w: entries bucket missing", path, ErrCorrupt)
	}
	return readRange(eb.Cursor(), tx.Bucket(bucketHoles), path, off, end, maxCount, budget, out)
}

// readRange appends the entries of [off, end) that fit maxCount and budget
// to out, copied out of the transaction's pages, and returns the offset
// after the last one. hb is the segment's holes bucket (nil: none, as in
// an active file): an offset compaction removed reads as its placeholder
// (protocol.EntryHole), which costs the budget an empty entry.
func readRange(c *bolt.Cursor, hb *bolt.Bucket, path string, off, end uint64, maxCount int, budget *protocol.Budget, out []protocol.Entry) ([]protocol.Entry, uint64, error) {
	n, size := len(out), 0
read:
	for k, v := c.Seek(u64key(off)); off < end; k, v = c.Next() {
		if maxCount > 0 && len(out) >= maxCount {
			break
		}
		for hb != nil && (len(k) != 8 || binary.BigEndian.Uint64(k) != off) {
			h, ok, err := holeAt(hb, off)
			if err != nil {
				return nil, off, fmt.Errorf("replog: segment %s: %w", path, err)
			}
			if !ok {
				break
			}
			for ; off < min(h.end, end); off++ {
				if maxCount > 0 && len(out) >= maxCount || !budget.Take(0) {
					break read
				}
				out = append(out, h.placeholder(off))
			}
			if off >= end {
				break read
			}
			k, v = c.Seek(u64key(off))
		}
		if len(k) != 8 || binary.BigEndian.Uint64(k) != off {
			return nil, off, fmt.Errorf("replog: segment %s: %w: entry at offset %d missing", path, ErrCorrupt, off)
		}
		e, err := decodeEntry(v) // e.Data aliases the mapping until the transaction ends
		if err != nil {
			return nil, off, fmt.Errorf("replog: segment %s: entry at offset %d: %w", path, off, err)
		}
		if !budget.Take(len(e.Data)) {
			break
		}
		size += len(e.Data)
		e.Offset = off
		out = append(out, e)
		off++
	}
	// One allocation for this segment's payloads; each Data is capped so
	// that an append by the caller cannot overwrite the next entry's.
	arena := make([]byte, 0, size)
	for i := n; i < len(out); i++ {
		start := len(arena)
		arena = append(arena, out[i].Data...)
		out[i].Data = arena[start:len(arena):len(arena)]
	}
	return out, off, nil
}

// Append implements Store (Apply of one write).
func (d *DirStore) Append(entries []protocol.Entry) error {
	return d.Apply([]protocol.Write{{Kind: protocol.WriteAppend, Entries: entries}})
}

// TruncateSuffix is Apply of one WriteTruncate.
func (d *DirStore) TruncateSuffix(from uint64) error {
	return d.Apply([]protocol.Write{{Kind: protocol.WriteTruncate, Offset: from}})
}

// DeletePrefix is Apply of one WriteDeletePrefix.
func (d *DirStore) DeletePrefix(upTo uint64) error {
	return d.Apply([]protocol.Write{{Kind: protocol.WriteDeletePrefix, Offset: upTo}})
}

// SetQuorumState is Apply of one WriteQuorumState.
func (d *DirStore) SetQuorumState(s protocol.QuorumState) error {
	return d.Apply([]protocol.Write{{Kind: protocol.WriteQuorumState, Quorum: s}})
}

// SetHWCheckpoint is Apply of one WriteHWCheckpoint.
func (d *DirStore) SetHWCheckpoint(hw uint64) error {
	return d.Apply([]protocol.Write{{Kind: protocol.WriteHWCheckpoint, Offset: hw}})
}

// logical is the log's state: the journal view's, or the segments'.
func (d *DirStore) logical() *logState {
	if jv := d.jv.Load(); jv != nil {
		return jv.log
	}
	return d.state.Load().log
}

// LEO implements Store.
func (d *DirStore) LEO() uint64 { return d.logical().leo }

// LogStart implements Store.
func (d *DirStore) LogStart() uint64 { return d.logical().logStart }

// LastEpoch implements Store.
func (d *DirStore) LastEpoch() uint64 { return d.logical().lastEpoch() }

// EndOffsetForEpoch implements Store.
func (d *DirStore) EndOffsetForEpoch(epoch uint64) (uint64, uint64) {
	return d.logical().endOffsetForEpoch(epoch)
}

// EpochMap implements Store.
func (d *DirStore) EpochMap() []protocol.EpochStart { return cloneEpochs(d.logical().epochs) }

// VoterSets implements Store.
func (d *DirStore) VoterSets() []protocol.VotersAt { return cloneVoters(d.logical().voters) }

// QuorumState implements Store.
func (d *DirStore) QuorumState() (protocol.QuorumState, error) {
	if d.closed.Load() {
		return protocol.QuorumState{}, ErrClosed
	}
	return d.logical().quorum, nil
}

// HWCheckpoint implements Store.
func (d *DirStore) HWCheckpoint() (uint64, bool, error) {
	if d.closed.Load() {
		return 0, false, ErrClosed
	}
	st := d.logical()
	return st.hw, st.hwOK, nil
}

// Dir returns the data directory.
func (d *DirStore) Dir() string { return d.dir }

// Stats returns the store's counters.
func (d *DirStore) Stats() DirStats {
	st := d.state.Load()
	d.cacheMu.Lock()
	open := len(d.openFiles)
	db := st.active.db
	d.cacheMu.Unlock()
	var pages uint64
	pageSize := 0
	if db != nil {
		pages, pageSize = pagesWritten(db), st.active.pageSize
	}
	var fsyncs, groups, jbytes uint64
	var live int64
	if j := d.jstat.Load(); j != nil {
		fsyncs, groups, jbytes, live = j.syncs.Load(), j.records.Load(), j.bytes.Load(), j.Live()
	}
	if !d.opts.NoSync {
		fsyncs += 2 * d.commits.Load()
	}
	return DirStats{
		Fsyncs:          fsyncs,
		GroupCommits:    groups,
		JournalBatches:  d.batches.Load(),
		JournalBytes:    jbytes,
		JournalLive:     live,
		JournalWaits:    d.journalWaits.Load(),
		DirectApplies:   d.directApplies.Load(),
		Checkpoints:     d.checkpoints.Load(),
		CheckpointTime:  time.Duration(d.checkpointNanos.Load()),
		CheckpointMax:   time.Duration(d.checkpointMax.Load()),
		Applies:         d.applies.Load(),
		Writes:          d.writes.Load(),
		Commits:         d.commits.Load(),
		Rolls:           d.rolls.Load(),
		SegmentsDeleted: d.segsDeleted.Load(),
		Compactions:     d.compactions.Load(),
		SealedReads:     d.sealedReads.Load(),
		Sealed:          len(st.sealed),
		Open:            open,
		PagesWritten:    pages,
		PageSize:        pageSize,
	}
}

// Close waits for the Apply in progress, if any, and for the store's
// goroutine (the files of the deletions applied are unlinked, a next
// active file prepared ahead of a roll is removed), closes every segment
// file (waiting for the reads in progress) and releases the directory. Apply
// calls waiting or made later return ErrClosed; closing twice returns
// ErrClosed.
func (d *DirStore) Close() error {
	if !d.closed.CompareAndSwap(false, true) {
		return ErrClosed
	}
	d.closeJournal()
	if c := d.check; c != nil {
		// Stopped first: it holds a read transaction, which bbolt's close
		// would wait for, and an Apply may be waiting for it under mu.
		c.stop.Store(true)
		<-c.exited
	}
	if d.bg != nil {
		// Its jobs done first (a deletion's files unlinked), a prepared
		// next active file removed.
		d.bg.halt()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.bg != nil {
		d.bg.finish(d) // what an Apply under way at halt queued
	}
	st := d.state.Load()
	var dbs []*bolt.DB
	d.cacheMu.Lock()
	for _, f := range append([]*segFile{st.active}, slices.Collect(maps.Keys(d.openFiles))...) {
		if f.db != nil {
			dbs = append(dbs, f.db)
			f.db = nil
		}
		f.dropped = true
	}
	clear(d.openFiles)
	d.cacheMu.Unlock()
	var err error
	for _, db := range dbs {
		if cerr := db.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("replog: close store %s: %w", db.Path(), cerr)
		}
	}
	if d.j != nil && !d.j.shared {
		if cerr := d.j.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("replog: close journal %s: %w", d.j.path, cerr)
		}
	}
	if d.dirLock != nil {
		_ = unlockFile(d.dirLock)
		_ = d.dirLock.Close()
	}
	return err
}

// WaitVerified waits until the verification that Open leaves to the
// background (of the pages of the active file that Open itself does not
// read; see docs/storage.md section 9) has ended, and returns its result:
// nil if the file was sound (or Open verified all of it), an error
// wrapping ErrCorrupt naming the file and the damaged page, ErrClosed if
// the store was closed before the end, or ctx's error. Once damage is
// found every Apply returns it, and reads of the entries it may touch
// fail with it; reads of the rest go on.
func (d *DirStore) WaitVerified(ctx context.Context) error {
	c := d.check
	if c == nil {
		return nil
	}
	select {
	case <-c.finished:
	case <-ctx.Done():
		return ctx.Err()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

var _ Store = (*DirStore)(nil)
