package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	bolt "go.etcd.io/bbolt"
)

// activeCheck is the verification of the active segment's file split in
// two (docs/storage.md section 9): OpenDir checks at once what can fault
// the process or what it reads itself, and the rest of the file is checked
// by a goroutine the store runs from Open until the walk ends or Close
// stops it. Until then nothing bbolt does on the store's behalf touches a
// page the walk has not passed:
//
//   - At Open (checkActiveOpen, then paths): both meta pages, the file's
//     size against their high-water mark (a page beyond the end of the
//     file would fault the mapping with SIGBUS), the free list's ids (in
//     range, distinct, none a page of the trees read), the root bucket's
//     tree and every bucket but the entries whole (log start, epochs,
//     voter-set rows, quorum state, HW checkpoint, identity, segment
//     table), and in the entries tree the pages on the paths to the first
//     and the last entry and to the log start, each branch page on them
//     whole. Open's own reads stay on those pages.
//   - Phase 1 (background, a few pages): every branch page of the entries
//     tree, so that every page reference in the file is known, and the
//     free list against them: a page both free and in use would be handed
//     out by bbolt to a write and overwritten. Writes wait for it.
//   - Phase 2 (background, the bulk): the entries tree's leaves, read in
//     large sequential chunks from the end of the file down. It lowers the
//     mark: reads of entries at or above it touch only checked pages (the
//     routing through branch pages, checked in phase 1, and the leaves from
//     the mark up, which include the newest ones); reads below it wait.
//     Truncations, which delete and rebalance through any leaf, wait for
//     the end.
//
// The walk checks the file as of Open: a read transaction (pin) held from
// Open to the walk's end keeps bbolt from reusing any page of that
// version. Damage found latches the store (every Apply returns it), and
// reads that would touch the damaged part get it; it wraps ErrCorrupt and
// names the file and the page.
type activeCheck struct {
	file *os.File // a read-only handle of our own
	size int64
	txid uint64    // the version checked at Open
	root uint64    // the entries tree's root page
	open *verifier // the Open pass's, for paths; nil after
	pin  *bolt.Tx  // read transaction at txid, rolled back by the walk
	seg  *segFile  // the file's segment (active, or sealed after a roll); the walk holds a reference
	v    *verifier // the background walk's
	stop atomic.Bool

	exited chan struct{} // closed when the walk's goroutine returns
	passed atomic.Bool   // ended without finding damage: the gates' fast path

	mu       sync.Mutex
	mark     uint64        // entries at offsets >= mark are on checked pages
	writable bool          // phase 1 passed: the free list is safe to allocate from
	done     bool          // the walk ended
	err      error         // when done: nil, the damage found, or ErrClosed
	wake     chan struct{} // closed at the next change of the above; nil if nobody waits
	finished chan struct{} // closed when done
}

var (
	// errStopped: the walk saw its stop flag (Close).
	errStopped = errors.New("verification stopped")
	// errFullWalk: a read Open makes would leave the pages the Open pass
	// checked (an empty leaf inside the entries tree, which bbolt's cursor
	// skips by reading its neighbour): the whole file is verified at once
	// instead.
	errFullWalk = errors.New("the whole file must be verified")
)

// verifyChunk is the size of phase 2's reads.
const verifyChunk = 1 << 20

// verifyHook, when set by a test, is called by the background walk at
// "start" (before phase 1) and "writable" (before phase 2), so a test can
// hold it there.
var verifyHook func(stage string)

// checkActiveOpen runs the Open part of the active file's verification on
// the file at path of size bytes. It returns nil and no error if it
// verified the whole file: when the entries bucket has no page of its own
// (a small store), or when the free list is not stored (a file of the
// layout before the active segment wrote it, or written with
// NoFreelistSync), since bbolt then rebuilds the free list at open by
// walking every page in a goroutine of its own, which only a complete walk
// first protects. Damage returns an error wrapping ErrCorrupt.
func checkActiveOpen(path string, size int64) (*activeCheck, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	v := &verifier{r: f, size: size, entries: entriesSkip}
	var m *boltMeta
	err = protect(func() error {
		if m, err = v.metas(); err != nil {
			return err
		}
		if m.freelist == noFreelist {
			return errFullWalk
		}
		if err := v.tree(m.root, nil, nil, 0, 0); err != nil {
			return fmt.Errorf("%w: %v", ErrCorrupt, err)
		}
		if err := v.freelist(m.freelist); err != nil {
			return fmt.Errorf("%w: %v", ErrCorrupt, err)
		}
		return nil
	})
	if errors.Is(err, errFullWalk) {
		err = verifyBoltFile(f, size)
		_ = f.Close()
		return nil, err
	}
	if err != nil || v.entriesRoot == 0 {
		_ = f.Close()
		return nil, err
	}
	return &activeCheck{
		file: f, size: size, txid: m.txid, root: v.entriesRoot, open: v,
		exited: make(chan struct{}), finished: make(chan struct{}),
	}, nil
}

// protect runs f with faults and panics turned into ErrCorrupt (f reads
// with pread, so neither is expected; this is defence in depth).
func protect(f func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: reading the file failed: %v", ErrCorrupt, r)
		}
	}()
	return f()
}

// paths checks the pages of the entries tree that opening the store reads
// (readActive: the first and the last entry, and the entry at lo, the log
// start within this segment) and sets the mark to what the last entry's
// path covers. errFullWalk if a read would leave them.
func (c *activeCheck) paths(lo uint64) error {
	v := c.open
	c.open = nil
	return protect(func() error {
		var lastLB []byte
		for _, t := range []struct {
			kind pathKind
			key  []byte
		}{{pathFirst, nil}, {pathLast, nil}, {pathSeek, u64key(lo)}} {
			lb, err := v.path(c.root, t.kind, t.key)
			if err != nil {
				if errors.Is(err, errFullWalk) {
					return err
				}
				return fmt.Errorf("%w: %v", ErrCorrupt, err)
			}
			if t.kind == pathLast {
				lastLB = lb
			}
		}
		c.mark = keyOffset(lastLB)
		return nil
	})
}

// keyOffset is the offset a routing bound lb stands for: nil is below
// every key; a key that is not an offset (damage, found by the walk)
// leaves nothing readable before the walk's end.
func keyOffset(lb []byte) uint64 {
	switch len(lb) {
	case 0:
		return 0
	case 8:
		return binary.BigEndian.Uint64(lb)
	}
	return ^uint64(0)
}

type pathKind int

const (
	pathFirst pathKind = iota // Cursor.First
	pathLast                  // Cursor.Last
	pathSeek                  // Bucket.Get (a seek that does not move on)
)

// path checks the pages bbolt's cursor reads from root for kind (bbolt's
// Cursor.search: at a branch page the last key at or below the key
// sought, the first or the last child): every branch page on the way
// whole, with the bounds its parents give, and the leaf. None may be a
// page the Open pass saw elsewhere (the free list, another bucket). It
// returns the lowest key bbolt routes to the leaf (nil: unbounded).
func (v *verifier) path(root uint64, kind pathKind, key []byte) (lb []byte, err error) {
	id := root
	var minKey, maxKey []byte
	for depth := 0; ; depth++ {
		if depth > maxTreeDepth {
			return nil, fmt.Errorf("page %d: tree deeper than %d", id, maxTreeDepth)
		}
		p, err := v.readPage(id)
		if err != nil {
			return nil, err
		}
		for i := id; i < id+uint64(len(p)/v.pageSize); i++ {
			if v.seen[i/64]&(1<<(i%64)) != 0 {
				return nil, fmt.Errorf("page %d: in the entries tree and also free or in another tree", i)
			}
		}
		n, err := elements(p)
		if err != nil {
			return nil, fmt.Errorf("page %d: %v", id, err)
		}
		switch flags := ne.Uint16(p[8:]); flags {
		case flagBranch:
			keys, children, err := branch(id, p, n, minKey, maxKey)
			if err != nil {
				return nil, err
			}
			i := 0
			switch kind {
			case pathLast:
				i = n - 1
			case pathSeek:
				i = sort.Search(n, func(j int) bool { return compareKeys(keys[j], key) >= 0 })
				if (i == n || compareKeys(keys[i], key) != 0) && i > 0 {
					i--
				}
			}
			if i > 0 {
				lb = keys[i]
			}
			id, minKey, maxKey = children[i], keys[i], nextKey(keys, i, maxKey)
		case flagLeaf:
			if err := entryLeaf(id, p, minKey, maxKey); err != nil {
				return nil, err
			}
			if n == 0 && depth > 0 && kind != pathSeek {
				// First and Last move on from an empty leaf to its
				// neighbours (a valid file has none: bbolt removes them).
				return nil, errFullWalk
			}
			return lb, nil
		default:
			return nil, fmt.Errorf("page %d: type flags %#x where a branch or leaf page belongs", id, flags)
		}
	}
}

// abort releases what checkActiveOpen and openSegment took, when the store
// is not opened after all (before bbolt's handle is closed: the pinned
// transaction would hold up its close).
func (c *activeCheck) abort() {
	if c.pin != nil {
		_ = c.pin.Rollback()
	}
	_ = c.file.Close()
}

// run is the walk's goroutine (started by openDirStore, which took a
// reference on seg for it).
func (c *activeCheck) run(d *DirStore) {
	defer close(c.exited)
	if verifyHook != nil {
		verifyHook("start")
	}
	err := protect(c.phase1)
	if err == nil {
		c.mu.Lock()
		c.writable = true
		c.broadcastLocked()
		c.mu.Unlock()
		if verifyHook != nil {
			verifyHook("writable")
		}
		err = protect(c.phase2)
	}
	if c.stop.Load() {
		err = ErrClosed
	}
	_ = c.pin.Rollback()
	_ = c.file.Close()
	d.cacheMu.Lock()
	path := c.seg.path // the sealed name, after a roll
	d.cacheMu.Unlock()
	d.release(c.seg)
	c.v = nil
	if err != nil && err != ErrClosed {
		err = fmt.Errorf("replog: segment %s (verified after Open): %w", path, err)
		d.log.Error("damaged data file found by the verification that follows Open: the store refuses writes, and reads of the damaged entries fail",
			"path", path, "error", err)
	}
	c.mu.Lock()
	c.done, c.err = true, err
	c.passed.Store(err == nil)
	c.broadcastLocked()
	close(c.finished)
	c.mu.Unlock()
}

// phase1 checks the file's trees but for the entries tree's leaves, which
// it records, and the free list against every page reference.
func (c *activeCheck) phase1() error {
	v := &verifier{r: c.file, size: c.size, entries: entriesDefer, stop: &c.stop}
	v.prefetch = func(ids []uint64) {
		for _, id := range ids {
			willNeed(c.file, int64(id)*int64(v.pageSize), int64(v.pageSize))
		}
	}
	c.v = v
	m, err := v.metas()
	if err != nil {
		return err
	}
	// Only the pages below the high-water mark are read: a roll trims the
	// file to its own (higher) mark under the walk.
	v.size = int64(m.hwm) * int64(v.pageSize)
	if m.txid != c.txid {
		// Not reached: nothing commits before this phase passes.
		return fmt.Errorf("%w: the file changed between Open and its verification (transaction %d, then %d)", ErrCorrupt, c.txid, m.txid)
	}
	if err := v.tree(m.root, nil, nil, 0, 0); err != nil {
		return fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if m.freelist == noFreelist {
		return fmt.Errorf("%w: the free list is no longer stored", ErrCorrupt) // not reached: checkActiveOpen walked it all
	}
	if err := v.freelist(m.freelist); err != nil {
		return fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	// A free page just above a recorded leaf may be one of its overflow
	// pages, which only the leaf's header tells.
	var ids []uint64
	for _, l := range v.leaves {
		if !l.done {
			ids = append(ids, l.id)
		}
	}
	slices.Sort(ids)
	below := make([]uint64, 0, len(v.free))
	for _, f := range v.free {
		if i := sort.Search(len(ids), func(i int) bool { return ids[i] > f }) - 1; i >= 0 {
			below = append(below, ids[i])
		}
	}
	v.prefetch(below)
	for _, f := range v.free {
		i := sort.Search(len(ids), func(i int) bool { return ids[i] > f }) - 1
		if i < 0 {
			continue
		}
		h, err := v.bytesAt(int64(ids[i])*int64(v.pageSize), pageHeaderSize)
		if err != nil {
			return fmt.Errorf("%w: page %d: %v", ErrCorrupt, ids[i], err)
		}
		if ovf := uint64(ne.Uint32(h[12:])); ids[i]+ovf >= f {
			return fmt.Errorf("%w: free-list page %d: page %d is both free and in use (overflow of page %d)", ErrCorrupt, m.freelist, f, ids[i])
		}
	}
	return nil
}

// phase2 checks the recorded leaves, from the highest page down (in
// chunks), lowering the mark over the leaves checked from the last one
// down in key order.
func (c *activeCheck) phase2() error {
	v := c.v
	v.chunk = make([]byte, 0, verifyChunk)
	leaves := v.leaves
	checked := make([]bool, len(leaves))
	var order []int
	for i, l := range leaves {
		if l.done {
			checked[i] = true
		} else {
			order = append(order, i)
		}
	}
	slices.SortFunc(order, func(a, b int) int {
		switch {
		case leaves[a].id > leaves[b].id:
			return -1
		case leaves[a].id < leaves[b].id:
			return 1
		}
		return 0
	})
	low := len(leaves) // leaves[low:] are checked
	lower := func() {
		for low > 0 && checked[low-1] {
			low--
		}
		if low == len(leaves) {
			return
		}
		m := uint64(0)
		if low > 0 {
			m = keyOffset(leaves[low].lb)
		}
		c.mu.Lock()
		if m < c.mark {
			c.mark = m
			c.broadcastLocked()
		}
		c.mu.Unlock()
	}
	for n, i := range order {
		l := &leaves[i]
		p, err := v.readPage(l.id)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrCorrupt, err)
		}
		if len(p) > v.pageSize {
			if err := v.reach(l.id+1, p[v.pageSize:]); err != nil {
				return fmt.Errorf("%w: %v", ErrCorrupt, err)
			}
		}
		if err := entryLeaf(l.id, p, l.minKey, l.maxKey); err != nil {
			lower() // the leaves checked above the damage stay readable
			return fmt.Errorf("%w: %v", ErrCorrupt, err)
		}
		checked[i] = true
		if n%64 == 63 {
			lower()
		}
	}
	lower()
	return nil
}

// broadcastLocked wakes the waiters (c.mu held).
func (c *activeCheck) broadcastLocked() {
	if c.wake != nil {
		close(c.wake)
		c.wake = nil
	}
}

// waitLocked waits for the next change (c.mu held, and held again on
// return).
func (c *activeCheck) waitLocked() {
	if c.wake == nil {
		c.wake = make(chan struct{})
	}
	w := c.wake
	c.mu.Unlock()
	<-w
	c.mu.Lock()
}

// awaitRead waits until a read of the entries from offset off touches
// only checked pages, and returns nil, or the damage found (or ErrClosed)
// if the walk ended without reaching off.
func (c *activeCheck) awaitRead(off uint64) error {
	if c.passed.Load() {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		switch {
		case off >= c.mark || (c.done && c.err == nil):
			return nil
		case c.done:
			return c.err
		}
		c.waitLocked()
	}
}

// awaitWrite waits until a write transaction may run: the free list
// checked (phase 1), or, for one that may touch any leaf (whole: a
// truncation), the whole walk. It returns the damage found, or ErrClosed.
func (c *activeCheck) awaitWrite(whole bool) error {
	if c.passed.Load() {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		switch {
		case c.done:
			return c.err
		case c.writable && !whole:
			return nil
		}
		c.waitLocked()
	}
}

// verifyFile is verifyBoltFile of the file at path.
func verifyFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	return verifyBoltFile(f, fi.Size())
}
