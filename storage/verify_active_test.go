package storage_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/replog-io/replog/internal/storagetest"
	"github.com/replog-io/replog/storage"
)

// Tests of the verification that OpenDir leaves to the background
// (docs/storage.md section 9): Open checks the pages it needs, a
// goroutine walks the rest of the active file, and until it has passed a
// page nothing touches it: appends wait for the free list's check,
// truncations for the whole walk, reads below the walk's mark for the
// mark; damage it finds latches the store and fails the reads of it.

// fillActive writes n entries of 100 bytes (epoch 1) into a new directory
// in batches of 100, all in the active file unless segmentBytes is small.
func fillActive(t *testing.T, dir string, n int, segmentBytes int64) {
	t.Helper()
	s, _, err := storage.OpenDir(dir, idN1, storage.DirOptions{NoSync: true, SegmentBytes: segmentBytes})
	if err != nil {
		t.Fatal(err)
	}
	for off := 0; off < n; off += 100 {
		if err := s.Append(storagetest.Batch(uint64(off), min(100, n-off), 1, 100)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// holdVerify installs a verify hook that reports each stage on the
// returned channel and, at the stages in hold, waits until the test
// closes that stage's channel. It is removed at the end of the test.
func holdVerify(t *testing.T, hold map[string]chan struct{}) <-chan string {
	t.Helper()
	reached := make(chan string, 8)
	storage.SetVerifyHook(func(stage string) {
		reached <- stage
		if c, ok := hold[stage]; ok {
			<-c
		}
	})
	t.Cleanup(func() { storage.SetVerifyHook(nil) })
	return reached
}

func waitStage(t *testing.T, reached <-chan string, want string) {
	t.Helper()
	select {
	case got := <-reached:
		if got != want {
			t.Fatalf("the verification reached %q, want %q", got, want)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the verification did not reach %q", want)
	}
}

// await returns the result of a call that must end (bounded only to turn
// a hang into a failure).
func await(t *testing.T, what string, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not return", what)
		return nil
	}
}

// Open returns before the walk of the active file; the newest entries
// read at once; an append waits for the walk's first phase (the free
// list), not for the rest; a read of old entries waits for the walk to
// pass them, a truncation for its end; then everything reads and the
// truncation applies.
func TestDirVerifiedAfterOpenGates(t *testing.T) {
	dir := t.TempDir()
	const n = 6000
	fillActive(t, dir, n, 0)
	start, writable := make(chan struct{}), make(chan struct{})
	reached := holdVerify(t, map[string]chan struct{}{"start": start, "writable": writable})
	s, _, err := storage.OpenDir(dir, idN1, storage.DirOptions{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	waitStage(t, reached, "start") // Open returned with the walk not begun

	es, err := s.Entries(n-1, 1, 1<<20)
	if err != nil || len(es) != 1 || !bytes.Equal(es[0].Data, storagetest.Payload(n-1, 1, 100)) {
		t.Fatalf("the last entry while the walk waits: %v, %v", es, err)
	}

	var released atomic.Bool // set just before the walk is let go on
	appended := make(chan error, 1)
	go func() {
		err := s.Append(storagetest.Batch(n, 1, 1, 100))
		if err == nil && !released.Load() {
			err = errors.New("the append committed before the free list was checked")
		}
		appended <- err
	}()
	time.Sleep(50 * time.Millisecond) // let the append reach its wait (it fails the test if it does not wait)
	released.Store(true)
	close(start)
	if err := await(t, "the append", appended); err != nil {
		t.Fatal(err)
	}
	waitStage(t, reached, "writable")

	// Phase 2 held: appends go on, old reads and truncations wait.
	if err := s.Append(storagetest.Batch(n+1, 1, 1, 100)); err != nil {
		t.Fatalf("an append while the leaves are unchecked: %v", err)
	}
	var leavesDone atomic.Bool
	read, truncated := make(chan error, 1), make(chan error, 1)
	go func() {
		es, err := s.Entries(0, 1, 1<<20)
		switch {
		case err != nil:
		case !leavesDone.Load():
			err = errors.New("offset 0 was read before the walk passed its page")
		case len(es) != 1 || !bytes.Equal(es[0].Data, storagetest.Payload(0, 1, 100)):
			err = fmt.Errorf("offset 0 read as %v", es)
		}
		read <- err
	}()
	go func() {
		err := s.TruncateSuffix(n / 2)
		if err == nil && !leavesDone.Load() {
			err = errors.New("the truncation ran before the walk's end")
		}
		truncated <- err
	}()
	time.Sleep(50 * time.Millisecond)
	leavesDone.Store(true)
	close(writable)
	if err := await(t, "the read of offset 0", read); err != nil {
		t.Fatal(err)
	}
	if err := await(t, "the truncation", truncated); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitVerified(context.Background()); err != nil {
		t.Fatalf("WaitVerified: %v", err)
	}
	if s.LEO() != n/2 {
		t.Fatalf("LEO %d after the truncation, want %d", s.LEO(), n/2)
	}
	es, err = s.Entries(0, 0, 1<<30)
	if err != nil || len(es) != n/2 {
		t.Fatalf("read %d entries, %v; want %d", len(es), err, n/2)
	}
}

// Close during the walk stops it: a read waiting for it returns
// ErrClosed, WaitVerified too, and no goroutine is left.
func TestDirCloseStopsVerification(t *testing.T) {
	dir := t.TempDir()
	fillActive(t, dir, 6000, 0)
	writable := make(chan struct{})
	reached := holdVerify(t, map[string]chan struct{}{"writable": writable})
	s, _, err := storage.OpenDir(dir, idN1, storage.DirOptions{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	waitStage(t, reached, "start")
	waitStage(t, reached, "writable")
	read, closed := make(chan error, 1), make(chan error, 1)
	go func() {
		_, err := s.Entries(0, 1, 1<<20)
		read <- err
	}()
	time.Sleep(20 * time.Millisecond)
	go func() { closed <- s.Close() }()
	time.Sleep(20 * time.Millisecond)
	close(writable) // the walk goes on, sees Close at its next page and stops
	if err := await(t, "Close", closed); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := await(t, "the waiting read", read); !errors.Is(err, storage.ErrClosed) {
		t.Fatalf("the waiting read returned %v, want ErrClosed", err)
	}
	if err := s.WaitVerified(context.Background()); !errors.Is(err, storage.ErrClosed) {
		t.Fatalf("WaitVerified after Close: %v, want ErrClosed", err)
	}
	goleak.VerifyNone(t)
}

// A free list that names a page in use (here a leaf of the entries, which
// Open does not read) is not caught at Open; the walk's first phase finds
// it, and the append that was waiting for it is refused: bbolt never got
// to hand that page out and overwrite it, and the file is as it was.
func TestDirFreeListNamingALiveLeaf(t *testing.T) {
	dir := t.TempDir()
	fillActive(t, dir, 6000, 0)
	path := filepath.Join(dir, storage.DataFileName)
	l := readLayout(t, path)
	if len(l.free) == 0 {
		t.Fatal("the file has no free page: the case is not exercised")
	}
	open := l.openPages(t, 0)
	victim := 0
	for _, p := range l.leaves() {
		if !open[p.id] && p.id > 2 {
			victim = p.id
			break
		}
	}
	// The free list's last id becomes the leaf's (kept sorted, as bbolt
	// writes it, if the leaf is above the others).
	fl := l.freelist * l.pageSize
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	off := fl + 16
	if le.Uint16(b[fl+10:]) == 0xFFFF {
		off += 8
	}
	le.PutUint64(b[off+8*(len(l.free)-1):], uint64(victim))
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}

	start := make(chan struct{})
	reached := holdVerify(t, map[string]chan struct{}{"start": start})
	s, _, err := storage.OpenDir(dir, idN1, storage.DirOptions{NoSync: true})
	if err != nil {
		t.Fatalf("Open: %v (want it to leave the leaf to the background)", err)
	}
	defer s.Close()
	waitStage(t, reached, "start")
	appended := make(chan error, 1)
	go func() { appended <- s.Append(storagetest.Batch(6000, 50, 1, 100)) }()
	time.Sleep(50 * time.Millisecond)
	close(start)
	err = await(t, "the append", appended)
	if !errors.Is(err, storage.ErrCorrupt) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "both free and in use") {
		t.Fatalf("append: %v; want ErrCorrupt naming %s and the page both free and in use", err, path)
	}
	if err := s.WaitVerified(context.Background()); !errors.Is(err, storage.ErrCorrupt) {
		t.Fatalf("WaitVerified: %v", err)
	}
	if err := s.Append(storagetest.Batch(6000, 1, 1, 100)); !errors.Is(err, storage.ErrCorrupt) {
		t.Fatalf("a later append: %v, want the latched ErrCorrupt", err)
	}
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(after, b) {
		t.Fatal("the damaged file was written to")
	}
}

// A roll while the walk is under way makes the walked file a sealed
// segment; the walk finishes on it, and reads of it wait for it as before.
// Damage it then finds names the sealed file, and latches the store.
func TestDirVerificationThroughARoll(t *testing.T) {
	for _, damaged := range []bool{false, true} {
		t.Run(fmt.Sprintf("damaged=%t", damaged), func(t *testing.T) {
			dir := t.TempDir()
			const n = 6000
			fillActive(t, dir, n, 8<<20)
			path := filepath.Join(dir, storage.DataFileName)
			var victim entryPage
			if damaged {
				l := readLayout(t, path)
				open := l.openPages(t, 0)
				for _, p := range l.leaves() {
					if !open[p.id] {
						victim = p
						break
					}
				}
				tp := &damageTemplate{pageSize: l.pageSize}
				overwritePage(tp, victim.id, 7)(t, dir)
			}
			writable := make(chan struct{})
			reached := holdVerify(t, map[string]chan struct{}{"writable": writable})
			s, _, err := storage.OpenDir(dir, idN1, storage.DirOptions{NoSync: true, SegmentBytes: 64 << 10})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			waitStage(t, reached, "start")
			waitStage(t, reached, "writable")
			for off := uint64(n); off < n+300; off += 100 {
				if err := s.Append(storagetest.Batch(off, 100, 1, 100)); err != nil {
					t.Fatal(err)
				}
			}
			sealed := filepath.Join(dir, storage.SegmentFileName(0))
			if st := s.Stats(); st.Rolls == 0 || len(segFiles(t, dir)) == 0 {
				t.Fatalf("no roll (%+v)", st)
			}
			close(writable)
			err = s.WaitVerified(context.Background())
			if !damaged {
				if err != nil {
					t.Fatalf("WaitVerified: %v", err)
				}
				es, err := s.Entries(0, 0, 1<<30)
				if err != nil || len(es) != n+300 {
					t.Fatalf("read %d entries, %v", len(es), err)
				}
				for _, e := range es {
					if !bytes.Equal(e.Data, storagetest.Payload(e.Offset, 1, 100)) {
						t.Fatalf("entry %d reads back wrong", e.Offset)
					}
				}
				return
			}
			if !errors.Is(err, storage.ErrCorrupt) || !strings.Contains(err.Error(), sealed) || !strings.Contains(err.Error(), fmt.Sprintf("page %d", victim.id)) {
				t.Fatalf("WaitVerified: %v; want ErrCorrupt naming %s and page %d", err, sealed, victim.id)
			}
			if _, err := s.Entries(victim.first, 1, 1<<20); !errors.Is(err, storage.ErrCorrupt) || !strings.Contains(err.Error(), sealed) {
				t.Fatalf("read of offset %d in the damaged leaf: %v; want ErrCorrupt naming %s", victim.first, err, sealed)
			}
			if err := s.Append(storagetest.Batch(n+300, 1, 1, 100)); !errors.Is(err, storage.ErrCorrupt) || !strings.Contains(err.Error(), sealed) {
				t.Fatalf("append after the damage was found: %v; want ErrCorrupt naming %s", err, sealed)
			}
			es, err := s.Entries(n, 0, 1<<30)
			if err != nil || len(es) != 300 {
				t.Fatalf("the entries after the roll: %d, %v", len(es), err)
			}
		})
	}
}

// Damage in pages Open does not read, in a child process: Open succeeds;
// the walk finds the damage and names the file and the page; appends are
// refused; a read of the damaged entries fails with ErrCorrupt naming the
// file and the offset, while the newest entries still read; no panic, no
// fault, no byte of the file changed. A middle branch page (three levels
// of pages: its whole subtree is unreadable) and a middle leaf (two kinds
// of damage).
func TestDirDamageFoundAfterOpen(t *testing.T) {
	dir := t.TempDir()
	const n = 16000
	fillActive(t, dir, n, 0)
	path := filepath.Join(dir, storage.DataFileName)
	l := readLayout(t, path)
	open := l.openPages(t, 0)
	var branch, leaf entryPage
	for _, p := range l.entries {
		switch {
		case open[p.id] || p.depth == 0:
		case !p.leaf && branch.id == 0:
			branch = p
		case p.leaf && leaf.id == 0 && (branch.id == 0 || p.parents[len(p.parents)-1] != branch.id):
			leaf = p
		}
	}
	if branch.id == 0 || leaf.id == 0 {
		t.Fatalf("no branch or leaf page off Open's paths (%d pages): the cases are not exercised", len(l.entries))
	}
	// The branch's range: from its first key to the first key after it.
	cases := []struct {
		name   string
		page   entryPage
		damage func(t *testing.T, dir string)
		says   string
	}{
		{"branch page garbage", branch, overwritePage(&damageTemplate{pageSize: l.pageSize}, branch.id, 3), fmt.Sprintf("page %d", branch.id)},
		{"leaf page garbage", leaf, overwritePage(&damageTemplate{pageSize: l.pageSize}, leaf.id, 3), fmt.Sprintf("page %d", leaf.id)},
		{"leaf keys out of order", leaf, func(t *testing.T, dir string) {
			// The second element's key becomes the first's.
			p := leaf.id * l.pageSize
			b, err := os.ReadFile(filepath.Join(dir, storage.DataFileName))
			if err != nil {
				t.Fatal(err)
			}
			e1 := b[p+16+16:]
			k := make([]byte, 8)
			binary.BigEndian.PutUint64(k, leaf.first)
			writeAt(t, filepath.Join(dir, storage.DataFileName), k, int64(p+16+16+int(le.Uint32(e1[4:]))))
		}, fmt.Sprintf("leaf page %d", leaf.id)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := t.TempDir()
			copyDir(t, dir, d)
			c.damage(t, d)
			before := snapshot(t, d)
			at := c.page.first + 1
			t.Setenv(envDamageReadAt, fmt.Sprint(at))
			res := runDamageChild(t, d, idN1)
			file := filepath.Join(d, storage.DataFileName)
			if res.Err != "" {
				t.Fatalf("Open: %s (want it to leave page %d to the background)", res.Err, c.page.id)
			}
			if !res.VerifyCorrupt || !strings.Contains(res.VerifyErr, file) || !strings.Contains(res.VerifyErr, c.says) {
				t.Fatalf("WaitVerified: %q; want ErrCorrupt naming %s and saying %q", res.VerifyErr, file, c.says)
			}
			if !res.ApplyCorrupt || !strings.Contains(res.ApplyErr, file) {
				t.Fatalf("append: %q; want ErrCorrupt naming %s", res.ApplyErr, file)
			}
			if !res.AtCorrupt || !strings.Contains(res.AtErr, file) || !strings.Contains(res.AtErr, fmt.Sprintf("offset %d", at)) {
				t.Fatalf("read of offset %d: %q; want ErrCorrupt naming %s and the offset", at, res.AtErr, file)
			}
			if !res.TailOK {
				t.Fatal("the last entry does not read back")
			}
			sameSnapshot(t, before, snapshot(t, d))
			t.Logf("%s", res.VerifyErr)
		})
	}
}

// A file whose free list is not stored (written with NoFreelistSync, as
// the active file was before it wrote it, or by another tool) is verified
// whole at Open: bbolt's own open walks every page of it in a goroutine
// of its own, where a damaged page would kill the process. In a child.
func TestDirUnsyncedFreeListVerifiedAtOpen(t *testing.T) {
	dir := t.TempDir()
	func() {
		defer storage.SetActiveNoFreelistSync(storage.SetActiveNoFreelistSync(true))
		fillActive(t, dir, 6000, 0)
	}()
	path := filepath.Join(dir, storage.DataFileName)
	l := readLayout(t, path)
	if l.freelist != -1 {
		t.Fatalf("free-list page %d: the file stores its free list, the case is not exercised", l.freelist)
	}
	open := l.openPages(t, 0)
	victim := 0
	for _, p := range l.leaves() {
		if !open[p.id] {
			victim = p.id
			break
		}
	}
	overwritePage(&damageTemplate{pageSize: l.pageSize}, victim, 5)(t, dir)
	res := runDamageChild(t, dir, idN1)
	if !res.Corrupt || !strings.Contains(res.Err, path) || !strings.Contains(res.Err, fmt.Sprintf("page %d", victim)) {
		t.Fatalf("Open: %q; want ErrCorrupt naming %s and page %d", res.Err, path, victim)
	}
}

// Random damage to the active file, in this process (a panic or a fault
// anywhere fails the whole run): Open fails with ErrCorrupt, or it opens
// and then the verification, reads of all entries and of the last one,
// and an append each succeed or fail with ErrCorrupt. Damage found after
// Open is counted, to show the background path is exercised.
func TestDirRandomDamageAfterOpen(t *testing.T) {
	base := t.TempDir()
	fillActive(t, base, 3000, 0)
	func() {
		s, _, err := storage.OpenDir(base, idN1, storage.DirOptions{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if err := s.DeletePrefix(500); err != nil {
			t.Fatal(err)
		}
	}()
	path := filepath.Join(base, storage.DataFileName)
	tmpl, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	l := readLayout(t, path)
	inUse := l.hwm * l.pageSize // damage there: bbolt grows the file ahead of its pages
	rng := rand.New(rand.NewPCG(15, 4))
	corrupt := func(what string, err error) {
		t.Helper()
		if err != nil && !errors.Is(err, storage.ErrCorrupt) {
			t.Fatalf("%s: %v, not ErrCorrupt", what, err)
		}
	}
	var atOpen, after int
	for i := 0; i < 150; i++ {
		dir := t.TempDir()
		copyDir(t, base, dir)
		data := bytes.Clone(tmpl)
		switch i % 3 {
		case 0: // one byte
			data[rng.IntN(inUse)] ^= byte(1 + rng.IntN(255))
		case 1: // a run of garbage
			off := rng.IntN(inUse)
			for j := off; j < min(len(data), off+1+rng.IntN(64)); j++ {
				data[j] = byte(rng.Uint32())
			}
		case 2: // a whole page
			p := rng.IntN(l.hwm)
			for j := p * l.pageSize; j < (p+1)*l.pageSize; j++ {
				data[j] = byte(rng.Uint32())
			}
		}
		if err := os.WriteFile(filepath.Join(dir, storage.DataFileName), data, 0o600); err != nil {
			t.Fatal(err)
		}
		s, _, err := storage.OpenDir(dir, idN1, storage.DirOptions{NoSync: true})
		if err != nil {
			if !errors.Is(err, storage.ErrCorrupt) && !errors.Is(err, storage.ErrIdentityMismatch) {
				t.Fatalf("case %d: Open: %v", i, err)
			}
			atOpen++
			continue
		}
		verr := s.WaitVerified(context.Background())
		corrupt("WaitVerified", verr)
		if verr != nil {
			after++
		}
		_, err = s.Entries(s.LogStart(), 0, 1<<30)
		corrupt("reading the log", err)
		if s.LEO() > s.LogStart() {
			_, err = s.Entries(s.LEO()-1, 1, 1<<20)
			corrupt("reading the last entry", err)
		}
		err = s.Append(storagetest.Batch(s.LEO(), 1, max(s.LastEpoch(), 1), 100))
		corrupt("append", err)
		if verr != nil && err == nil {
			t.Fatalf("case %d: an append went through after the verification failed: %v", i, verr)
		}
		if err := s.Close(); err != nil {
			t.Fatalf("case %d: Close: %v", i, err)
		}
	}
	if after == 0 || atOpen == 0 {
		t.Fatalf("damage found at Open %d times, after it %d times: both paths should be exercised", atOpen, after)
	}
	t.Logf("of 150 damaged files: %d refused at Open, %d found damaged after it", atOpen, after)
}
