package storage_test

import (
	"encoding/binary"
	"os"
	"testing"
)

// A reader of bbolt's page layout for the tests, independent of the
// store's verifier: it finds the pages of the entries bucket's tree (which
// pages a test damages, and which of them Open reads itself) and the free
// list. Native byte order (little-endian on the platforms the tests run).

var le = binary.LittleEndian

// entryPage is a page of the entries tree.
type entryPage struct {
	id          int
	leaf        bool
	depth       int
	first, last uint64 // the first and last key on the page (offsets)
	parents     []int  // the branch pages above it, root first
}

// boltLayout is what readLayout found in a bbolt file.
type boltLayout struct {
	pageSize int
	root     int         // the root bucket's page
	hwm      int         // the pages in use are below it
	entries  []entryPage // the entries tree, depth first (leaves in key order)
	freelist int
	free     []int
}

func readLayout(t *testing.T, path string) *boltLayout {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	meta := func(off int) (pageSize, root, freelist, hwm int, txid uint64) {
		m := b[off+16:]
		return int(le.Uint32(m[8:])), int(le.Uint64(m[16:])), int(le.Uint64(m[32:])), int(le.Uint64(m[40:])), le.Uint64(m[48:])
	}
	ps, root, fl, hwm, tx0 := meta(0)
	if _, root1, fl1, hwm1, tx1 := meta(ps); tx1 > tx0 {
		root, fl, hwm = root1, fl1, hwm1
	}
	l := &boltLayout{pageSize: ps, root: root, freelist: fl, hwm: hwm}
	page := func(id int) []byte { return b[id*ps : (id+1)*ps] }
	// The root bucket's page lists the buckets; find the entries tree.
	rp := page(root)
	if le.Uint16(rp[8:]) != 0x02 {
		t.Fatalf("root bucket page %d is not a leaf", root)
	}
	entriesRoot := 0
	for i := 0; i < int(le.Uint16(rp[10:])); i++ {
		e := rp[16+16*i:]
		pos, ks := int(le.Uint32(e[4:])), int(le.Uint32(e[8:]))
		if k := string(e[pos : pos+ks]); k == "entries" {
			entriesRoot = int(le.Uint64(e[pos+ks:]))
		}
	}
	if entriesRoot == 0 {
		t.Fatal("the entries bucket is inline: the file is too small for the test")
	}
	var walk func(id, depth int, parents []int)
	walk = func(id, depth int, parents []int) {
		p := page(id)
		n := int(le.Uint16(p[10:]))
		ep := entryPage{id: id, depth: depth, parents: parents, leaf: le.Uint16(p[8:]) == 0x02}
		key := func(i int) uint64 {
			e := p[16+16*i:]
			pos := int(le.Uint32(e[0:]))
			if ep.leaf {
				pos = int(le.Uint32(e[4:]))
			}
			return binary.BigEndian.Uint64(e[pos:])
		}
		if n > 0 {
			ep.first, ep.last = key(0), key(n-1)
		}
		l.entries = append(l.entries, ep)
		if ep.leaf {
			return
		}
		for i := 0; i < n; i++ {
			child := int(le.Uint64(p[16+16*i+8:]))
			walk(child, depth+1, append(append([]int(nil), parents...), id))
		}
	}
	walk(entriesRoot, 0, nil)
	if fl != -1 && fl > 1 {
		p := page(fl)
		n, off := int(le.Uint16(p[10:])), 16
		if n == 0xFFFF {
			n, off = int(le.Uint64(p[16:])), 24
		}
		for i := 0; i < n; i++ {
			l.free = append(l.free, int(le.Uint64(b[fl*ps+off+8*i:])))
		}
	}
	return l
}

// leaves returns the entries tree's leaves in key order.
func (l *boltLayout) leaves() []entryPage {
	var out []entryPage
	for _, p := range l.entries {
		if p.leaf {
			out = append(out, p)
		}
	}
	return out
}

// leafOf returns the leaf holding offset off.
func (l *boltLayout) leafOf(t *testing.T, off uint64) entryPage {
	t.Helper()
	for _, p := range l.leaves() {
		if p.first <= off && off <= p.last {
			return p
		}
	}
	t.Fatalf("no leaf holds offset %d", off)
	return entryPage{}
}

// openPages returns the pages of the entries tree that Open checks itself
// (docs/storage.md section 9): the paths to the first and the last entry
// and to the entry at lo, the live offset lowest in the file.
func (l *boltLayout) openPages(t *testing.T, lo uint64) map[int]bool {
	t.Helper()
	leaves := l.leaves()
	m := map[int]bool{}
	for _, p := range []entryPage{leaves[0], leaves[len(leaves)-1], l.leafOf(t, lo)} {
		m[p.id] = true
		for _, a := range p.parents {
			m[a] = true
		}
	}
	return m
}

// page returns the entries tree's page id (ok false if it is not one).
func (l *boltLayout) page(id int) (entryPage, bool) {
	for _, p := range l.entries {
		if p.id == id {
			return p, true
		}
	}
	return entryPage{}, false
}
