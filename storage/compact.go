package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"

	bolt "go.etcd.io/bbolt"

	"github.com/replog-io/replog/protocol"
)

// Compaction of sealed segments (docs/storage.md 13, docs/protocol.md
// R103-R104). A pass rewrites one sealed segment without the entries its
// caller drops; the offsets they held become holes, recorded as runs in
// the new file's holes bucket, and every read of the segment returns a
// protocol.EntryHole placeholder for each (its epoch that of the entry it
// stands for, its time the newest of its run's entries), so that the store still holds one entry per
// offset and nothing above it (the core's log view, fetches, the epoch
// map, truncation) sees a gap.

var (
	// bucketHoles, in a compacted sealed segment: 8-byte BE first offset
	// of a run of compacted offsets → 8-byte BE end (the first offset
	// after the run), uvarint epoch, uvarint time (the newest of the run's
	// entries, milliseconds; retention by age reads it).
	bucketHoles = []byte("holes")
)

// compactSuffix names the file a pass writes beside the segment it
// rewrites (replog-<base>.seg.compact): never part of the log until
// renamed over the segment; removed at open.
const compactSuffix = ".compact"

// compactChunk bounds the entries one write transaction of a pass copies.
const compactChunk = 4 << 20

// CompactResult is what one CompactSegment did.
type CompactResult struct {
	// Removed is how many entries the pass removed (placeholders a
	// follower fetched from a compacted leader among them, not the holes
	// of earlier passes); Kept how many it kept.
	Removed, Kept int
	// BytesRead is the size of the entries read (their Data), and
	// BytesBefore and BytesAfter the segment file's size before and
	// after.
	BytesRead               int64
	BytesBefore, BytesAfter int64
	// Swapped reports whether the rewritten file replaced the segment (not
	// when nothing was removed, or the segment left the log meanwhile).
	Swapped bool
	// Refused (Memory.Compact only: the Dir's answer is ErrNotSealed)
	// reports that the range was not read at all, not being wholly in the
	// (durable) log: a pass that counts on the range being compacted now
	// must not.
	Refused bool
}

// ErrNotSealed: CompactSegment named no sealed segment of the store (the
// active one, or one that a deletion or truncation has taken out of the
// log).
var ErrNotSealed = errors.New("replog: no sealed segment at that base")

// holeRun is one row of the holes bucket.
type holeRun struct {
	start, end  uint64
	epoch, time uint64
}

func encodeHoleValue(h holeRun) []byte {
	b := binary.BigEndian.AppendUint64(make([]byte, 0, 8+2*binary.MaxVarintLen64), h.end)
	b = binary.AppendUvarint(b, h.epoch)
	return binary.AppendUvarint(b, h.time)
}

func decodeHoleRow(k, v []byte) (holeRun, error) {
	if len(k) != 8 || len(v) < 10 {
		return holeRun{}, fmt.Errorf("%w: hole row of %d and %d bytes", ErrCorrupt, len(k), len(v))
	}
	h := holeRun{start: binary.BigEndian.Uint64(k), end: binary.BigEndian.Uint64(v)}
	epoch, n := binary.Uvarint(v[8:])
	if n <= 0 {
		return holeRun{}, fmt.Errorf("%w: hole row at %d: bad epoch", ErrCorrupt, h.start)
	}
	t, m := binary.Uvarint(v[8+n:])
	if m <= 0 || 8+n+m != len(v) || h.end <= h.start || t > 1<<63-1 {
		return holeRun{}, fmt.Errorf("%w: hole row at %d", ErrCorrupt, h.start)
	}
	h.epoch, h.time = epoch, t
	return h, nil
}

// holeAt returns the run of holes covering off in hb (nil: no holes
// bucket), if any.
func holeAt(hb *bolt.Bucket, off uint64) (holeRun, bool, error) {
	if hb == nil {
		return holeRun{}, false, nil
	}
	c := hb.Cursor()
	k, v := c.Seek(u64key(off))
	if k == nil || binary.BigEndian.Uint64(k) != off {
		k, v = c.Prev()
	}
	if k == nil {
		return holeRun{}, false, nil
	}
	h, err := decodeHoleRow(k, v)
	if err != nil || off < h.start || off >= h.end {
		return holeRun{}, false, err
	}
	return h, true, nil
}

// placeholder is the entry a read returns for compacted offset off of run h.
func (h holeRun) placeholder(off uint64) protocol.Entry {
	return protocol.Entry{Offset: off, Epoch: h.epoch, Type: protocol.EntryHole, Time: int64(h.time)}
}

// holeRuns merges a compaction pass's holes, added in offset order, into
// runs: adjacent offsets of one epoch, each run with the newest time of
// its holes (docs/storage.md 13). The Dir's and the memory store's passes
// both record their holes so.
type holeRuns []holeRun

// add adds the hole at offset off of epoch epoch and time t.
func (rs *holeRuns) add(off, epoch, t uint64) {
	if n := len(*rs); n > 0 {
		if r := &(*rs)[n-1]; r.end == off && r.epoch == epoch {
			r.end++
			r.time = max(r.time, t)
			return
		}
	}
	*rs = append(*rs, holeRun{start: off, end: off + 1, epoch: epoch, time: t})
}

// CompactSegment rewrites the sealed segment whose range starts at base
// without the entries drop reports true for (drop sees each stored entry
// of the segment's range with its offset, in offset order; not the holes
// of earlier passes, which stay holes, nor stored placeholders, which
// always go, nor entries above the segment's end, which a truncation left
// in the file and no read returns). The offsets keep their places: each removed entry becomes a
// hole that reads return as a protocol.EntryHole placeholder with the
// entry's epoch (and the newest time of its run of holes). pace, if not nil, is called with the bytes of each chunk
// read, before it is written (the caller's throttle: it may sleep).
//
// The new file is written beside the segment (its name with
// ".compact"), synced, and renamed over it, the directory synced: a crash
// at any moment leaves the segment as it was or as rewritten, never a
// mix (a leftover .compact file is removed at open). The rename happens
// only if the segment is still in the log with the same range; otherwise
// nothing changes and Swapped is false. Readers in the old file finish
// there; new reads open the new one. Appends are never held up: the pass
// takes the store's locks only for the rename and the publication.
//
// Errors: ErrNotSealed if base is not a sealed segment's; ErrClosed;
// ErrReadOnly; an error wrapping ErrCorrupt if the segment cannot be read
// (naming it); the file system's.
func (d *DirStore) CompactSegment(base uint64, drop func(protocol.Entry) bool, pace func(int)) (res CompactResult, err error) {
	if d.closed.Load() {
		return res, ErrClosed
	}
	if d.readOnly {
		return res, ErrReadOnly
	}
	st := d.state.Load()
	i := sealedIndex(st, base)
	if i < 0 {
		return res, fmt.Errorf("%w: %d", ErrNotSealed, base)
	}
	seg := st.sealed[i]
	if seg.f.check != nil {
		if err := seg.f.check.awaitRead(seg.end - 1); err != nil {
			return res, fmt.Errorf("replog: store %s: compact segment %d: %w", d.dir, base, err)
		}
	}
	db, path, err := d.acquire(seg.f, st, seg.base, seg.end)
	if errors.Is(err, errSegmentGone) {
		return res, fmt.Errorf("%w: %d (gone)", ErrNotSealed, base)
	}
	if err != nil {
		return res, fmt.Errorf("replog: store %s: compact segment %d: %w", d.dir, base, err)
	}
	defer d.release(seg.f)
	if fi, err := os.Stat(path); err == nil {
		res.BytesBefore = fi.Size()
	}
	tmp := path + compactSuffix
	_ = os.Remove(tmp)
	removeTmp := true
	defer func() {
		if removeTmp {
			_ = os.Remove(tmp)
		}
	}()
	ndb, err := bolt.Open(tmp, 0o600, &bolt.Options{Timeout: d.opts.Timeout, NoSync: true, NoFreelistSync: true})
	if err != nil {
		return res, fmt.Errorf("replog: store %s: compact segment %d: %w", d.dir, base, err)
	}
	closed := false
	defer func() {
		if !closed {
			_ = ndb.Close()
		}
	}()
	var hwm int64
	if err := d.copyCompacted(db, ndb, path, seg.base, seg.end, drop, pace, &res, &hwm); err != nil {
		return res, err
	}
	if res.Removed == 0 {
		return res, nil // nothing to gain: the segment stays as it is
	}
	closed = true
	if err := ndb.Close(); err != nil {
		return res, fmt.Errorf("replog: store %s: compact segment %d: %w", d.dir, base, err)
	}
	if err := trimAndSync(tmp, hwm, !d.opts.NoSync); err != nil {
		return res, fmt.Errorf("replog: store %s: compact segment %d: %w", d.dir, base, err)
	}
	if compactHook != nil {
		compactHook("written")
	}
	swapped, err := d.swapCompacted(seg, tmp, path)
	if err != nil {
		return res, err
	}
	removeTmp = !swapped
	res.Swapped = swapped
	if fi, err := os.Stat(path); err == nil && swapped {
		res.BytesAfter = fi.Size()
	} else {
		res.BytesAfter = res.BytesBefore
	}
	return res, nil
}

// trimAndSync cuts the file at path to size bytes and, if sync, syncs it:
// what the rename then makes the segment is wholly on disk.
func trimAndSync(path string, size int64, sync bool) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	err = f.Truncate(size)
	if err == nil && sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// compactHook, when set (tests), is called at the pass's steps: "written"
// (the new file synced and closed, not yet renamed), "renamed" (the
// rename done, the directory not yet synced).
var compactHook func(step string)

// sealedIndex returns the index of the sealed segment starting at base in
// st, or -1.
func sealedIndex(st *dirState, base uint64) int {
	for i, s := range st.sealed {
		if s.base == base {
			return i
		}
	}
	return -1
}

// copyCompacted copies the segment [base, end) of db into ndb without the
// entries drop removes, merging the removed offsets (and the holes db
// already has) into runs of one epoch.
// hwm is set to the new file's size in pages (bbolt grows a file ahead
// of them; the caller trims it, as a roll trims a sealed file).
func (d *DirStore) copyCompacted(db, ndb *bolt.DB, path string, base, end uint64, drop func(protocol.Entry) bool, pace func(int), res *CompactResult, hwm *int64) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("replog: segment %s: %w: compacting: %v", path, ErrCorrupt, r)
		}
	}()
	tx, err := db.Begin(false) // a sealed file is never written: holding it long costs nothing
	if err != nil {
		return fmt.Errorf("replog: segment %s: %w", path, err)
	}
	defer func() { _ = tx.Rollback() }()
	eb := tx.Bucket(bucketEntries)
	if eb == nil {
		return fmt.Errorf("replog: segment %s: %w: entries bucket missing", path, ErrCorrupt)
	}
	hb := tx.Bucket(bucketHoles)
	// One write transaction per chunk: the first also copies the other
	// buckets as they are (a sealed file's meta is never read, but tools
	// list it), the last also writes the holes.
	ntx, err := ndb.Begin(true)
	if err != nil {
		return fmt.Errorf("replog: store %s: compact %s: %w", d.dir, path, err)
	}
	defer func() {
		if ntx != nil {
			_ = ntx.Rollback()
		}
	}()
	if err := tx.ForEach(func(name []byte, b *bolt.Bucket) error {
		nb, err := ntx.CreateBucketIfNotExists(name)
		if err != nil || string(name) == string(bucketEntries) || string(name) == string(bucketHoles) {
			return err
		}
		return b.ForEach(func(k, v []byte) error {
			if v == nil {
				return nil // nested buckets: none in a segment
			}
			return nb.Put(k, v)
		})
	}); err != nil {
		return fmt.Errorf("replog: store %s: compact %s: %w", d.dir, path, err)
	}
	var runs holeRuns
	c := eb.Cursor()
	k, v := c.Seek(u64key(base))
	for off := base; off < end; {
		nb := ntx.Bucket(bucketEntries)
		nb.FillPercent = 1 // written in key order, never again
		size := 0
		for ; off < end && size < compactChunk; off++ {
			var e protocol.Entry
			var val []byte // nil: a hole already
			if k != nil && binary.BigEndian.Uint64(k) == off {
				e, err = decodeEntry(v)
				if err != nil {
					return fmt.Errorf("replog: segment %s: entry at offset %d: %w", path, off, err)
				}
				val = v
				k, v = c.Next()
			} else {
				h, ok, err := holeAt(hb, off)
				if err != nil {
					return fmt.Errorf("replog: segment %s: %w", path, err)
				}
				if !ok {
					return fmt.Errorf("replog: segment %s: %w: entry at offset %d missing", path, ErrCorrupt, off)
				}
				e = h.placeholder(off)
			}
			e.Offset = off
			size += len(e.Data) + protocol.EntryOverhead
			res.BytesRead += int64(len(e.Data))
			if val == nil {
				runs.add(off, e.Epoch, storedTime(&e))
				continue
			}
			if e.Type == protocol.EntryHole || drop(e) {
				// A stored placeholder (fetched from a compacted leader)
				// goes as the entry it stands for did.
				res.Removed++
				runs.add(off, e.Epoch, storedTime(&e))
				continue
			}
			res.Kept++
			if err := nb.Put(u64key(off), val); err != nil { // the stored bytes, CRC and all
				return fmt.Errorf("replog: store %s: compact %s: %w", d.dir, path, err)
			}
		}
		if pace != nil {
			pace(size)
		}
		if d.closed.Load() {
			return ErrClosed
		}
		if off >= end {
			break // the last transaction also takes the holes
		}
		if err := ntx.Commit(); err != nil {
			ntx = nil
			return fmt.Errorf("replog: store %s: compact %s: %w", d.dir, path, err)
		}
		if ntx, err = ndb.Begin(true); err != nil {
			ntx = nil
			return fmt.Errorf("replog: store %s: compact %s: %w", d.dir, path, err)
		}
	}
	nb, err := ntx.CreateBucketIfNotExists(bucketHoles)
	if err != nil {
		return fmt.Errorf("replog: store %s: compact %s: %w", d.dir, path, err)
	}
	nb.FillPercent = 1
	for _, h := range runs {
		if err := nb.Put(u64key(h.start), encodeHoleValue(h)); err != nil {
			return fmt.Errorf("replog: store %s: compact %s: %w", d.dir, path, err)
		}
	}
	err = ntx.Commit()
	ntx = nil
	if err == nil {
		err = ndb.View(func(tx *bolt.Tx) error { *hwm = tx.Size(); return nil })
	}
	if err != nil {
		return fmt.Errorf("replog: store %s: compact %s: %w", d.dir, path, err)
	}
	return nil
}

// swapCompacted renames tmp, the rewritten segment seg, over its path and
// publishes it, if seg is still in the log with the same range. It holds
// the lock under which the state is published (the checkpoint's with the
// journal, Apply's without), so no roll, truncation or deletion runs
// meanwhile.
func (d *DirStore) swapCompacted(seg sealedSeg, tmp, path string) (bool, error) {
	d.mu.Lock()
	if d.j != nil {
		// With the journal, the segments' state is published under ckMu
		// (checkpoints), which is taken before mu.
		d.mu.Unlock()
		d.ckMu.Lock()
		defer d.ckMu.Unlock()
	} else {
		defer d.mu.Unlock()
	}
	if d.closed.Load() {
		return false, ErrClosed
	}
	st := d.state.Load()
	i := sealedIndex(st, seg.base)
	if i < 0 || st.sealed[i].f != seg.f || st.sealed[i].end != seg.end {
		return false, nil
	}
	if err := os.Rename(tmp, path); err != nil {
		return false, fmt.Errorf("replog: store %s: compact segment %d: %w", d.dir, seg.base, err)
	}
	if compactHook != nil {
		compactHook("renamed")
	}
	if err := SyncDir(filepath.Dir(path)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return true, fmt.Errorf("replog: store %s: compact segment %d: sync the directory: %w", d.dir, seg.base, err)
	}
	nf := &segFile{path: path}
	sealed := append([]sealedSeg(nil), st.sealed...)
	sealed[i].f = nf
	next := *st
	next.sealed = sealed
	d.state.Store(&next)
	// The old file's handle: no new read opens it (dropped), the last
	// reader in it closes it; its inode goes with that (its name is the
	// new file's now, so it is never unlinked by name).
	d.cacheMu.Lock()
	seg.f.dropped = true
	var victims []*bolt.DB
	if seg.f.refs == 0 && seg.f.db != nil {
		victims = append(victims, seg.f.db)
		seg.f.db = nil
		delete(d.openFiles, seg.f)
	}
	d.cacheMu.Unlock()
	closeDBs(d, victims)
	d.compactions.Add(1)
	return true, nil
}

// removeCompactLeftovers removes the .compact files a pass interrupted by
// a crash left in dir: never part of the log.
func removeCompactLeftovers(dir string) error {
	ms, err := filepath.Glob(filepath.Join(dir, segmentPrefix+"*"+segmentSuffix+compactSuffix))
	if err != nil {
		return err
	}
	for _, m := range ms {
		if err := os.Remove(m); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("replog: open store %s: remove an interrupted compaction's file: %w", dir, err)
		}
	}
	return nil
}
