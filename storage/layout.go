package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/replog-io/replog/protocol"
)

// DirOptions configures OpenBolt and OpenDir. The zero value is usable:
// zero fields take the defaults named on each.
type DirOptions struct {
	// NoSync skips fsync at commit. Writes then survive a process crash (they
	// are in the page cache) but not a machine crash or power loss: a
	// NoSync store may lose acknowledged writes and must not be used where
	// durability matters. For tests and benchmarks only. Default false.
	NoSync bool
	// Timeout is how long OpenBolt and OpenDir wait for the file (and
	// directory) lock before ErrLocked. Default DefaultLockTimeout (1s);
	// negative is invalid.
	Timeout time.Duration
	// Logger receives the store's log lines. Default: a null logger. It is
	// used as given: name it (Named("storage")) before passing it.
	Logger hclog.Logger
	// SegmentBytes is the size at which OpenDir's store rolls its active
	// segment file: the first Apply that appends once the active file
	// holds SegmentBytes or more (bbolt's pages in use) seals it and starts
	// a new one, so a segment may exceed it by one Apply. Retention deletes
	// whole segments, so it is also the granularity of deletion. Default
	// DefaultSegmentBytes (64 MiB); negative is invalid; values of a few
	// KiB roll at almost every append (tests). OpenBolt's single file
	// ignores it. See docs/design.md section 4.
	SegmentBytes int64
}

// DefaultLockTimeout is DirOptions.Timeout's default.
const DefaultLockTimeout = time.Second

// DefaultSegmentBytes is DirOptions.SegmentBytes's default.
const DefaultSegmentBytes = 64 << 20

// ErrInvalidOptions wraps every DirOptions.Validate error.
var ErrInvalidOptions = errors.New("replog: invalid storage options")

// EnsureDefaults sets o's zero fields to their defaults (named on each
// field). OpenBolt and OpenDir call it on their own copy.
func (o *DirOptions) EnsureDefaults() {
	if o.Timeout == 0 {
		o.Timeout = DefaultLockTimeout
	}
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	if o.SegmentBytes == 0 {
		o.SegmentBytes = DefaultSegmentBytes
	}
}

// Validate reports the first invalid field of o, as an error wrapping
// ErrInvalidOptions that names it ("DirOptions.Timeout"). It does not
// modify o.
func (o DirOptions) Validate() error {
	if o.Timeout < 0 {
		return fmt.Errorf("%w: DirOptions.Timeout is negative (%v)", ErrInvalidOptions, o.Timeout)
	}
	if o.SegmentBytes < 0 {
		return fmt.Errorf("%w: DirOptions.SegmentBytes is negative (%d)", ErrInvalidOptions, o.SegmentBytes)
	}
	return nil
}

// BoltStats are counters of a Bolt's writes, for tests and benchmarks.
type BoltStats struct {
	// Applies is the number of Apply calls that ran a transaction (those
	// refused because the store was closed or had failed are not counted).
	Applies uint64
	// Writes is the number of writes (protocol.Write) in those calls.
	Writes uint64
	// Commits is the number of write transactions committed: at most one
	// per Apply, whatever it holds (none for an Apply that changed
	// nothing), so one bbolt commit (two fsyncs) per Apply.
	Commits uint64
	// CleanupCommits is the number of those transactions that also deleted
	// entries left below the log start by a prefix deletion.
	CleanupCommits uint64
	// PagesWritten is the number of bbolt pages written (meta pages
	// included) since the store was opened, and PageSize their size: the
	// store's own share of write amplification.
	PagesWritten uint64
	PageSize     int
}

// Bucket and key names of the bbolt file.
var (
	bucketEntries = []byte("entries") // 8-byte BE offset → entry value (codec.go)
	bucketEpochs  = []byte("epochs")  // 8-byte BE epoch → 8-byte BE start offset
	bucketQuorum  = []byte("quorum")  // keyQuorum → quorum state (codec.go)
	bucketMeta    = []byte("meta")
	// bucketVoters: 8-byte BE offset of an EntryVoters entry → its voter
	// set (codec.go). Files from before voter sets lack it until the first
	// write of a row creates it.
	bucketVoters = []byte("voters")

	keyQuorum   = []byte("state")
	keyFormat   = []byte("format")    // 1 byte: boltFormat
	keyLogStart = []byte("log_start") // 8-byte BE
	keyHW       = []byte("hw")        // 8-byte BE, absent until first checkpoint
	keyIdentity = []byte("identity")  // the directory's identity (identity.go), absent unless opened by OpenDir
)

const (
	boltFormat = 1
	// cleanupChunk is the number of entries one Apply deletes below the log
	// start, so that a large prefix deletion never makes one Apply (and the
	// writes waiting behind it) slow.
	cleanupChunk = 10000
)

// Bolt is a Store in one bbolt file.
//
// Apply runs one bbolt read-write transaction on the caller's goroutine
// (bbolt commits it with two fsyncs: the pages, then the meta page); a
// mutex serializes Apply calls. The store starts no goroutine and merges
// nothing itself: group commit is the caller's, who hands Apply everything
// waiting at once (the node's writer does). LEO, LogStart, LastEpoch,
// EpochMap, EndOffsetForEpoch, VoterSets, QuorumState and HWCheckpoint are
// answered from memory, updated after each commit; Entries uses a short read
// transaction and copies the entries out, never waiting for Apply.
//
// A prefix deletion moves the log start durably in its transaction, which
// also deletes up to cleanupChunk entries below it; entries left below the
// log start (a large deletion, or a crash) are deleted the same way, a
// chunk inside each later Apply's transaction. They are never visible.
type Bolt struct {
	path  string
	db    *bolt.DB
	file  *os.File // the file bbolt writes through (a test breaks it)
	log   hclog.Logger
	state atomic.Pointer[logState]
	// identity is the identity recorded in the file (nil if none), set by
	// load before the store is handed out.
	identity *Identity

	closed atomic.Bool

	// mu serializes Apply and Close, and guards cleanup and failed.
	mu sync.Mutex
	// cleanup: entries below the log start remain to be deleted.
	cleanup bool
	// failed latches the first failed commit: after a failed fsync or page
	// write the file and bbolt's in-memory freelist may disagree, so no
	// later transaction may run.
	failed error

	applies, writes, commits, cleanups atomic.Uint64
}

// OpenBolt opens or creates the store at path. If another process (or
// another Bolt in this process) holds the file, it waits up to
// opts.Timeout and then returns an error wrapping ErrLocked. A damaged file
// returns an error wrapping ErrCorrupt that names the file and what is
// wrong, and is left as it was: before bbolt maps the file, its structure is
// verified page by page (see verifyBoltFile), because bbolt itself asserts
// (and faults on a truncated mapping) in a goroutine of its own, which would
// kill the process. A zero-length or missing file becomes a new, empty
// store; OpenDir is the entry point that refuses that when the directory
// shows a store existed. Invalid opts return an error wrapping
// ErrInvalidOptions (see DirOptions.Validate). The store starts no
// goroutine; Close releases the file.
func OpenBolt(path string, opts DirOptions) (*Bolt, error) {
	return openBolt(path, opts, true)
}

// openBolt is OpenBolt; verify false skips the structural check (for the
// benchmark that measures its cost only).
func openBolt(path string, opts DirOptions, verify bool) (*Bolt, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts.EnsureDefaults() // opts is a copy
	db, file, err := openVerified(path, opts, verify)
	if err != nil {
		return nil, err
	}
	b := &Bolt{
		path: path,
		db:   db,
		file: file,
		log:  opts.Logger,
	}
	st, cleanup, err := b.loadProtected()
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("replog: open store %s: %w", path, err)
	}
	b.state.Store(st)
	b.cleanup = cleanup
	b.log.Debug("store opened", "path", path, "log_start", st.logStart, "leo", st.leo,
		"last_epoch", st.lastEpoch(), "no_sync", opts.NoSync)
	return b, nil
}

// openVerified locks the file at path, verifies its structure and hands
// the same open file to bbolt; it returns bbolt's handle and the file.
func openVerified(path string, opts DirOptions, verify bool) (db *bolt.DB, file *os.File, err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("replog: open store %s: %w", path, err)
	}
	handed := false // once bbolt has f, bbolt closes it
	defer func() {
		if !handed {
			_ = f.Close()
		}
	}()
	if err := lockFile(f, opts.Timeout); err != nil {
		if errors.Is(err, errLockTimeout) {
			return nil, nil, fmt.Errorf("%w: %s: file lock not obtained within %v", ErrLocked, path, opts.Timeout)
		}
		return nil, nil, fmt.Errorf("replog: lock store %s: %w", path, err)
	}
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, fmt.Errorf("replog: open store %s: %w", path, err)
	}
	if verify && fi.Size() > 0 {
		if err := verifyBoltFile(f, fi.Size()); err != nil {
			return nil, nil, fmt.Errorf("replog: open store %s: %w", path, err)
		}
	}
	// Defence in depth: what bbolt does on this goroutine cannot take the
	// process down (its own free-list walk runs in another goroutine,
	// which the verification above protects).
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			handed = false // bbolt may not have closed f
			db, file, err = nil, nil, fmt.Errorf("replog: open store %s: %w (bbolt: %v)", path, ErrCorrupt, r)
		}
	}()
	handed = true
	db, err = bolt.Open(path, 0o600, &bolt.Options{
		Timeout:        opts.Timeout,
		FreelistType:   bolt.FreelistMapType,
		NoFreelistSync: true,
		NoSync:         opts.NoSync,
		OpenFile:       func(string, int, os.FileMode) (*os.File, error) { return f, nil },
	})
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, nil, fmt.Errorf("%w: %s: file lock not obtained within %v", ErrLocked, path, opts.Timeout)
	}
	if errors.Is(err, berrors.ErrInvalid) || errors.Is(err, berrors.ErrChecksum) || errors.Is(err, berrors.ErrVersionMismatch) {
		return nil, nil, fmt.Errorf("replog: open store %s: %w (bbolt: %v)", path, ErrCorrupt, err)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("replog: open store %s: %w", path, err)
	}
	return db, f, nil
}

// loadProtected is load on this goroutine with faults and bbolt's
// assertions turned into ErrCorrupt.
func (b *Bolt) loadProtected() (st *logState, cleanup bool, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			st, cleanup, err = nil, false, fmt.Errorf("%w: reading the store's records: %v", ErrCorrupt, r)
		}
	}()
	return b.load()
}

// load creates the buckets of a fresh file, or validates an existing one,
// and returns its state; cleanup reports entries left below the log start.
func (b *Bolt) load() (st *logState, cleanup bool, err error) {
	st = &logState{}
	// An existing file is only read (a bbolt commit writes a meta page even
	// when nothing changed: opening a file must not modify it).
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
			if err := meta.Put(keyFormat, []byte{boltFormat}); err != nil {
				return err
			}
			return meta.Put(keyLogStart, u64key(0))
		}
		eb, epb, qb := tx.Bucket(bucketEntries), tx.Bucket(bucketEpochs), tx.Bucket(bucketQuorum)
		if eb == nil || epb == nil || qb == nil {
			return fmt.Errorf("%w: bucket missing", ErrCorrupt)
		}
		if f := meta.Get(keyFormat); len(f) == 1 && f[0] == boltFormatSegmented {
			return fmt.Errorf("%w: the active segment of a segmented data directory (format %d), not a whole log: open its directory with OpenDir", ErrCorrupt, f[0])
		} else if len(f) != 1 || f[0] != boltFormat {
			return fmt.Errorf("%w: unknown store format %x", ErrCorrupt, f)
		}
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
		if v := meta.Get(keyIdentity); v != nil {
			r, err := decodeIdentity(v)
			if err != nil {
				return fmt.Errorf("%w: identity record: %v", ErrCorrupt, err)
			}
			b.identity = &r.Identity
		}
		if v := qb.Get(keyQuorum); v != nil {
			qs, err := decodeQuorumState(v)
			if err != nil {
				return err
			}
			st.quorum = qs
		}
		c := eb.Cursor()
		st.leo = st.logStart
		first, _ := c.First()
		last, _ := c.Last()
		if (first != nil && len(first) != 8) || (last != nil && len(last) != 8) {
			return fmt.Errorf("%w: entry key of bad length", ErrCorrupt)
		}
		if last != nil && binary.BigEndian.Uint64(last) >= st.logStart {
			st.leo = binary.BigEndian.Uint64(last) + 1
		}
		cleanup = first != nil && binary.BigEndian.Uint64(first) < st.logStart
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
		// Cheap consistency checks: the first and last entries decode and
		// carry the epoch the map gives for them, and there are as many
		// keys between them as the offsets say (spot-checked at the ends).
		if st.leo > st.logStart {
			for _, off := range []uint64{st.logStart, st.leo - 1} {
				v := eb.Get(u64key(off))
				if v == nil {
					return fmt.Errorf("%w: entry at offset %d missing", ErrCorrupt, off)
				}
				e, err := decodeEntry(v)
				if err != nil {
					return fmt.Errorf("entry at offset %d: %w", off, err)
				}
				if want := epochAt(st.epochs, off); e.Epoch != want {
					return fmt.Errorf("%w: entry at offset %d has epoch %d, epoch map says %d", ErrCorrupt, off, e.Epoch, want)
				}
			}
		}
		return nil
	}
	err = b.db.View(load)
	if err == nil && fresh {
		err = b.db.Update(load)
	}
	return st, cleanup, err
}

// Apply implements Store: one bbolt transaction for all of ws, on the
// caller's goroutine.
func (b *Bolt) Apply(ws []protocol.Write) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed.Load() {
		return ErrClosed
	}
	if b.failed != nil {
		return b.failed
	}
	b.applies.Add(1)
	b.writes.Add(uint64(len(ws)))
	old := b.state.Load()
	st := old
	tx, err := b.db.Begin(true)
	if err != nil {
		return b.fail(err, len(ws))
	}
	defer func() { _ = tx.Rollback() }() // no-op after Commit
	eb := tx.Bucket(bucketEntries)
	eb.FillPercent = 1.0 // entries are only appended at the end: pack pages full
	changed := false
	for i := range ws {
		next, err := st.after(&ws[i])
		if err != nil {
			return writeErr(ws, i, err) // rolled back: nothing applied
		}
		if next == st {
			continue
		}
		if err := b.put(tx, eb, st, next, &ws[i]); err != nil {
			return b.fail(err, len(ws))
		}
		st, changed = next, true
	}
	// Entries below the log start (left by an earlier deletion, or moved
	// there by this batch) go a chunk at a time, in this transaction.
	cleanup, cleaned := b.cleanup || st.logStart > old.logStart, false
	if cleanup {
		var err error
		if cleanup, cleaned, err = cleanupChunkTx(eb, st.logStart); err != nil {
			return b.fail(err, len(ws))
		}
	}
	if !changed && !cleaned {
		return nil // nothing to write: no fsync
	}
	if err := tx.Commit(); err != nil {
		return b.fail(err, len(ws))
	}
	b.state.Store(st)
	b.commits.Add(1)
	if cleaned {
		b.cleanups.Add(1)
	}
	b.cleanup = cleanup
	return nil
}

// fail latches err, an error of the transaction of an Apply of n writes
// (the caller holds mu), and returns what that Apply returns.
func (b *Bolt) fail(err error, n int) error {
	b.log.Error("commit failed", "path", b.path, "writes", n, "error", err)
	err = fmt.Errorf("replog: store %s: commit: %w", b.path, err)
	b.failed = fmt.Errorf("%w (the store refuses writes after a failed commit; close and reopen it)", err)
	return err
}

// put writes w into tx; w is valid against st and turns it into next.
func (b *Bolt) put(tx *bolt.Tx, eb *bolt.Bucket, st, next *logState, w *protocol.Write) error {
	switch w.Kind {
	case protocol.WriteAppend:
		// bbolt keeps the key and value slices until commit: one buffer
		// each for the whole write.
		size := 0
		for i := range w.Entries {
			size += encodedEntrySize(&w.Entries[i])
		}
		keys := make([]byte, 8*len(w.Entries))
		vals := make([]byte, 0, size)
		for i := range w.Entries {
			e := &w.Entries[i]
			k := keys[8*i : 8*i+8 : 8*i+8]
			binary.BigEndian.PutUint64(k, e.Offset)
			start := len(vals)
			vals = appendEntry(vals, e)
			if err := eb.Put(k, vals[start:len(vals):len(vals)]); err != nil {
				return err
			}
		}
		if err := writeEpochs(tx, st.epochs, next.epochs); err != nil {
			return err
		}
		return writeVoters(tx, st.voters, next.voters)
	case protocol.WriteTruncate:
		c := eb.Cursor()
		from := u64key(w.Offset)
		for k, _ := c.Seek(from); k != nil; k, _ = c.Seek(from) {
			// Re-seek after each Delete: bbolt's cursor skips a key otherwise.
			if err := c.Delete(); err != nil {
				return err
			}
		}
		if err := writeEpochs(tx, st.epochs, next.epochs); err != nil {
			return err
		}
		if err := writeVoters(tx, st.voters, next.voters); err != nil {
			return err
		}
		if next.hw != st.hw {
			b.log.Warn("truncation below the HW checkpoint; checkpoint lowered", "hw", st.hw, "to", next.hw)
			return tx.Bucket(bucketMeta).Put(keyHW, u64key(next.hw))
		}
		return nil
	case protocol.WriteDeletePrefix:
		if err := tx.Bucket(bucketMeta).Put(keyLogStart, u64key(w.Offset)); err != nil {
			return err
		}
		if err := writeEpochs(tx, st.epochs, next.epochs); err != nil {
			return err
		}
		return writeVoters(tx, st.voters, next.voters)
	case protocol.WriteQuorumState:
		return tx.Bucket(bucketQuorum).Put(keyQuorum, encodeQuorumState(w.Quorum))
	case protocol.WriteHWCheckpoint:
		return tx.Bucket(bucketMeta).Put(keyHW, u64key(w.Offset))
	}
	return fmt.Errorf("storage: unknown write kind %v", w.Kind) // after refuses these first
}

// writeEpochs turns the epoch map on disk from old into cur.
func writeEpochs(tx *bolt.Tx, old, cur []protocol.EpochStart) error {
	if len(old) == len(cur) && (len(old) == 0 || (&old[0] == &cur[0])) {
		return nil // unchanged (published slices are never mutated)
	}
	eb := tx.Bucket(bucketEpochs)
	keep := make(map[uint64]uint64, len(cur))
	for _, r := range cur {
		keep[r.Epoch] = r.StartOffset
	}
	for _, r := range old {
		s, ok := keep[r.Epoch]
		if ok && s == r.StartOffset {
			delete(keep, r.Epoch)
			continue
		}
		if !ok {
			if err := eb.Delete(u64key(r.Epoch)); err != nil {
				return err
			}
		}
	}
	for e, s := range keep {
		if err := eb.Put(u64key(e), u64key(s)); err != nil {
			return err
		}
	}
	return nil
}

// writeVoters turns the voter-set rows on disk from old into cur; it
// creates the bucket in a file from before voter sets.
func writeVoters(tx *bolt.Tx, old, cur []protocol.VotersAt) error {
	if len(old) == len(cur) && (len(old) == 0 || &old[0] == &cur[0]) {
		return nil // unchanged (published slices are never mutated)
	}
	vb, err := tx.CreateBucketIfNotExists(bucketVoters)
	if err != nil {
		return err
	}
	// A row is the same row if it holds the same set (published sets are
	// never mutated, so the same backing array); sets are never empty.
	had := make(map[uint64]*protocol.Voter, len(old))
	for _, r := range old {
		had[r.Offset] = &r.Voters[0]
	}
	for _, r := range cur {
		if had[r.Offset] == &r.Voters[0] {
			delete(had, r.Offset)
			continue
		}
		if err := vb.Put(u64key(r.Offset), encodeVotersRow(r)); err != nil {
			return err
		}
		delete(had, r.Offset) // overwritten
	}
	for off := range had {
		if err := vb.Delete(u64key(off)); err != nil {
			return err
		}
	}
	return nil
}

// readVoters reads the voter-set rows of tx's file (none in a file from
// before voter sets); a row that does not decode is ErrCorrupt naming its
// offset.
func readVoters(tx *bolt.Tx) ([]protocol.VotersAt, error) {
	vb := tx.Bucket(bucketVoters)
	if vb == nil {
		return nil, nil
	}
	var rows []protocol.VotersAt
	err := vb.ForEach(func(k, v []byte) error {
		if len(k) != 8 {
			return fmt.Errorf("%w: voter-set row key of %d bytes", ErrCorrupt, len(k))
		}
		off := binary.BigEndian.Uint64(k)
		row, err := decodeVotersRow(off, v)
		if err != nil {
			return err
		}
		rows = append(rows, row)
		return nil
	})
	return rows, err
}

// cleanupChunkTx deletes up to cleanupChunk entries below logStart from eb
// (in the caller's transaction). more reports entries left below it;
// deleted reports that it deleted any.
func cleanupChunkTx(eb *bolt.Bucket, logStart uint64) (more, deleted bool, err error) {
	limit := u64key(logStart)
	c := eb.Cursor()
	k, _ := c.First()
	for n := 0; n < cleanupChunk && k != nil && string(k) < string(limit); n++ {
		if err := c.Delete(); err != nil {
			return true, deleted, err
		}
		deleted = true
		k, _ = c.First() // re-seek after Delete
	}
	return k != nil && string(k) < string(limit), deleted, nil
}

// Append implements Store (Apply of one write).
func (b *Bolt) Append(entries []protocol.Entry) error {
	return b.Apply([]protocol.Write{{Kind: protocol.WriteAppend, Entries: entries}})
}

// TruncateSuffix implements Store (Apply of one write).
func (b *Bolt) TruncateSuffix(from uint64) error {
	return b.Apply([]protocol.Write{{Kind: protocol.WriteTruncate, Offset: from}})
}

// DeletePrefix implements Store (Apply of one write).
func (b *Bolt) DeletePrefix(upTo uint64) error {
	return b.Apply([]protocol.Write{{Kind: protocol.WriteDeletePrefix, Offset: upTo}})
}

// SetQuorumState implements Store (Apply of one write).
func (b *Bolt) SetQuorumState(s protocol.QuorumState) error {
	return b.Apply([]protocol.Write{{Kind: protocol.WriteQuorumState, Quorum: s}})
}

// SetHWCheckpoint implements Store (Apply of one write).
func (b *Bolt) SetHWCheckpoint(hw uint64) error {
	return b.Apply([]protocol.Write{{Kind: protocol.WriteHWCheckpoint, Offset: hw}})
}

// Entries implements Store.
//
// A page of the file that faults when read (the file shrank under the
// store) or trips one of bbolt's assertions returns an error wrapping
// ErrCorrupt instead of crashing the caller.
func (b *Bolt) Entries(from uint64, maxCount int, maxBytes int) (es []protocol.Entry, err error) {
	if b.closed.Load() {
		return nil, ErrClosed
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			es, err = nil, fmt.Errorf("replog: store %s: %w: reading entries from offset %d: %v", b.path, ErrCorrupt, from, r)
		}
	}()
	tx, err := b.db.Begin(false)
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		return nil, ErrClosed
	}
	if err != nil {
		return nil, fmt.Errorf("replog: store %s: %w", b.path, err)
	}
	defer func() { _ = tx.Rollback() }()
	// Bounds from the transaction's own snapshot, not the cache, so that a
	// concurrent write cannot make them disagree with what the cursor sees.
	logStart := binary.BigEndian.Uint64(tx.Bucket(bucketMeta).Get(keyLogStart))
	c := tx.Bucket(bucketEntries).Cursor()
	leo := logStart
	if k, _ := c.Last(); k != nil && binary.BigEndian.Uint64(k) >= logStart {
		leo = binary.BigEndian.Uint64(k) + 1
	}
	if from == leo {
		return nil, nil
	}
	if from < logStart || from > leo {
		return nil, fmt.Errorf("%w: offset %d outside [%d, %d)", ErrOutOfRange, from, logStart, leo)
	}
	// got's Data alias the mmap until the transaction ends.
	var got []protocol.Entry
	size := 0 // Data bytes, for the arena
	budget := protocol.Budget{Max: maxBytes}
	off := from
	for k, v := c.Seek(u64key(from)); k != nil; k, v = c.Next() {
		if maxCount > 0 && len(got) >= maxCount {
			break
		}
		if len(k) != 8 || binary.BigEndian.Uint64(k) != off {
			return nil, fmt.Errorf("replog: store %s: %w: entry at offset %d missing", b.path, ErrCorrupt, off)
		}
		e, err := decodeEntry(v)
		if err != nil {
			return nil, fmt.Errorf("replog: store %s: entry at offset %d: %w", b.path, off, err)
		}
		if !budget.Take(len(e.Data)) {
			break
		}
		size += len(e.Data)
		e.Offset = off
		got = append(got, e)
		off++
	}
	// One allocation for all payloads; each Data is capped so that an
	// append by the caller cannot overwrite the next entry's.
	arena := make([]byte, 0, size)
	for i := range got {
		start := len(arena)
		arena = append(arena, got[i].Data...)
		got[i].Data = arena[start:len(arena):len(arena)]
	}
	return got, nil
}

// LEO implements Store.
func (b *Bolt) LEO() uint64 { return b.state.Load().leo }

// LogStart implements Store.
func (b *Bolt) LogStart() uint64 { return b.state.Load().logStart }

// LastEpoch implements Store.
func (b *Bolt) LastEpoch() uint64 { return b.state.Load().lastEpoch() }

// EndOffsetForEpoch implements Store.
func (b *Bolt) EndOffsetForEpoch(epoch uint64) (uint64, uint64) {
	return b.state.Load().endOffsetForEpoch(epoch)
}

// EpochMap implements Store.
func (b *Bolt) EpochMap() []protocol.EpochStart { return cloneEpochs(b.state.Load().epochs) }

// VoterSets implements Store.
func (b *Bolt) VoterSets() []protocol.VotersAt { return cloneVoters(b.state.Load().voters) }

// QuorumState implements Store.
func (b *Bolt) QuorumState() (protocol.QuorumState, error) {
	if b.closed.Load() {
		return protocol.QuorumState{}, ErrClosed
	}
	return b.state.Load().quorum, nil
}

// HWCheckpoint implements Store.
func (b *Bolt) HWCheckpoint() (uint64, bool, error) {
	if b.closed.Load() {
		return 0, false, ErrClosed
	}
	st := b.state.Load()
	return st.hw, st.hwOK, nil
}

// Stats returns the store's write counters.
func (b *Bolt) Stats() BoltStats {
	return BoltStats{
		Applies:        b.applies.Load(),
		Writes:         b.writes.Load(),
		Commits:        b.commits.Load(),
		CleanupCommits: b.cleanups.Load(),
		PagesWritten:   pagesWritten(b.db),
		PageSize:       b.db.Info().PageSize,
	}
}

// Path returns the file the store was opened on.
func (b *Bolt) Path() string { return b.path }

// Close waits for the Apply in progress, if any, closes the file and
// releases its lock. Apply calls waiting or made later return ErrClosed;
// closing twice returns ErrClosed.
func (b *Bolt) Close() error {
	if !b.closed.CompareAndSwap(false, true) {
		return ErrClosed
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.db.Close(); err != nil {
		return fmt.Errorf("replog: close store %s: %w", b.path, err)
	}
	return nil
}

var _ Store = (*Bolt)(nil)

func pagesWritten(db *bolt.DB) uint64 {
	st := db.Stats()
	return uint64(st.TxStats.GetWrite())
}
