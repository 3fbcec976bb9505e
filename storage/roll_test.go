package storage_test

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/replog-io/replog/internal/storagetest"
	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/storage"
)

// Rolls and deletions off the append path (docs/storage.md section 4, "Off
// the append path"): the store's goroutine prepares the next active file
// before the roll needs it, and unlinks a deletion's files after its Apply.

// preparedFiles records the next active files the store's goroutine
// prepares (the "prepared" stage of the roll hook), each held open so that
// its inode is not reused by a file made after it was removed.
type preparedFiles struct {
	mu    sync.Mutex
	files []os.FileInfo
}

func watchPrepared(t *testing.T, dir string) *preparedFiles {
	p := &preparedFiles{}
	var held []*os.File
	storage.SetRollHook(func(stage string) {
		if stage != "prepared" {
			return
		}
		f, err := os.Open(filepath.Join(dir, storage.DataFileName+".next"))
		if err != nil {
			panic(err) // the hook runs on the store's goroutine
		}
		fi, err := f.Stat()
		if err != nil {
			panic(err)
		}
		p.mu.Lock()
		p.files, held = append(p.files, fi), append(held, f)
		p.mu.Unlock()
	})
	t.Cleanup(func() {
		storage.SetRollHook(nil)
		for _, f := range held {
			f.Close()
		}
	})
	return p
}

func (p *preparedFiles) last() (os.FileInfo, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.files) == 0 {
		return nil, 0
	}
	return p.files[len(p.files)-1], len(p.files)
}

// A roll puts in place the file the store's goroutine prepared once the
// active file was half full (the same inode becomes replog.db), not one it
// makes itself; the log is the same as if it had.
func TestDirRollUsesPreparedFile(t *testing.T) {
	const seg = 64 << 10
	dir := t.TempDir()
	prepared := watchPrepared(t, dir)
	l := &segLog{t: t, s: openSeg(t, dir, seg), model: storage.NewMemory()}
	t.Cleanup(func() { l.s.Close() })
	for e := uint64(1); l.s.Stats().Rolls < 3; e++ {
		rolls := l.s.Stats().Rolls
		l.appendN(1, 20, 1+e/10)
		l.s.Settle() // a preparation asked for is done before the next Apply
		if l.s.Stats().Rolls == rolls {
			continue
		}
		want, n := prepared.last()
		if n == 0 {
			t.Fatalf("roll %d: no next active file was prepared", rolls+1)
		}
		got, err := os.Stat(filepath.Join(dir, storage.DataFileName))
		if err != nil {
			t.Fatal(err)
		}
		if !os.SameFile(got, want) {
			t.Fatalf("roll %d: the new active file is not the one prepared (%d prepared)", rolls+1, n)
		}
	}
	l.check("after three rolls")
	l.reopen(seg)
	l.check("after reopen")
}

// An Apply that would roll but holds an invalid write applies nothing and
// does not roll: the prepared file stays, unused, and the next Apply's
// roll takes it.
func TestDirRefusedRollingApplyKeepsPreparedFile(t *testing.T) {
	const seg = 64 << 10
	dir := t.TempDir()
	prepared := watchPrepared(t, dir)
	l := &segLog{t: t, s: openSeg(t, dir, seg), model: storage.NewMemory()}
	t.Cleanup(func() { l.s.Close() })
	refused := 0
	for l.s.Stats().Rolls < 2 {
		rolls, leo := l.s.Stats().Rolls, l.s.LEO()
		bad := []protocol.Write{
			{Kind: protocol.WriteAppend, Entries: storagetest.Batch(leo, 20, 1, 100)},
			{Kind: protocol.WriteAppend, Entries: storagetest.Batch(leo+1000, 1, 1, 100)}, // leaves a gap
		}
		if err := l.s.Apply(bad); !errors.Is(err, storage.ErrInvalidAppend) {
			t.Fatalf("Apply with a gap: %v, want ErrInvalidAppend", err)
		}
		refused++
		if l.s.Stats().Rolls != rolls || l.s.LEO() != leo {
			t.Fatalf("the refused Apply rolled or appended: %+v, LEO %d (was %d)", l.s.Stats(), l.s.LEO(), leo)
		}
		l.appendN(1, 20, 1)
		l.s.Settle()
		if l.s.Stats().Rolls == rolls {
			continue
		}
		// The refused Apply just before found the active file full too,
		// and began this roll in the prepared file.
		want, n := prepared.last()
		got, err := os.Stat(filepath.Join(dir, storage.DataFileName))
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 || !os.SameFile(got, want) {
			t.Fatalf("roll %d after a refused one: the new active file is not the one prepared (%d prepared)", rolls+1, n)
		}
	}
	l.check("after refused rolls")
	l.reopen(seg)
	l.check("after reopen")
	t.Logf("%d refused Applies", refused)
}

// A prefix deletion's Apply returns before its files are unlinked: the
// store's goroutine unlinks them (here held before it does); the entries
// below the log start are unreadable at once all the same, and the files
// go once it goes on.
func TestDirDeletionDoesNotWaitForUnlinks(t *testing.T) {
	l := newSegLog(t, tinySegment)
	l.appendN(30, 20, 1)
	bases := segmentBases(t, l.s.Dir())
	if len(bases) < 5 {
		t.Fatalf("only %d sealed segments", len(bases))
	}
	release := make(chan struct{})
	var once sync.Once
	unhold := func() { once.Do(func() { close(release) }) }
	l.s.Settle() // the store's goroutine reads the hook
	storage.SetRollHook(func(stage string) {
		if stage == "dropped" {
			<-release
		}
	})
	defer func() {
		unhold()
		l.s.Settle()
		storage.SetRollHook(nil)
	}()
	before := l.s.Stats().SegmentsDeleted
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.s.Apply([]protocol.Write{{Kind: protocol.WriteDeletePrefix, Offset: bases[3]}})
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		unhold()
		t.Fatal("the deletion's Apply waited for its files' unlinking")
	}
	if err := l.model.Apply([]protocol.Write{{Kind: protocol.WriteDeletePrefix, Offset: bases[3]}}); err != nil {
		t.Fatal(err)
	}
	if l.s.LogStart() != bases[3] {
		t.Fatalf("log start %d after DeletePrefix(%d)", l.s.LogStart(), bases[3])
	}
	for _, b := range bases[:3] {
		if _, err := os.Stat(filepath.Join(l.s.Dir(), storage.SegmentFileName(b))); err != nil {
			t.Fatalf("segment %d's file, whose unlink is held: %v", b, err)
		}
	}
	if _, err := l.s.Entries(bases[1], 10, 1000); !errors.Is(err, storage.ErrOutOfRange) {
		t.Fatalf("Entries(%d) below the log start: %v; want ErrOutOfRange", bases[1], err)
	}
	unhold()
	l.s.Settle()
	if got := segmentBases(t, l.s.Dir()); len(got) != len(bases)-3 || got[0] != bases[3] {
		t.Fatalf("sealed segments %v after the unlinks; had %v", got, bases)
	}
	if n := l.s.Stats().SegmentsDeleted - before; n != 3 {
		t.Fatalf("%d segments deleted, want 3", n)
	}
	l.check("after the deletion")
}

// A deleted segment's file that a reader has open (mapped) is unlinked
// but not shrunk: the reader, let go after the file is gone, gets the
// entries it asked for (their bytes are still mapped) or ErrOutOfRange,
// never a fault on a page cut off under it.
func TestDirDeletionKeepsMappedFileWhole(t *testing.T) {
	l, bases, target, entered, release := holdSealedReader(t, storage.SetSealedReadHook)
	type result struct {
		es  []protocol.Entry
		err error
	}
	read := make(chan result, 1)
	go func() {
		es, err := l.s.Entries(bases[1], int(bases[2]-bases[1]), 1<<20)
		read <- result{es, err}
	}()
	<-entered
	l.apply(protocol.Write{Kind: protocol.WriteDeletePrefix, Offset: bases[3]})
	l.s.Settle()
	if _, err := os.Stat(target); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the deleted segment's file: %v", err)
	}
	close(release)
	r := <-read
	if r.err != nil && !errors.Is(r.err, storage.ErrOutOfRange) {
		t.Fatalf("reader of a deleted segment it had open: %v; want its entries or ErrOutOfRange", r.err)
	}
	if r.err == nil {
		want := storagetest.Batch(bases[1], int(bases[2]-bases[1]), 1, 100)
		if len(r.es) != len(want) {
			t.Fatalf("reader of a deleted segment it had open: %d entries, want %d", len(r.es), len(want))
		}
		for i := range want {
			if r.es[i].Offset != want[i].Offset || string(r.es[i].Data) != string(want[i].Data) {
				t.Fatalf("entry %d: offset %d, %q; want %d, %q", i, r.es[i].Offset, r.es[i].Data, want[i].Offset, want[i].Data)
			}
		}
		t.Logf("the reader got its %d entries", len(r.es))
	}
	l.check("after the deletion")
}

// Close unlinks the files of a deletion still queued, and removes the
// prepared next active file: the directory holds the log's files only.
func TestDirCloseFinishesBackgroundWork(t *testing.T) {
	dir := t.TempDir()
	s := openSeg(t, dir, 64<<10)
	defer s.Close()
	next := filepath.Join(dir, storage.DataFileName+".next")
	for {
		if err := s.Append(storagetest.Batch(s.LEO(), 20, 1, 100)); err != nil {
			t.Fatal(err)
		}
		s.Settle()
		if _, err := os.Stat(next); s.Stats().Rolls >= 5 && err == nil {
			break // a next active file is prepared, not yet used
		}
	}
	segs := s.Segments()
	if err := s.DeletePrefix(segs[2].End); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(next); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the prepared next active file after Close: %v", err)
	}
	if got := segmentBases(t, dir); len(got) != len(segs)-4 || got[0] != segs[3].Base {
		t.Fatalf("sealed segments on disk after Close: %v; want those of %+v from the fourth", got, segs)
	}
}
