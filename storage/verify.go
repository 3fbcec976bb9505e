package storage

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"runtime/debug"
	"sync/atomic"
)

// verifyBoltFile checks, before bbolt maps a file read-write, every
// structural property bbolt relies on without checking when it opens a file
// with NoFreelistSync: it rebuilds its free-page list by walking every page
// of the tree in a goroutine of its own, where an assertion or a fault on a
// damaged page kills the process (no recover can reach it). So the walk is
// repeated here first, on the opening goroutine, over a read-only mapping
// of the file read through bounds-checked slices under
// debug.SetPanicOnFault (pread is the fallback where mapping fails), so a
// damaged file cannot kill the process, with bbolt's own rules:
//
//   - both meta pages have bbolt's magic, version and checksum (bbolt falls
//     back to the older one silently; see below why this store does not),
//     the same page size, and the newer one's root, free-list page and
//     high-water page id are in range;
//   - the file size is a multiple of the page size and covers every page
//     below the high-water mark;
//   - every page reachable from the root bucket, nested buckets included,
//     is below the high-water mark (its overflow too), names itself with
//     its own id, is a branch or a leaf page, is referenced once, has its
//     elements, keys and values inside its own bytes, non-empty keys in
//     bbolt's order (the checks of bbolt's Tx.Check, which it also runs
//     while rebuilding the free list, panicking on the first violation);
//   - inline buckets are leaf pages inside their value, with the same checks;
//   - a stored free-list page (a file fresh from bbolt's init) is a
//     free-list page whose ids are in range, distinct and unreachable.
//
// Why both meta pages must be valid: bbolt writes a meta page with one
// write of one page after the data of its transaction is synced, and the
// meta fields fill the first 80 bytes, inside the first disk sector. A
// crash (even a power cut, given sector-atomic writes) leaves either the
// old or the new version of that page, both valid; an invalid meta page
// therefore means damage, not a crash. Falling back to the other one would
// silently drop the newest transaction — perhaps a vote — if the damaged
// page held it.
//
// Why a walk of every page, and not only cheap checks plus recover: with
// NoFreelistSync, bbolt's read-write Open walks every page in a goroutine
// it starts itself (DB.freepages), and so do Tx.Check and a read-only
// open's free-list load. debug.SetPanicOnFault and recover act on one
// goroutine only, so neither can catch that walk's assertion panics
// ("Page expected to be: …") or faults; the only protection is that the
// walk never meets a bad page. Cheap checks (meta checksums, file size
// against the high-water mark) catch truncation and meta damage, but not
// a damaged page in the middle of the tree, which is exactly what the
// walk then trips on. The cost grows with the file, as bbolt's own walk
// does (a data directory's segments bound both per file): on a 100k-entry
// file (17 MiB, warm cache) the walk takes about as long as bbolt's
// rebuild that follows it (~5 ms each; see BenchmarkOpen100k), and with a
// cold cache it does the reading bbolt's walk would have done. Reading
// every entry to verify its CRC (a full check of the data) costs ~7 times
// more and is left to the reads, which verify each entry they return.
//
// It returns an error (wrapping ErrCorrupt) that says what is wrong where.
//
// The file is mapped read-only for the walk where the platform allows
// (mapFile); the walk runs on the caller's goroutine with
// debug.SetPanicOnFault, so a file that shrinks under it (only a process
// ignoring the lock could do that) gives an error, not a crash.
func verifyBoltFile(f *os.File, size int64) (err error) {
	v := &verifier{r: f, size: size}
	if data, unmap, merr := mapFile(f, size); merr == nil {
		v.data = data
		defer unmap()
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: reading the file failed (did it shrink?): %v", ErrCorrupt, r)
		}
	}()
	return v.run()
}

const (
	pageHeaderSize  = 16
	elementSize     = 16 // branch and leaf elements have the same size
	bucketHeader    = 16 // root page id + sequence
	metaSize        = 64
	boltMagic       = 0xED0CDAED
	boltVersion     = 2
	flagBranch      = 0x01
	flagLeaf        = 0x02
	flagMeta        = 0x04
	flagFreelist    = 0x10
	flagBucketLeaf  = 0x01
	noFreelist      = ^uint64(0)
	maxTreeDepth    = 64 // far beyond any real tree (pages hold ≥ 2 keys)
	maxBucketDepth  = 64
	minBoltPageSize = 1024
	maxBoltPageSize = 1 << 24 // bbolt looks no further for the second meta page
)

var ne = binary.NativeEndian // bbolt writes its structures in native byte order

type boltMeta struct {
	page                 uint64 // 0 or 1
	magic, version       uint32
	pageSize             uint32
	root, freelist, hwm  uint64
	txid                 uint64
	checksum, computed   uint64
	headerID, headerFlag uint64
}

func (m *boltMeta) validate() error {
	switch {
	case m.magic != boltMagic:
		return fmt.Errorf("meta page %d: not a bbolt meta page (magic %#x)", m.page, m.magic)
	case m.version != boltVersion:
		return fmt.Errorf("meta page %d: bbolt format version %d, want %d", m.page, m.version, boltVersion)
	case m.checksum != m.computed:
		return fmt.Errorf("meta page %d: checksum mismatch", m.page)
	case m.pageSize < minBoltPageSize || m.pageSize > maxBoltPageSize || m.pageSize&(m.pageSize-1) != 0:
		return fmt.Errorf("meta page %d: page size %d", m.page, m.pageSize)
	}
	return nil
}

type verifier struct {
	r        io.ReaderAt
	size     int64
	pageSize int
	hwm      uint64
	seen     []uint64 // bitmap of pages reached

	// data is the file mapped read-only, or nil: then pages are read
	// with pread (one syscall per page: several times slower than bbolt's
	// own walk, as the tree's pages are scattered over the file), or from
	// chunk when it has a capacity.
	data []byte

	// chunk, when it has a capacity, is a window of the file read with one
	// pread of up to cap(chunk) bytes at chunkOff: the background walk's
	// leaves, read in descending page order, come from a few large reads
	// instead of one per page and no mapping. A slice of it is valid until
	// the next read only (nothing of a leaf page is kept after its check).
	chunk    []byte
	chunkOff int64

	// entries says how the top-level entries bucket's tree (a tree of
	// pages, not inline) is walked: entriesFull like any other, or (for
	// the active file, see activeCheck) entriesSkip (its root noted in
	// entriesRoot, nothing read: Open verifies the paths it reads) or
	// entriesDefer (its branch pages checked, its leaves appended to
	// leaves in key order, for a later pass).
	entries     int
	entriesRoot uint64
	leafDepth   int // entriesDefer: depth of the tree's leaves, -1 until the first is read
	leaves      []leafRef

	free []uint64     // the ids the free list holds, once checked
	stop *atomic.Bool // set: stop at the next page read (errStopped)
	// prefetch, if set, is told the pages about to be read one by one.
	prefetch func(ids []uint64)
}

const (
	entriesFull = iota
	entriesSkip
	entriesDefer
)

// leafRef is a leaf page of the entries tree recorded for a later check:
// its keys must lie in [minKey, maxKey); lb is the lowest key bbolt routes
// to it (nil: all keys below its own), which bounds the offsets whose
// reads touch it or the leaves after it.
type leafRef struct {
	id             uint64
	minKey, maxKey []byte
	lb             []byte
	done           bool // already checked (a leaf above the leaf level)
}

// bytesAt returns the file's n bytes at off.
func (v *verifier) bytesAt(off int64, n int) ([]byte, error) {
	if off < 0 || n < 0 || off+int64(n) > v.size {
		return nil, io.ErrUnexpectedEOF
	}
	if v.data != nil {
		return v.data[off : off+int64(n) : off+int64(n)], nil
	}
	if cap(v.chunk) >= n {
		return v.chunkAt(off, n)
	}
	buf := make([]byte, n)
	if _, err := v.r.ReadAt(buf, off); err != nil {
		return nil, err
	}
	return buf, nil
}

// chunkAt returns the file's n bytes at off from the chunk, reading the
// window that ends at off+n (the walk goes down the file) when they are
// not in it.
func (v *verifier) chunkAt(off int64, n int) ([]byte, error) {
	end := off + int64(n)
	if off >= v.chunkOff && end <= v.chunkOff+int64(len(v.chunk)) {
		i := off - v.chunkOff
		return v.chunk[i : i+int64(n) : i+int64(n)], nil
	}
	start := max(0, end-int64(cap(v.chunk)))
	if v.pageSize > 0 {
		start -= start % int64(v.pageSize)
	}
	stop := min(v.size, start+int64(cap(v.chunk)))
	buf := v.chunk[:stop-start]
	if _, err := v.r.ReadAt(buf, start); err != nil {
		v.chunk = v.chunk[:0]
		return nil, err
	}
	v.chunk, v.chunkOff = buf, start
	i := off - start
	return buf[i : i+int64(n) : i+int64(n)], nil
}

func (v *verifier) readMeta(page uint64, off int64) (*boltMeta, error) {
	var b [pageHeaderSize + metaSize]byte
	if _, err := v.r.ReadAt(b[:], off); err != nil {
		return nil, fmt.Errorf("meta page %d: %w", page, err)
	}
	m := &boltMeta{
		page:       page,
		headerID:   ne.Uint64(b[0:]),
		headerFlag: uint64(ne.Uint16(b[8:])),
		magic:      ne.Uint32(b[16:]),
		version:    ne.Uint32(b[20:]),
		pageSize:   ne.Uint32(b[24:]),
		root:       ne.Uint64(b[32:]),
		freelist:   ne.Uint64(b[48:]),
		hwm:        ne.Uint64(b[56:]),
		txid:       ne.Uint64(b[64:]),
		checksum:   ne.Uint64(b[72:]),
	}
	h := fnv.New64a()
	h.Write(b[16:72])
	m.computed = h.Sum64()
	return m, nil
}

func (v *verifier) run() error {
	m, err := v.metas()
	if err != nil {
		return err
	}
	if err := v.tree(m.root, nil, nil, 0, 0); err != nil {
		return fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if m.freelist != noFreelist {
		if err := v.freelist(m.freelist); err != nil {
			return fmt.Errorf("%w: %v", ErrCorrupt, err)
		}
	}
	return nil
}

// metas checks both meta pages and the file's size against them, and sets
// up the walk of the newer one's tree (page size, high-water mark, the
// bitmap of pages reached), which it returns.
func (v *verifier) metas() (*boltMeta, error) {
	if v.size < 2*minBoltPageSize {
		return nil, fmt.Errorf("%w: file of %d bytes is too short for a bbolt file", ErrCorrupt, v.size)
	}
	m0, err := v.readMeta(0, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if err := m0.validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	v.pageSize = int(m0.pageSize)
	if int64(v.pageSize)*2 > v.size {
		return nil, fmt.Errorf("%w: file of %d bytes is shorter than its two meta pages of %d bytes", ErrCorrupt, v.size, v.pageSize)
	}
	m1, err := v.readMeta(1, int64(v.pageSize))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if err := m1.validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if m1.pageSize != m0.pageSize {
		return nil, fmt.Errorf("%w: meta pages disagree on the page size (%d, %d)", ErrCorrupt, m0.pageSize, m1.pageSize)
	}
	m := m0 // bbolt uses the newer one
	if m1.txid > m0.txid {
		m = m1
	}
	if v.size%int64(v.pageSize) != 0 {
		return nil, fmt.Errorf("%w: file size %d is not a multiple of the page size %d (truncated or extended by something other than the store)",
			ErrCorrupt, v.size, v.pageSize)
	}
	pages := uint64(v.size / int64(v.pageSize))
	switch {
	case m.hwm > pages:
		return nil, fmt.Errorf("%w: file of %d bytes holds %d pages but meta page %d (txid %d) says %d are in use (truncated)",
			ErrCorrupt, v.size, pages, m.page, m.txid, m.hwm)
	case m.root < 2 || m.root >= m.hwm:
		return nil, fmt.Errorf("%w: meta page %d: root page %d outside [2, %d)", ErrCorrupt, m.page, m.root, m.hwm)
	case m.freelist != noFreelist && (m.freelist < 2 || m.freelist >= m.hwm):
		return nil, fmt.Errorf("%w: meta page %d: free-list page %d outside [2, %d)", ErrCorrupt, m.page, m.freelist, m.hwm)
	}
	v.hwm = m.hwm
	v.seen = make([]uint64, (m.hwm+63)/64)
	return m, nil
}

// readPage reads page id with its overflow pages.
func (v *verifier) readPage(id uint64) ([]byte, error) {
	if v.stop != nil && v.stop.Load() {
		return nil, errStopped
	}
	if id < 2 || id >= v.hwm {
		return nil, fmt.Errorf("page %d: outside [2, %d)", id, v.hwm)
	}
	buf, err := v.bytesAt(int64(id)*int64(v.pageSize), v.pageSize)
	if err != nil {
		return nil, fmt.Errorf("page %d: %w", id, err)
	}
	if got := ne.Uint64(buf); got != id {
		return nil, fmt.Errorf("page %d: names itself page %d", id, got)
	}
	if ovf := uint64(ne.Uint32(buf[12:])); ovf > 0 {
		if ovf >= v.hwm-id {
			return nil, fmt.Errorf("page %d: %d overflow pages run past the high-water mark %d", id, ovf, v.hwm)
		}
		if buf, err = v.bytesAt(int64(id)*int64(v.pageSize), int(ovf+1)*v.pageSize); err != nil {
			return nil, fmt.Errorf("page %d: overflow: %w", id, err)
		}
	}
	return buf, nil
}

// reach marks page id and its overflow as referenced.
func (v *verifier) reach(id uint64, p []byte) error {
	n := uint64(len(p) / v.pageSize)
	for i := id; i < id+n; i++ {
		if v.seen[i/64]&(1<<(i%64)) != 0 {
			return fmt.Errorf("page %d: referenced twice", i)
		}
		v.seen[i/64] |= 1 << (i % 64)
	}
	return nil
}

// elements returns the count and checks the element array fits in p.
func elements(p []byte) (int, error) {
	n := int(ne.Uint16(p[10:]))
	if pageHeaderSize+n*elementSize > len(p) {
		return 0, fmt.Errorf("%d elements do not fit in %d bytes", n, len(p))
	}
	return n, nil
}

// elemKV returns element i's key (and value, for a leaf) inside p.
func elemKV(p []byte, i int, leaf bool) (flags uint32, key, val []byte, child uint64, err error) {
	off := pageHeaderSize + i*elementSize
	e := p[off : off+elementSize]
	var pos, ksize, vsize uint64
	if leaf {
		flags, pos, ksize, vsize = ne.Uint32(e), uint64(ne.Uint32(e[4:])), uint64(ne.Uint32(e[8:])), uint64(ne.Uint32(e[12:]))
	} else {
		pos, ksize, child = uint64(ne.Uint32(e)), uint64(ne.Uint32(e[4:])), ne.Uint64(e[8:])
	}
	start := uint64(off) + pos
	end := start + ksize + vsize // each term < 2^32: no overflow
	if end > uint64(len(p)) {
		return 0, nil, nil, 0, fmt.Errorf("element %d: key and value [%d, %d) outside the page's %d bytes", i, start, end, len(p))
	}
	if ksize == 0 {
		return 0, nil, nil, 0, fmt.Errorf("element %d: empty key", i)
	}
	return flags, p[start : start+ksize], p[start+ksize : end], child, nil
}

// tree checks the subtree at page id, whose keys must lie in [minKey,
// maxKey) (nil: unbounded), with bbolt's recursivelyCheckPageKeyOrder
// rules: a branch page's keys in order within its bounds, and each child's
// keys in [its key, the next key).
func (v *verifier) tree(id uint64, minKey, maxKey []byte, depth, bucketDepth int) error {
	if depth > maxTreeDepth {
		return fmt.Errorf("page %d: tree deeper than %d", id, maxTreeDepth)
	}
	p, err := v.readPage(id)
	if err != nil {
		return err
	}
	if err := v.reach(id, p); err != nil {
		return err
	}
	flags := ne.Uint16(p[8:])
	n, err := elements(p)
	if err != nil {
		return fmt.Errorf("page %d: %v", id, err)
	}
	switch flags {
	case flagBranch:
		keys, children, err := branch(id, p, n, minKey, maxKey)
		if err != nil {
			return err
		}
		for i, child := range children {
			if err := v.tree(child, keys[i], nextKey(keys, i, maxKey), depth+1, bucketDepth); err != nil {
				return err
			}
		}
		return nil
	case flagLeaf:
		_, err := v.leaf(id, "", p, n, minKey, maxKey, bucketDepth)
		return err
	}
	return fmt.Errorf("page %d: type flags %#x where a branch or leaf page belongs", id, flags)
}

// branch checks the n elements of branch page p (inside the page, keys in
// order within [minKey, maxKey)) and returns their keys and children.
// bbolt's own check compares each key with the largest key of the subtree
// before it, which lies below the key whenever the subtrees are sound;
// checking the keys among themselves first lets a walk check a branch page
// whole before any of its children.
func branch(id uint64, p []byte, n int, minKey, maxKey []byte) (keys [][]byte, children []uint64, err error) {
	if n == 0 {
		return nil, nil, fmt.Errorf("branch page %d: no elements", id)
	}
	keys, children = make([][]byte, n), make([]uint64, n)
	prev := minKey
	for i := 0; i < n; i++ {
		_, key, _, child, err := elemKV(p, i, false)
		if err != nil {
			return nil, nil, fmt.Errorf("branch page %d: %v", id, err)
		}
		if err := keyOrder(i, key, prev, maxKey); err != nil {
			return nil, nil, fmt.Errorf("branch page %d: %v", id, err)
		}
		keys[i], children[i], prev = key, child, key
	}
	return keys, children, nil
}

// nextKey is the upper bound of child i of a branch page with keys.
func nextKey(keys [][]byte, i int, maxKey []byte) []byte {
	if i+1 < len(keys) {
		return keys[i+1]
	}
	return maxKey
}

// leaf checks the elements of a leaf page (or inline bucket page) p and
// descends into the buckets it holds.
func (v *verifier) leaf(id uint64, bucket string, p []byte, n int, minKey, maxKey []byte, bucketDepth int) ([]byte, error) {
	what := func() string {
		if bucket != "" {
			return fmt.Sprintf("bucket %q inline page", bucket)
		}
		return fmt.Sprintf("leaf page %d", id)
	}
	running := minKey
	for i := 0; i < n; i++ {
		flags, key, val, _, err := elemKV(p, i, true)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", what(), err)
		}
		if err := keyOrder(i, key, running, maxKey); err != nil {
			return nil, fmt.Errorf("%s: %v", what(), err)
		}
		running = key
		if flags&flagBucketLeaf != 0 {
			if err := v.bucket(key, val, bucketDepth+1); err != nil {
				return nil, err
			}
		}
	}
	if n == 0 {
		return nil, nil
	}
	return running, nil
}

// bucket checks a bucket whose header (and inline page) is val.
func (v *verifier) bucket(name, val []byte, depth int) error {
	if depth > maxBucketDepth {
		return fmt.Errorf("bucket %q: nested deeper than %d", name, maxBucketDepth)
	}
	if len(val) < bucketHeader {
		return fmt.Errorf("bucket %q: header of %d bytes", name, len(val))
	}
	root := ne.Uint64(val)
	if root != 0 {
		if depth == 1 && v.entries != entriesFull && bytes.Equal(name, bucketEntries) {
			if v.entriesRoot != 0 {
				return fmt.Errorf("bucket %q: listed twice", name)
			}
			v.entriesRoot = root
			if v.entries == entriesSkip {
				return nil
			}
			v.leafDepth = -1
			return v.entryTree(root, nil, nil, nil, 0)
		}
		return v.tree(root, nil, nil, 0, depth)
	}
	p := val[bucketHeader:]
	if len(p) < pageHeaderSize {
		return fmt.Errorf("bucket %q: inline page of %d bytes", name, len(p))
	}
	if f := ne.Uint16(p[8:]); f != flagLeaf {
		return fmt.Errorf("bucket %q: inline page with type flags %#x", name, f)
	}
	n, err := elements(p)
	if err != nil {
		return fmt.Errorf("bucket %q: inline page: %v", name, err)
	}
	_, err = v.leaf(0, string(name), p, n, nil, nil, depth)
	return err
}

// entryTree is tree for the entries bucket in mode entriesDefer: branch
// pages are checked now, and leaves at the tree's leaf level (that of the
// first leaf read: bbolt's trees are balanced) only recorded, in key
// order, for entryLeaf later. A leaf above that level is checked at once.
func (v *verifier) entryTree(id uint64, minKey, maxKey, lb []byte, depth int) error {
	if depth > maxTreeDepth {
		return fmt.Errorf("page %d: tree deeper than %d", id, maxTreeDepth)
	}
	if depth == v.leafDepth {
		if id < 2 || id >= v.hwm {
			return fmt.Errorf("page %d: outside [2, %d)", id, v.hwm)
		}
		if v.seen[id/64]&(1<<(id%64)) != 0 {
			return fmt.Errorf("page %d: referenced twice", id)
		}
		v.seen[id/64] |= 1 << (id % 64) // its overflow when it is read
		v.leaves = append(v.leaves, leafRef{id: id, minKey: minKey, maxKey: maxKey, lb: lb})
		return nil
	}
	p, err := v.readPage(id)
	if err != nil {
		return err
	}
	if err := v.reach(id, p); err != nil {
		return err
	}
	n, err := elements(p)
	if err != nil {
		return fmt.Errorf("page %d: %v", id, err)
	}
	switch flags := ne.Uint16(p[8:]); flags {
	case flagBranch:
		keys, children, err := branch(id, p, n, minKey, maxKey)
		if err != nil {
			return err
		}
		// The recorded leaves keep keys, which alias p: this pass reads
		// with pread, a buffer per page, never reused.
		for i, child := range children {
			if i == 1 && v.prefetch != nil && v.leafDepth > depth+1 {
				// The first child showed the leaf level: the others are
				// branch pages, read next.
				v.prefetch(children[1:])
			}
			clb := lb
			if i > 0 {
				clb = keys[i]
			}
			if err := v.entryTree(child, keys[i], nextKey(keys, i, maxKey), clb, depth+1); err != nil {
				return err
			}
		}
		return nil
	case flagLeaf:
		if v.leafDepth < 0 {
			v.leafDepth = depth
		}
		if err := entryLeaf(id, p, minKey, maxKey); err != nil {
			return err
		}
		v.leaves = append(v.leaves, leafRef{id: id, minKey: minKey, maxKey: maxKey, lb: lb, done: true})
		return nil
	default:
		return fmt.Errorf("page %d: type flags %#x where a branch or leaf page belongs", id, flags)
	}
}

// entryLeaf checks leaf page p of the entries bucket, whose keys must lie
// in [minKey, maxKey): a leaf, its elements inside the page, keys in
// order, and no nested bucket (the entries bucket holds none).
func entryLeaf(id uint64, p []byte, minKey, maxKey []byte) error {
	if f := ne.Uint16(p[8:]); f != flagLeaf {
		return fmt.Errorf("page %d: type flags %#x where a leaf page of the entries belongs", id, f)
	}
	n, err := elements(p)
	if err != nil {
		return fmt.Errorf("page %d: %v", id, err)
	}
	running := minKey
	for i := 0; i < n; i++ {
		flags, key, _, _, err := elemKV(p, i, true)
		if err != nil {
			return fmt.Errorf("leaf page %d: %v", id, err)
		}
		if err := keyOrder(i, key, running, maxKey); err != nil {
			return fmt.Errorf("leaf page %d: %v", id, err)
		}
		if flags&flagBucketLeaf != 0 {
			return fmt.Errorf("leaf page %d: element %d is a nested bucket (the entries bucket holds none)", id, i)
		}
		running = key
	}
	return nil
}

// keyOrder is bbolt's verifyKeyOrder: the first key is at least prev, later
// ones strictly above it, all below maxKey.
func keyOrder(i int, key, prev, maxKey []byte) error {
	if prev != nil {
		c := compareKeys(prev, key)
		if (i == 0 && c > 0) || (i > 0 && c >= 0) {
			return fmt.Errorf("key %d (%x) out of order after %x", i, key, prev)
		}
	}
	if maxKey != nil && compareKeys(key, maxKey) >= 0 {
		return fmt.Errorf("key %d (%x) not below its parent's next key %x", i, key, maxKey)
	}
	return nil
}

// compareKeys is bytes.Compare, with a fast path for two 8-byte keys (the
// entries' offsets and the epochs, nearly every key of a store): compared
// as big-endian integers, which orders them as bytes do, without a call
// per key (about a tenth of the walk's CPU on a segment of entries).
func compareKeys(a, b []byte) int {
	if len(a) == 8 && len(b) == 8 {
		return cmp.Compare(binary.BigEndian.Uint64(a), binary.BigEndian.Uint64(b))
	}
	return bytes.Compare(a, b)
}

// freelist checks a stored free-list page.
func (v *verifier) freelist(id uint64) error {
	p, err := v.readPage(id)
	if err != nil {
		return fmt.Errorf("free list: %v", err)
	}
	if f := ne.Uint16(p[8:]); f != flagFreelist {
		return fmt.Errorf("free-list page %d: type flags %#x", id, f)
	}
	if err := v.reach(id, p); err != nil {
		return fmt.Errorf("free-list page %d: %v", id, err)
	}
	off, count := pageHeaderSize, uint64(ne.Uint16(p[10:]))
	if count == 0xFFFF {
		if len(p) < pageHeaderSize+8 {
			return fmt.Errorf("free-list page %d: count missing", id)
		}
		count, off = ne.Uint64(p[pageHeaderSize:]), pageHeaderSize+8
	}
	if count > uint64(len(p)-off)/8 {
		return fmt.Errorf("free-list page %d: %d ids do not fit in %d bytes", id, count, len(p))
	}
	for i := uint64(0); i < count; i++ {
		f := ne.Uint64(p[off+int(i)*8:])
		if f < 2 || f >= v.hwm {
			return fmt.Errorf("free-list page %d: free page %d outside [2, %d)", id, f, v.hwm)
		}
		if v.seen[f/64]&(1<<(f%64)) != 0 {
			return fmt.Errorf("free-list page %d: page %d is both free and in use (or listed twice)", id, f)
		}
		v.seen[f/64] |= 1 << (f % 64)
		v.free = append(v.free, f)
	}
	return nil
}
