package storage

import (
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// The files of a segmented data directory (docs/storage.md):
//
//	replog.db                     the active segment (DataFileName): the only file written
//	replog-<20-digit base>.seg    a sealed segment, entries from offset base
//	replog.db.next                the next active file, prepared ahead of a roll by the
//	                              store's goroutine, or a roll in progress (removed at
//	                              Close and at open: a roll commits by renaming it over
//	                              replog.db)
const (
	segmentPrefix  = "replog-"
	segmentSuffix  = ".seg"
	nextActiveName = DataFileName + ".next"

	// boltFormatSegmented is the format of an active segment made by a roll:
	// its segments bucket names the sealed segments before it. A format 1
	// file (boltFormat) is a whole log on its own: no sealed segments, base
	// 0 (a data directory until its first roll, and every data file from
	// before segments).
	boltFormatSegmented = 2

	// maxOpenSealed bounds the sealed segments kept open (mapped) beyond
	// those a read is using: a reader walking the log opens each in turn.
	maxOpenSealed = 8

	// maxActiveMmap caps the mapping reserved for the active segment.
	maxActiveMmap = 1 << 30
	// minAllocSize is the smallest step the active file grows by.
	minAllocSize = 64 << 10
	// maxAllocSize is bbolt's own step (its DefaultAllocSize).
	maxAllocSize = 16 << 20
)

// dropChunk and dropPause: the store's goroutine shrinks a deleted
// segment's file dropChunk at a time, pausing dropPause after each step,
// before unlinking it (shrinkDropped). Variables for the benchmarks
// (dropChunk 0: no shrinking).
var (
	dropChunk int64 = 256 << 10
	dropPause       = time.Millisecond
)

var (
	// bucketSegments, in a format 2 active segment: 8-byte BE base of a
	// sealed segment → 8-byte BE end (the first offset after its range).
	bucketSegments = []byte("segments")
	// keyBase, in meta of a format 2 active segment: the first offset this
	// file holds (entries at or above it are the segment's).
	keyBase = []byte("base")
)

// segmentFileName is the name of the sealed segment whose range starts at
// base.
func segmentFileName(base uint64) string {
	return fmt.Sprintf("%s%020d%s", segmentPrefix, base, segmentSuffix)
}

// parseSegmentFileName returns the base of a sealed segment's file name.
func parseSegmentFileName(name string) (uint64, bool) {
	s, ok := strings.CutPrefix(name, segmentPrefix)
	if !ok {
		return 0, false
	}
	if s, ok = strings.CutSuffix(s, segmentSuffix); !ok || len(s) != 20 {
		return 0, false
	}
	v, err := strconv.ParseUint(s, 10, 64)
	return v, err == nil
}

// errSegmentGone: a segment was dropped from the log (deleted, truncated
// away) or the store closed between a reader's look at the state and its
// use of the file; the reader looks again.
var errSegmentGone = errors.New("segment gone")

// segFile is one segment file of a DirStore: the active one or a sealed
// one. Its bbolt handle is opened lazily for a sealed segment and shared by
// the readers using it; refs counts them, so that eviction and deletion
// close it only when nobody reads it.
type segFile struct {
	openMu sync.Mutex // serializes the lazy open of this file

	// Guarded by DirStore.cacheMu.
	path    string // changes once, when a roll seals the active file
	db      *bolt.DB
	refs    int
	dropped bool // no longer part of the log, or the store closed: never opened again
	active  bool // the active segment: never evicted
	lastUse uint64

	// check is the background verification of this file when it was the
	// active one at Open (nil otherwise, or once... never reset: it
	// answers at once when it passed). Reads wait for it (awaitRead).
	check *activeCheck

	// pageSize is the active file's page size, read when it became the
	// active one (Stats must not call bbolt's Info while a commit may
	// remap the file).
	pageSize int
}

// sealedSeg is a sealed segment in a DirStore's state: its file and the
// end of its range (a truncation into it lowers the end; the file keeps
// the entries above it, which are never read).
type sealedSeg struct {
	f         *segFile
	base, end uint64
}

// acquire returns f's bbolt handle, opening a sealed segment's file (of
// offsets [base, end)) if it
// is not open, and holds it (release gives it back). It takes cacheMu only
// briefly: opening a file (its verification) runs under f.openMu alone, so
// appends and reads of other segments never wait for it. errSegmentGone if
// f was dropped or the store closed; an error wrapping ErrCorrupt if the
// file is damaged.
func (d *DirStore) acquire(f *segFile, st *dirState, base, end uint64) (*bolt.DB, string, error) {
	d.cacheMu.Lock()
	if f.dropped || d.closed.Load() {
		d.cacheMu.Unlock()
		return nil, "", errSegmentGone
	}
	f.refs++
	d.sealedReads.Add(1)
	d.useClock++
	f.lastUse = d.useClock
	db, path := f.db, f.path
	d.cacheMu.Unlock()
	if db != nil {
		return db, path, nil
	}
	f.openMu.Lock()
	defer f.openMu.Unlock()
	d.cacheMu.Lock()
	db = f.db
	d.cacheMu.Unlock()
	if db != nil {
		return db, path, nil // another reader opened it meanwhile
	}
	db, err := d.openSealed(path, base, end, st)
	if err != nil {
		d.release(f)
		// Dropped after the reader looked (a deletion or a truncation):
		// its file is gone, or its name already another segment's (a
		// truncation's next roll), whose entries do not match this
		// segment's range and epochs. The reader looks again.
		d.cacheMu.Lock()
		gone := f.dropped || d.closed.Load()
		d.cacheMu.Unlock()
		if gone {
			return nil, "", errSegmentGone
		}
		return nil, path, err
	}
	d.cacheMu.Lock()
	if f.dropped || d.closed.Load() {
		d.cacheMu.Unlock()
		_ = db.Close()
		d.release(f)
		return nil, "", errSegmentGone
	}
	f.db = db
	d.openFiles[f] = struct{}{}
	victims := d.evictLocked()
	d.cacheMu.Unlock()
	closeDBs(d, victims)
	return db, path, nil
}

// release gives back a handle acquire returned; the last user of a dropped
// segment closes it.
func (d *DirStore) release(f *segFile) {
	d.cacheMu.Lock()
	f.refs--
	var victims []*bolt.DB
	if f.refs == 0 && f.dropped && f.db != nil {
		victims = append(victims, f.db)
		f.db = nil
		delete(d.openFiles, f)
	}
	victims = append(victims, d.evictLocked()...)
	d.cacheMu.Unlock()
	closeDBs(d, victims)
}

// evictLocked takes the least recently used unused sealed files out of the
// cache while more than maxOpenSealed are open, and returns their handles
// for the caller to close after unlocking cacheMu.
func (d *DirStore) evictLocked() []*bolt.DB {
	var victims []*bolt.DB
	for len(d.openFiles) > maxOpenSealed {
		var lru *segFile
		for f := range d.openFiles {
			if f.refs == 0 && !f.active && (lru == nil || f.lastUse < lru.lastUse) {
				lru = f
			}
		}
		if lru == nil {
			break // all in use: the last release evicts
		}
		victims = append(victims, lru.db)
		lru.db = nil
		delete(d.openFiles, lru)
	}
	return victims
}

// drop takes sealed segments out of the log: each is closed once unused,
// and its file unlinked (a crash before that leaves an orphan, which the
// next open removes).
func (d *DirStore) drop(fs []*segFile) {
	if len(fs) > 0 {
		victims, files := d.markDropped(fs)
		d.unlinkDropped(victims, files, false)
	}
}

// dropLater is drop with the closing and unlinking left to the store's
// goroutine, for the segments of a prefix deletion, whose commit is
// durable: no read opens them from now on, a crash before the unlink
// leaves orphans (removed at the next open), and their names are never
// used again (each starts below the log start, and every later segment at
// or above it: a roll names the sealed segment after the active base,
// above every sealed segment's, and a truncation point is at or above the
// log start). The files nobody had open are shrunk step by step before
// their unlink (see shrinkDropped).
func (d *DirStore) dropLater(fs []*segFile) {
	if len(fs) > 0 {
		victims, files := d.markDropped(fs)
		d.bg.enqueue(func() { d.unlinkDropped(victims, files, true) })
	}
}

// droppedFile is the file of a dropped segment.
type droppedFile struct {
	path string
	// unmapped: no reader had the file open when it was dropped, and none
	// opens it since, so nothing maps it: it may be shrunk.
	unmapped bool
}

// markDropped marks sealed segments dropped (never opened again) and
// returns the handles nobody reads, now out of the cache, and the files.
func (d *DirStore) markDropped(fs []*segFile) (victims []*bolt.DB, files []droppedFile) {
	files = make([]droppedFile, 0, len(fs))
	d.cacheMu.Lock()
	for _, f := range fs {
		f.dropped = true
		files = append(files, droppedFile{path: f.path, unmapped: f.refs == 0})
		if f.refs == 0 && f.db != nil {
			victims = append(victims, f.db)
			f.db = nil
			delete(d.openFiles, f)
		}
	}
	d.cacheMu.Unlock()
	return victims, files
}

// unlinkDropped closes the handles markDropped returned and unlinks the
// files; paced (on the store's goroutine), it shrinks the unmapped ones
// first.
func (d *DirStore) unlinkDropped(victims []*bolt.DB, files []droppedFile, paced bool) {
	closeDBs(d, victims)
	if rollHook != nil {
		rollHook("dropped")
	}
	for _, f := range files {
		if paced && f.unmapped && dropChunk > 0 {
			d.shrinkDropped(f.path)
		}
		if err := os.Remove(f.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			d.log.Warn("could not remove a deleted segment (it is removed at the next open)", "path", f.path, "error", err)
			continue
		}
		d.segsDeleted.Add(1)
	}
}

// shrinkDropped truncates a dropped segment's file from its end,
// dropChunk at a time with a pause of dropPause after each step, until it
// is empty or the store closes. Unlinking a large file at once frees all
// its blocks in one journal transaction, and the next fsync of the active
// file waits for that commit, on ext4 mounted with discard for the discard
// of all of them too (measured: 6–10 ms for 16 MiB, docs/storage.md section
// 4); in steps, each commit frees a little. Errors are ignored: the unlink
// follows anyway.
func (d *DirStore) shrinkDropped(path string) {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return
	}
	for size := fi.Size(); size > 0 && !d.bg.stopping(); {
		size = max(0, size-dropChunk)
		if f.Truncate(size) != nil {
			return
		}
		time.Sleep(dropPause)
	}
}

func closeDBs(d *DirStore, dbs []*bolt.DB) {
	for _, db := range dbs {
		if err := db.Close(); err != nil {
			d.log.Warn("closing a segment", "path", db.Path(), "error", err)
		}
	}
}

// segmentKind says how a segment file is opened.
type segmentKind int

const (
	kindActive   segmentKind = iota // read-write, verified
	kindSealed                      // read-only, verified (at first use)
	kindReadOnly                    // the active file of a read-only open
	kindNew                         // read-write, created by a roll (not verified)
)

// boltOptions returns the bbolt options of a segment of kind k (the
// choices and their measurements: docs/storage.md).
func (o *DirOptions) boltOptions(k segmentKind) *bolt.Options {
	bo := &bolt.Options{Timeout: o.Timeout, NoSync: o.NoSync}
	switch k {
	case kindActive, kindNew:
		// The free list is written at every commit, so that opening the
		// active file reads it instead of rebuilding it by walking (and
		// mapping into memory) every page: measured, a few percent more
		// bytes per commit buy an open whose resident memory no longer
		// grows with the active file (docs/storage.md). Its
		// mapping is reserved for a full segment, so that it never
		// remaps as it grows (a remap waits for every read transaction of
		// the file).
		bo.FreelistType = bolt.FreelistMapType
		bo.NoFreelistSync = activeNoFreelistSync
		bo.InitialMmapSize = int(min(o.SegmentBytes+o.SegmentBytes/4, maxActiveMmap))
	case kindSealed, kindReadOnly:
		// Never written: no free list at all (bbolt loads none read-only),
		// a shared lock, and the file mapped as large as it is.
		bo.ReadOnly = true
	}
	return bo
}

// openSegment opens the segment file at path as kind k: verified first
// (verifyBoltFile) unless it is new, then handed to bbolt. It returns
// bbolt's handle. A damaged file returns an error wrapping ErrCorrupt
// naming it; a missing sealed file an error wrapping os.ErrNotExist.
//
// The active file (kindActive) is verified in two parts (activeCheck):
// what bbolt's open and OpenDir's reads need, before bbolt maps it, and
// the rest by a walk the caller starts (check; nil if the whole file was
// verified), whose version of the file a read transaction pins from here.
func openSegment(path string, k segmentKind, opts *DirOptions) (db *bolt.DB, check *activeCheck, err error) {
	flag := os.O_RDONLY
	if k == kindActive || k == kindNew {
		flag = os.O_RDWR | os.O_CREATE
	}
	f, err := os.OpenFile(path, flag, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("replog: open segment %s: %w", path, err)
	}
	handed := false // once bbolt has f, bbolt closes it
	defer func() {
		if !handed {
			_ = f.Close()
		}
	}()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, fmt.Errorf("replog: open segment %s: %w", path, err)
	}
	switch {
	case k == kindActive && fi.Size() > 0:
		if check, err = checkActiveOpen(path, fi.Size()); err != nil {
			return nil, nil, fmt.Errorf("replog: open segment %s: %w", path, err)
		}
	case k != kindNew && fi.Size() > 0:
		if err := verifyBoltFile(f, fi.Size()); err != nil {
			return nil, nil, fmt.Errorf("replog: open segment %s: %w", path, err)
		}
	case k == kindSealed || k == kindReadOnly:
		return nil, nil, fmt.Errorf("replog: open segment %s: %w: the file is empty", path, ErrCorrupt)
	}
	defer func() {
		if err != nil && check != nil {
			check.abort()
			check = nil
		}
	}()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			handed = false
			db, err = nil, fmt.Errorf("replog: open segment %s: %w (bbolt: %v)", path, ErrCorrupt, r)
		}
	}()
	bo := opts.boltOptions(k)
	bo.OpenFile = func(string, int, os.FileMode) (*os.File, error) { return f, nil }
	handed = true
	db, err = bolt.Open(path, 0o600, bo)
	if err == nil && !bo.ReadOnly {
		// With the mapping reserved, bbolt would grow the file in steps of
		// AllocSize (16 MiB) however small it is: a step of a sixteenth of
		// a segment keeps the active file near its pages (a roll trims
		// the sealed one to them).
		db.AllocSize = int(min(max(opts.SegmentBytes/16, minAllocSize), maxAllocSize))
	}
	switch {
	case errors.Is(err, berrors.ErrTimeout):
		return nil, nil, fmt.Errorf("%w: %s: file lock not obtained within %v", ErrLocked, path, opts.Timeout)
	case errors.Is(err, berrors.ErrInvalid) || errors.Is(err, berrors.ErrChecksum) || errors.Is(err, berrors.ErrVersionMismatch):
		return nil, nil, fmt.Errorf("replog: open segment %s: %w (bbolt: %v)", path, ErrCorrupt, err)
	case err != nil:
		return nil, nil, fmt.Errorf("replog: open segment %s: %w", path, err)
	}
	if check != nil {
		// Pin the version just checked: bbolt reuses no page of it while
		// this transaction is open (the walk rolls it back at its end).
		tx, err := db.Begin(false)
		if err == nil && uint64(tx.ID()) != check.txid {
			_ = tx.Rollback()
			err = fmt.Errorf("%w: the file changed while it was opened (transaction %d, then %d)", ErrCorrupt, check.txid, tx.ID())
		}
		if err != nil {
			_ = db.Close()
			return nil, nil, fmt.Errorf("replog: open segment %s: %w", path, err)
		}
		check.pin = tx
	}
	return db, check, nil
}

// rollHook, when set by a test, is called at the stages of a roll
// ("prepared": the store's goroutine made the next active file, ahead of
// the roll; "next": the new active file is written with the state and the
// rolling Apply's writes; "linked": the sealed name is linked; "renamed":
// the roll is committed) and of a deletion ("dropped": committed, files
// not yet unlinked), so a crash test can kill the process there. The
// "prepared" and a deletion's "dropped" stages run on the store's
// goroutine.
var rollHook func(stage string)

// sealedOpenHook, when set by a test, is called before a sealed segment's
// file is opened (on the reader's goroutine), so a test can hold a reader
// there.
var sealedOpenHook func(path string)

// sealedReadHook, when set by a test, is called when a read has a sealed
// segment's file open (mapped, held) and is about to read it, so a test
// can hold a reader there.
var sealedReadHook func(path string)

// activeNoFreelistSync is the active segment's NoFreelistSync (false: the
// free list is written at every commit). A variable only so that the
// benchmarks can measure the other choice.
var activeNoFreelistSync = false
