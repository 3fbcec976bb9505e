package storage_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/replog-io/replog/internal/storagetest"
	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/storage"
)

// The segmented store's own tests: rolls, deletions, truncations across
// segments, reopen, damaged segments, migration of a single-file
// directory, and reads that must not hold up appends. The contract suite
// runs on it too (contract_test.go), with segments of a few KiB.

const tinySegment = 16 << 10 // a roll every few appends of segTestBatch

func openSeg(t *testing.T, dir string, segmentBytes int64) *storage.DirStore {
	t.Helper()
	s, _, err := storage.OpenDir(dir, idN1, storage.DirOptions{SegmentBytes: segmentBytes, NoSync: true})
	if err != nil {
		t.Fatalf("OpenDir: %v", err)
	}
	return s
}

// segFiles returns the sealed segment files in dir, in offset order.
func segFiles(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "replog-*.seg"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(m)
	for i := range m {
		m[i] = filepath.Base(m[i])
	}
	return m
}

// segLog applies the same writes to a store and to a Memory model.
type segLog struct {
	t     *testing.T
	s     *storage.DirStore
	model *storage.Memory
}

func (l *segLog) apply(ws ...protocol.Write) {
	l.t.Helper()
	if err := l.s.Apply(ws); err != nil {
		l.t.Fatalf("store: Apply(%v): %v", ws, err)
	}
	if err := l.model.Apply(ws); err != nil {
		l.t.Fatalf("model: Apply: %v", err)
	}
}

func (l *segLog) appendN(batches, perBatch int, epoch uint64) {
	l.t.Helper()
	for range batches {
		l.apply(protocol.Write{Kind: protocol.WriteAppend, Entries: storagetest.Batch(l.s.LEO(), perBatch, epoch, 100)})
	}
}

func (l *segLog) check(when string) {
	l.t.Helper()
	if err := storagetest.Compare(l.s, l.model); err != nil {
		l.t.Fatalf("%s: store differs from the model: %v", when, err)
	}
	if err := storagetest.CheckConsistent(l.s); err != nil {
		l.t.Fatalf("%s: %v", when, err)
	}
}

func (l *segLog) reopen(segmentBytes int64) {
	l.t.Helper()
	if err := l.s.Close(); err != nil {
		l.t.Fatal(err)
	}
	l.s = openSeg(l.t, l.s.Dir(), segmentBytes)
}

func newSegLog(t *testing.T, segmentBytes int64) *segLog {
	l := &segLog{t: t, s: openSeg(t, t.TempDir(), segmentBytes), model: storage.NewMemory()}
	t.Cleanup(func() { l.s.Close() })
	return l
}

// segmentBases returns the first offsets of the sealed segments on disk.
func segmentBases(t *testing.T, dir string) []uint64 {
	t.Helper()
	var bases []uint64
	for _, name := range segFiles(t, dir) {
		var b uint64
		if _, err := fmt.Sscanf(name, "replog-%020d.seg", &b); err != nil {
			t.Fatalf("segment file %s: %v", name, err)
		}
		bases = append(bases, b)
	}
	return bases
}

// The active segment rolls at SegmentBytes: sealed files appear, named by
// their first offset, one per roll; a read spans them; the store reopens
// with the same contents, without opening any sealed segment.
func TestDirRolls(t *testing.T) {
	l := newSegLog(t, tinySegment)
	for e := uint64(1); e <= 4; e++ {
		l.appendN(40, 20, e)
	}
	st := l.s.Stats()
	files := segFiles(t, l.s.Dir())
	if st.Rolls < 10 || len(files) != int(st.Rolls) || st.Sealed != len(files) {
		t.Fatalf("%d rolls, %d sealed, files %v: want ≥ 10 rolls, one file per roll", st.Rolls, st.Sealed, files)
	}
	bases := segmentBases(t, l.s.Dir())
	if bases[0] != 0 || !slices.IsSorted(bases) {
		t.Fatalf("segment bases %v", bases)
	}
	// Every sealed file holds about SegmentBytes (trimmed to its pages).
	for _, name := range files {
		fi, err := os.Stat(filepath.Join(l.s.Dir(), name))
		if err != nil || fi.Size() < tinySegment || fi.Size() > 4*tinySegment {
			t.Fatalf("sealed %s: %v bytes, %v; want about %d", name, fi.Size(), err, tinySegment)
		}
	}
	// One read across every segment.
	es, err := l.s.Entries(0, 0, 1<<30)
	if err != nil || len(es) != int(l.s.LEO()) {
		t.Fatalf("Entries(0) across %d segments = %d entries, %v; want %d", len(files), len(es), err, l.s.LEO())
	}
	l.check("after the rolls")
	// Reads that start and end anywhere.
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		from := rng.Uint64N(l.s.LEO())
		n, b := rng.IntN(100), rng.IntN(20000)
		got, err := l.s.Entries(from, n, b)
		want, werr := l.model.Entries(from, n, b)
		if err != nil || werr != nil || len(got) != len(want) {
			t.Fatalf("Entries(%d, %d, %d) = %d entries, %v; model %d, %v", from, n, b, len(got), err, len(want), werr)
		}
		for i := range got {
			if got[i].Offset != want[i].Offset || got[i].Epoch != want[i].Epoch || !bytes.Equal(got[i].Data, want[i].Data) {
				t.Fatalf("Entries(%d, %d, %d)[%d] = %+v, want %+v", from, n, b, i, got[i], want[i])
			}
		}
	}
	l.reopen(tinySegment)
	if st := l.s.Stats(); st.Open != 0 || st.Sealed != len(files) {
		t.Fatalf("after reopen: %+v; want %d sealed segments, none open", st, len(files))
	}
	l.check("after reopen")
	l.appendN(5, 20, 5)
	l.check("appending after reopen")
}

// A prefix deletion unlinks the sealed segments wholly below the new log
// start and keeps the one holding it; the entries below the log start are
// unreadable at once although that segment is still on disk; the epoch map
// keeps the row covering the log start; all of it survives a reopen.
func TestDirDeletePrefixUnlinksSegments(t *testing.T) {
	l := newSegLog(t, tinySegment)
	for e := uint64(1); e <= 3; e++ {
		l.appendN(30, 20, e)
	}
	bases := segmentBases(t, l.s.Dir())
	if len(bases) < 6 {
		t.Fatalf("only %d sealed segments", len(bases))
	}
	// The log start inside the fourth sealed segment.
	upTo := bases[3] + (bases[4]-bases[3])/2
	before := l.s.Stats()
	l.apply(protocol.Write{Kind: protocol.WriteDeletePrefix, Offset: upTo})
	l.s.Settle() // the store's goroutine unlinks the files after the Apply
	if got := segmentBases(t, l.s.Dir()); !slices.Equal(got, bases[3:]) {
		t.Fatalf("sealed segments after DeletePrefix(%d): %v; want %v (those below the log start unlinked)", upTo, got, bases[3:])
	}
	if st := l.s.Stats(); st.SegmentsDeleted-before.SegmentsDeleted != 3 || st.Commits-before.Commits != 1 {
		t.Fatalf("stats %+v after %+v: want 3 segments deleted in one commit", st, before)
	}
	for _, off := range []uint64{0, bases[3], upTo - 1} {
		if _, err := l.s.Entries(off, 10, 1000); !errors.Is(err, storage.ErrOutOfRange) {
			t.Fatalf("Entries(%d) below the log start %d: %v; want ErrOutOfRange", off, upTo, err)
		}
	}
	if m := l.s.EpochMap(); m[0].StartOffset != upTo {
		t.Fatalf("epoch map %v: want its first row moved up to the log start %d", m, upTo)
	}
	l.check("after DeletePrefix")
	l.reopen(tinySegment)
	l.check("after reopen")
	// Up to the LEO: every sealed segment goes; the log goes on.
	l.apply(protocol.Write{Kind: protocol.WriteDeletePrefix, Offset: l.s.LEO()})
	l.s.Settle()
	if got := segFiles(t, l.s.Dir()); len(got) != 0 {
		t.Fatalf("sealed segments after DeletePrefix(LEO): %v", got)
	}
	l.appendN(20, 20, 4)
	l.check("appending after DeletePrefix(LEO)")
	// Above the LEO (a reset): the same, and the log restarts there.
	l.apply(protocol.Write{Kind: protocol.WriteDeletePrefix, Offset: l.s.LEO() + 1000})
	l.appendN(20, 20, 2)
	l.check("appending after a reset above the LEO")
	l.reopen(tinySegment)
	l.check("after the second reopen")
}

// A truncation into a sealed segment lowers its end and drops (unlinks)
// the segments after it; one to the first offset of a sealed segment drops
// that one too. The active segment starts at the truncation point; the
// next entries, of a new epoch, read back, and so after a reopen.
func TestDirTruncateIntoSealed(t *testing.T) {
	l := newSegLog(t, tinySegment)
	l.appendN(40, 20, 1)
	l.appendN(40, 20, 2)
	bases := segmentBases(t, l.s.Dir())
	if len(bases) < 8 {
		t.Fatalf("only %d sealed segments", len(bases))
	}
	at := bases[6] + 7 // inside the seventh
	l.apply(protocol.Write{Kind: protocol.WriteTruncate, Offset: at})
	if got := segmentBases(t, l.s.Dir()); !slices.Equal(got, bases[:7]) {
		t.Fatalf("sealed segments after TruncateSuffix(%d): %v; want %v", at, got, bases[:7])
	}
	if l.s.LEO() != at {
		t.Fatalf("LEO %d after TruncateSuffix(%d)", l.s.LEO(), at)
	}
	l.check("after a truncation inside a sealed segment")
	l.appendN(3, 20, 3)
	l.check("appending after it")
	l.reopen(tinySegment)
	l.check("after reopen")
	at = bases[4] // exactly the fifth segment's first offset
	l.apply(protocol.Write{Kind: protocol.WriteTruncate, Offset: at})
	if got := segmentBases(t, l.s.Dir()); !slices.Equal(got, bases[:4]) {
		t.Fatalf("sealed segments after TruncateSuffix(%d): %v; want %v", at, got, bases[:4])
	}
	l.appendN(30, 20, 5) // rolls again, reusing the names of dropped segments
	l.check("after a truncation to a segment's base and new rolls")
	l.reopen(tinySegment)
	l.check("after the second reopen")
}

// Open reads the active segment only: with every sealed file emptied, the
// directory still opens with its state (LEO, epoch map, vote, HW) and
// reads the active segment; a read of a sealed segment then fails with
// ErrCorrupt naming the file and the offset, and never panics. A missing
// sealed file, which a directory listing shows, fails the open.
func TestDirDamagedSealedSegment(t *testing.T) {
	l := newSegLog(t, tinySegment)
	l.appendN(30, 20, 1)
	l.apply(protocol.Write{Kind: protocol.WriteQuorumState, Quorum: protocol.QuorumState{Epoch: 2, VotedFor: "n1", LeaderID: "n1"}},
		protocol.Write{Kind: protocol.WriteHWCheckpoint, Offset: 500})
	l.appendN(30, 20, 2)
	dir := l.s.Dir()
	leo, epochs := l.s.LEO(), l.s.EpochMap()
	files := segFiles(t, dir)
	bases := segmentBases(t, dir)
	if err := l.s.Close(); err != nil {
		t.Fatal(err)
	}

	t.Run("every sealed file empty", func(t *testing.T) {
		d := t.TempDir()
		copyDir(t, dir, d)
		for _, f := range files {
			if err := os.Truncate(filepath.Join(d, f), 0); err != nil {
				t.Fatal(err)
			}
		}
		s := openSeg(t, d, tinySegment)
		defer s.Close()
		q, _ := s.QuorumState()
		hw, _, _ := s.HWCheckpoint()
		if s.LEO() != leo || fmt.Sprint(s.EpochMap()) != fmt.Sprint(epochs) || q.VotedFor != "n1" || hw != 500 {
			t.Fatalf("opened with LEO %d, map %v, vote %+v, HW %d; want %d, %v, n1, 500", s.LEO(), s.EpochMap(), q, hw, leo, epochs)
		}
		last := bases[len(bases)-1]
		if es, err := s.Entries(leo-5, 0, 1<<20); err != nil || len(es) != 5 {
			t.Fatalf("Entries of the active segment = %d, %v", len(es), err)
		}
		off := last + 3
		_, err := s.Entries(off, 0, 1<<20)
		name := filepath.Join(d, files[len(files)-1])
		if !errors.Is(err, storage.ErrCorrupt) || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), fmt.Sprintf("offset %d", off)) {
			t.Fatalf("Entries(%d) of an emptied segment: %v; want ErrCorrupt naming %s and the offset", off, err, name)
		}
	})
	t.Run("page garbage", func(t *testing.T) {
		d := t.TempDir()
		copyDir(t, dir, d)
		name := filepath.Join(d, files[2])
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(5, 5))
		for i := 2 * 4096; i < len(b); i++ { // every page after the meta pages
			b[i] = byte(rng.Uint32())
		}
		if err := os.WriteFile(name, b, 0o600); err != nil {
			t.Fatal(err)
		}
		s := openSeg(t, d, tinySegment)
		defer s.Close()
		off := bases[2] + 1
		_, err = s.Entries(off, 10, 1<<20)
		if !errors.Is(err, storage.ErrCorrupt) || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), fmt.Sprintf("offset %d", off)) {
			t.Fatalf("Entries(%d): %v; want ErrCorrupt naming %s and the offset", off, err, name)
		}
		// The other segments read on.
		if es, err := s.Entries(bases[1], int(bases[2]-bases[1]), 1<<30); err != nil || es[len(es)-1].Offset != bases[2]-1 {
			t.Fatalf("Entries(%d) up to the damaged segment: %v", bases[1], err)
		}
		if es, err := s.Entries(bases[3], 0, 1<<30); err != nil || uint64(len(es)) != leo-bases[3] {
			t.Fatalf("Entries(%d) after the damaged segment: %d, %v", bases[3], len(es), err)
		}
	})
	t.Run("entry checksum", func(t *testing.T) {
		d := t.TempDir()
		copyDir(t, dir, d)
		name := filepath.Join(d, files[1])
		off := bases[1] + 2
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		i := bytes.Index(b, storagetest.Payload(off, 1, 100))
		if i < 0 {
			t.Fatalf("payload of offset %d not found in %s", off, name)
		}
		b[i+50] ^= 1
		if err := os.WriteFile(name, b, 0o600); err != nil {
			t.Fatal(err)
		}
		s := openSeg(t, d, tinySegment)
		defer s.Close()
		_, err = s.Entries(bases[1], 0, 1<<20)
		if !errors.Is(err, storage.ErrCorrupt) || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), fmt.Sprintf("offset %d", off)) {
			t.Fatalf("Entries(%d): %v; want ErrCorrupt naming %s and offset %d", bases[1], err, name, off)
		}
	})
	t.Run("sealed file missing", func(t *testing.T) {
		d := t.TempDir()
		copyDir(t, dir, d)
		name := filepath.Join(d, files[1])
		if err := os.Remove(name); err != nil {
			t.Fatal(err)
		}
		s, _, err := storage.OpenDir(d, idN1, storage.DirOptions{SegmentBytes: tinySegment})
		if err == nil {
			s.Close()
			t.Fatal("a directory with a segment missing opened")
		}
		if !errors.Is(err, storage.ErrCorrupt) || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "missing") {
			t.Fatalf("OpenDir: %v; want ErrCorrupt naming %s", err, name)
		}
	})
	t.Run("positive control", func(t *testing.T) {
		d := t.TempDir()
		copyDir(t, dir, d)
		s := openSeg(t, d, tinySegment)
		defer s.Close()
		if err := storagetest.CheckConsistent(s); err != nil {
			t.Fatal(err)
		}
	})
}

// An existing single-file directory (one replog.db and its identity, the
// layout before segments) opens as it is: its file is the active segment,
// nothing is rewritten, and the first roll makes it the first sealed
// segment by a link and a rename (the same inode: no copy, constant time).
// Every entry, the epoch map, the vote and the HW survive, before and
// after a reopen. A legacy file without identity is adopted the same way.
func TestDirMigratesSingleFile(t *testing.T) {
	for _, withIdentity := range []bool{true, false} {
		t.Run(fmt.Sprintf("identity=%v", withIdentity), func(t *testing.T) {
			dir := t.TempDir()
			model := storage.NewMemory()
			ws := []protocol.Write{
				{Kind: protocol.WriteAppend, Entries: storagetest.Batch(0, 300, 1, 100)},
				{Kind: protocol.WriteAppend, Entries: storagetest.Batch(300, 300, 3, 100)},
				{Kind: protocol.WriteQuorumState, Quorum: protocol.QuorumState{Epoch: 3, VotedFor: "n1", LeaderID: "n1"}},
				{Kind: protocol.WriteHWCheckpoint, Offset: 550},
				{Kind: protocol.WriteDeletePrefix, Offset: 100},
			}
			if err := model.Apply(ws); err != nil {
				t.Fatal(err)
			}
			// The old layout: a single file (format 1), and the identity
			// file OpenDir wrote next to it before segments.
			if err := storage.WriteLegacyDataFile(filepath.Join(dir, storage.DataFileName), ws); err != nil {
				t.Fatal(err)
			}
			if withIdentity {
				s, _, err := storage.OpenDir(dir, idN1, storage.DirOptions{}) // adopts it: identity file + record
				if err != nil {
					t.Fatal(err)
				}
				s.Close()
			}
			fi, err := os.Stat(filepath.Join(dir, storage.DataFileName))
			if err != nil {
				t.Fatal(err)
			}
			before := snapshot(t, dir)
			s := openSeg(t, dir, tinySegment)
			l := &segLog{t: t, s: s, model: model}
			defer func() { l.s.Close() }()
			l.check("opened with segments")
			if withIdentity {
				s.Close()
				sameSnapshot(t, before, snapshot(t, dir)) // the open rewrote nothing
				l.s = openSeg(t, dir, tinySegment)
			}
			l.appendN(1, 10, 3) // the old file holds more than a segment: this rolls first
			first := filepath.Join(dir, storage.SegmentFileName(0))
			sealed, err := os.Stat(first)
			if err != nil {
				t.Fatalf("the old file did not become the first segment: %v (files %v)", err, segFiles(t, dir))
			}
			if !os.SameFile(fi, sealed) {
				t.Fatal("the first segment is not the old file itself (copied, not renamed)")
			}
			if ino := sealed.Sys().(*syscall.Stat_t).Ino; ino != fi.Sys().(*syscall.Stat_t).Ino {
				t.Fatalf("inode %d, was %d", ino, fi.Sys().(*syscall.Stat_t).Ino)
			}
			l.check("after the first roll")
			l.appendN(30, 20, 4)
			l.reopen(tinySegment)
			l.check("after reopen")
			l.apply(protocol.Write{Kind: protocol.WriteDeletePrefix, Offset: 700})
			l.s.Settle()
			if _, err := os.Stat(first); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("the old file, wholly below the log start, was not deleted: %v", err)
			}
			l.check("after deleting it")
		})
	}
}

// A reader held while it opens a sealed segment holds up no Apply: rolls,
// appends and a deletion of that very segment go on; the reader then gets
// ErrOutOfRange (the segment is gone), never other data.
func TestDirSealedReadDoesNotHoldUpAppends(t *testing.T) {
	l, bases, target, entered, release := holdSealedReader(t, storage.SetSealedOpenHook)
	readErr := make(chan error, 1)
	go func() {
		es, err := l.s.Entries(bases[1]+1, 0, 1<<20)
		if err == nil {
			err = fmt.Errorf("read %d entries from %d", len(es), es[0].Offset)
		}
		readErr <- err
	}()
	<-entered
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.appendN(20, 20, 2) // rolls
		l.apply(protocol.Write{Kind: protocol.WriteDeletePrefix, Offset: bases[3]})
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		close(release)
		t.Fatal("Apply waited for a reader opening a sealed segment")
	}
	l.s.Settle() // unlinked by the store's goroutine, the reader still in it
	if _, err := os.Stat(target); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the deleted segment's file: %v", err)
	}
	close(release)
	if err := <-readErr; !errors.Is(err, storage.ErrOutOfRange) {
		t.Fatalf("reader of a deleted segment: %v; want ErrOutOfRange", err)
	}
	l.check("after the held read")
}

// However many segments a reader walks through, at most MaxOpenSealed
// unused ones stay open.
func TestDirOpenSegmentsBounded(t *testing.T) {
	l := newSegLog(t, tinySegment)
	l.appendN(80, 20, 1)
	l.reopen(tinySegment)
	if n := l.s.Stats().Sealed; n < storage.MaxOpenSealed+5 {
		t.Fatalf("only %d sealed segments", n)
	}
	for off := uint64(0); off < l.s.LEO(); {
		es, err := l.s.Entries(off, 7, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		off += uint64(len(es))
		if n := l.s.Stats().Open; n > storage.MaxOpenSealed {
			t.Fatalf("%d sealed segments open at offset %d", n, off)
		}
	}
	if n := l.s.Stats().Open; n != storage.MaxOpenSealed {
		t.Fatalf("%d open after reading everything; want the bound %d", n, storage.MaxOpenSealed)
	}
}

// Readers racing rolls, truncations into sealed segments and deletions
// (run with -race) get, for every entry they are given, the data written
// at that offset in that epoch, contiguous from where they asked, or an
// error wrapping ErrOutOfRange.
func TestDirReadsDuringRollsAndDeletions(t *testing.T) {
	s := openSeg(t, t.TempDir(), 8<<10)
	defer s.Close()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for r := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(r), 3))
			for {
				select {
				case <-stop:
					return
				default:
				}
				start, leo := s.LogStart(), s.LEO()
				if leo == start {
					continue
				}
				from := start + rng.Uint64N(leo-start)
				es, err := s.Entries(from, rng.IntN(200), 1<<20)
				if err != nil {
					if !errors.Is(err, storage.ErrOutOfRange) {
						errs <- err
						return
					}
					continue
				}
				for i, e := range es {
					if e.Offset != from+uint64(i) || !bytes.Equal(e.Data, storagetest.Payload(e.Offset, e.Epoch, 50)) ||
						(i > 0 && e.Epoch < es[i-1].Epoch) {
						errs <- fmt.Errorf("Entries(%d)[%d] = offset %d epoch %d: wrong entry", from, i, e.Offset, e.Epoch)
						return
					}
				}
			}
		}()
	}
	rng := rand.New(rand.NewPCG(9, 9))
	epoch := uint64(1)
	for range 400 {
		leo, start := s.LEO(), s.LogStart()
		var w protocol.Write
		switch r := rng.IntN(20); {
		case r == 0 && leo > start:
			w = protocol.Write{Kind: protocol.WriteTruncate, Offset: leo - rng.Uint64N(min(leo-start, 300))}
			epoch++
		case r == 1 && leo > start:
			w = protocol.Write{Kind: protocol.WriteDeletePrefix, Offset: start + rng.Uint64N((leo-start)/3+1)}
		default:
			w = protocol.Write{Kind: protocol.WriteAppend, Entries: storagetest.Batch(leo, 1+rng.IntN(40), epoch, 50)}
		}
		if err := s.Apply([]protocol.Write{w}); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Rolls < 20 || st.SegmentsDeleted == 0 {
		t.Fatalf("%+v: want rolls and deletions during the reads", st)
	}
	if err := storagetest.CheckConsistent(s); err != nil {
		t.Fatal(err)
	}
}

// Voter-set rows live in the active file only (docs/storage.md):
// each roll copies them into the new active file, a deletion of whole
// segments keeps the newest row below the new log start, a truncation into
// a sealed segment drops the rows at or above the point; every state
// reopens, read-write and read-only, and passes VerifyDir.
func TestDirVoterSetsAcrossRollsAndDeletions(t *testing.T) {
	l := newSegLog(t, tinySegment)
	var all []protocol.VotersAt // every voters entry written, in order
	for i := range 60 {
		es := storagetest.Batch(l.s.LEO(), 20, 1, 100)
		if i%4 == 0 {
			vs := storagetest.Voters(uint64(i))
			es[7] = storagetest.VotersEntry(es[7].Offset, 1, vs)
			all = append(all, protocol.VotersAt{Offset: es[7].Offset, Voters: vs})
		}
		l.apply(protocol.Write{Kind: protocol.WriteAppend, Entries: es})
	}
	// want: the rows the log [start, LEO) implies, computed here on its own.
	// Every set written differs from the one before it, so below the log
	// start the two newest rows stay (the set in force and the change).
	want := func(start, leo uint64) string {
		var rows []protocol.VotersAt
		for _, r := range all {
			switch {
			case r.Offset >= leo:
			case r.Offset < start && len(rows) > 1 && rows[1].Offset < start:
				rows[0], rows[1] = rows[1], r
			default:
				rows = append(rows, r)
			}
		}
		return storagetest.VoterSetsString(rows)
	}
	check := func(when string) {
		t.Helper()
		l.check(when)
		if got, w := storagetest.VoterSetsString(l.s.VoterSets()), want(l.s.LogStart(), l.s.LEO()); got != w {
			t.Fatalf("%s: voter sets %s, want %s", when, got, w)
		}
	}
	if st := l.s.Stats(); st.Rolls < 8 {
		t.Fatalf("only %d rolls", st.Rolls)
	}
	check("after the appends")
	l.reopen(tinySegment)
	check("after reopen")
	bases := segmentBases(t, l.s.Dir())
	upTo := bases[5] + 3
	before := l.s.Stats().SegmentsDeleted
	l.apply(protocol.Write{Kind: protocol.WriteDeletePrefix, Offset: upTo})
	l.s.Settle()
	if n := l.s.Stats().SegmentsDeleted - before; n != 5 {
		t.Fatalf("%d segments deleted, want 5", n)
	}
	if rows := l.s.VoterSets(); rows[1].Offset >= upTo || rows[2].Offset < upTo {
		t.Fatalf("voter sets %s after DeletePrefix(%d): want the two newest below it first", storagetest.VoterSetsString(rows), upTo)
	}
	check("after the deletion")
	l.reopen(tinySegment)
	check("after the deletion and a reopen")
	// Truncation into the second-to-last sealed segment.
	bases = segmentBases(t, l.s.Dir())
	to := bases[len(bases)-2] + 1
	l.apply(protocol.Write{Kind: protocol.WriteTruncate, Offset: to})
	check("after the truncation into a sealed segment")
	l.reopen(tinySegment)
	check("after the truncation and a reopen")
	// More rolls after it: the rows follow into each new active file.
	for range 20 {
		l.apply(protocol.Write{Kind: protocol.WriteAppend, Entries: storagetest.Batch(l.s.LEO(), 20, 2, 100)})
	}
	all = l.model.VoterSets() // no voters entry since the truncation: the rows it left
	check("after more rolls")
	rows := l.s.VoterSets()
	if err := l.s.Close(); err != nil {
		t.Fatal(err)
	}
	ro, _, err := storage.OpenDirReadOnly(l.s.Dir(), storage.DirOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := storagetest.VoterSetsString(ro.VoterSets()); got != storagetest.VoterSetsString(rows) {
		t.Fatalf("read-only voter sets %s, want %s", got, storagetest.VoterSetsString(rows))
	}
	ro.Close()
	if _, err := storage.VerifyDir(l.s.Dir(), storage.DirOptions{}); err != nil {
		t.Fatalf("VerifyDir: %v", err)
	}
	l.s = openSeg(t, l.s.Dir(), tinySegment) // for the cleanup's Close
}

// holdSealedReader makes a segmented log of several sealed segments, none
// open, and installs a hook (set: SetSealedOpenHook or SetSealedReadHook)
// that holds a reader of the second segment's file: entered is closed when
// the reader gets there, and the reader waits until release is closed. It
// returns the segments' bases and the held file's path; the hook is removed
// at the test's end.
func holdSealedReader(t *testing.T, set func(func(path string))) (l *segLog, bases []uint64, target string, entered, release chan struct{}) {
	t.Helper()
	l = newSegLog(t, tinySegment)
	l.appendN(30, 20, 1)
	l.reopen(tinySegment) // nothing sealed is open
	bases = segmentBases(t, l.s.Dir())
	target = filepath.Join(l.s.Dir(), storage.SegmentFileName(bases[1]))
	entered, release = make(chan struct{}), make(chan struct{})
	var once sync.Once
	set(func(path string) {
		if path == target {
			once.Do(func() { close(entered) })
			<-release
		}
	})
	t.Cleanup(func() { set(nil) })
	return l, bases, target, entered, release
}
