package storage_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/replog-io/replog/internal/storagetest"
	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/storage"
)

// openShared opens the data directory dir as log id of j.
func openShared(t *testing.T, dir string, j *storage.Journal, id uint32) *storage.DirStore {
	t.Helper()
	s, _, err := storage.OpenDir(dir, journalID, storage.DirOptions{SharedJournal: j, JournalLogID: id})
	if err != nil {
		t.Fatalf("OpenDir %s on the shared journal: %v", dir, err)
	}
	return s
}

func openJournalFile(t *testing.T, path string, opts storage.JournalOptions) *storage.Journal {
	t.Helper()
	j, err := storage.OpenJournal(path, opts)
	if err != nil {
		t.Fatalf("OpenJournal: %v", err)
	}
	return j
}

// appendBatch is one Apply appending n entries of size bytes at s's LEO.
func appendBatch(s storage.Store, epoch uint64, n, size int) []protocol.Write {
	leo := s.LEO()
	return []protocol.Write{{Kind: protocol.WriteAppend, Entries: storagetest.Batch(leo, n, epoch, size)},
		{Kind: protocol.WriteHWCheckpoint, Offset: leo}}
}

// Two stores on one journal, their Applies waiting at the same moment,
// are made durable by one round: one record (holding both batches), one
// fdatasync. Each store then reads back exactly its own writes, and so
// it does after both are abandoned (no checkpoint: the journal holds the
// writes) and reopened on the reopened journal.
func TestSharedJournalOneRoundForTwoStores(t *testing.T) {
	root := t.TempDir()
	jpath := filepath.Join(root, "shared.journal")
	j := openJournalFile(t, jpath, storage.JournalOptions{Bytes: 1 << 20})
	dirs := []string{filepath.Join(root, "a"), filepath.Join(root, "b")}
	stores := []*storage.DirStore{openShared(t, dirs[0], j, 1), openShared(t, dirs[1], j, 2)}
	models := []*storage.Memory{storage.NewMemory(), storage.NewMemory()}
	apply := func(i int, ws []protocol.Write) {
		if err := stores[i].Apply(ws); err != nil {
			t.Fatalf("store %d: %v", i, err)
		}
		if err := models[i].Apply(ws); err != nil {
			t.Fatal(err)
		}
	}
	// Interleaved, one at a time: a record each.
	for k := range 20 {
		i := k % 2
		apply(i, appendBatch(models[i], 1, 1+k%3, 100+1000*i))
	}
	before := j.Stats()
	// Both waiting for one round.
	release := storage.HoldRounds(j)
	var wg sync.WaitGroup
	wss := [][]protocol.Write{appendBatch(models[0], 1, 2, 300), appendBatch(models[1], 1, 3, 16<<10)}
	errs := make([]error, 2)
	for i := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = stores[i].Apply(wss[i])
		}()
	}
	for storage.QueuedRequests(j) < 2 {
		runtime.Gosched()
	}
	release()
	wg.Wait()
	for i := range stores {
		if errs[i] != nil {
			t.Fatalf("store %d: %v", i, errs[i])
		}
		if err := models[i].Apply(wss[i]); err != nil {
			t.Fatal(err)
		}
	}
	after := j.Stats()
	if rec, b, f := after.Records-before.Records, after.Batches-before.Batches, after.Fsyncs-before.Fsyncs; rec != 1 || b != 2 || f != 1 {
		t.Fatalf("two Applies in one round: %d records, %d batches, %d fsyncs; want 1, 2, 1", rec, b, f)
	}
	for i, s := range stores {
		if err := storagetest.Compare(s, models[i]); err != nil {
			t.Fatalf("store %d: %v", i, err)
		}
		if got := s.Stats().JournalBatches; got != 11 {
			t.Fatalf("store %d: %d batches in the journal, want 11", i, got)
		}
	}
	for _, s := range stores {
		if err := s.Abandon(); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j = openJournalFile(t, jpath, storage.JournalOptions{})
	defer j.Close()
	// Opened in the other order: each claims its own batches.
	stores[1], stores[0] = openShared(t, dirs[1], j, 2), openShared(t, dirs[0], j, 1)
	for i, s := range stores {
		if err := storagetest.Compare(s, models[i]); err != nil {
			t.Fatalf("store %d after the reopen: %v", i, err)
		}
	}
	// A's Close checkpoints its batches, B is abandoned again: the
	// records holding B's batches stay.
	if err := stores[0].Close(); err != nil {
		t.Fatal(err)
	}
	if j.Stats().Live == 0 {
		t.Fatal("the journal was cut past the batches of a store that has not checkpointed them")
	}
	if err := stores[1].Abandon(); err != nil {
		t.Fatal(err)
	}
	stores[1] = openShared(t, dirs[1], j, 2)
	if err := storagetest.Compare(stores[1], models[1]); err != nil {
		t.Fatalf("store 1 after its second reopen: %v", err)
	}
	if err := stores[1].Close(); err != nil {
		t.Fatal(err)
	}
	if live := j.Stats().Live; live != 0 {
		t.Fatalf("%d bytes live in the journal once both stores have checkpointed", live)
	}
	stores[0] = openShared(t, dirs[0], j, 1)
	defer stores[0].Close()
	if err := storagetest.Compare(stores[0], models[0]); err != nil {
		t.Fatalf("store 0 from its segments: %v", err)
	}
}

// A store abandoned with batches in the journal leaves them unclaimed
// (InUse); Forget drops them and the journal is cut past them, but
// refuses while a store is attached. JournalLogIDOf reads a directory's
// ID back.
func TestSharedJournalForget(t *testing.T) {
	root := t.TempDir()
	j := openJournalFile(t, filepath.Join(root, "shared.journal"), storage.JournalOptions{Bytes: 1 << 20})
	defer j.Close()
	dir := filepath.Join(root, "a")
	if _, ok, err := storage.JournalLogIDOf(dir); ok || err != nil {
		t.Fatalf("JournalLogIDOf a directory never opened: %v %v", ok, err)
	}
	s := openShared(t, dir, j, 7)
	if id, ok, err := storage.JournalLogIDOf(dir); id != 7 || !ok || err != nil {
		t.Fatalf("JournalLogIDOf: %d %v %v, want 7", id, ok, err)
	}
	if err := s.Apply(appendBatch(s, 1, 3, 100)); err != nil {
		t.Fatal(err)
	}
	if !j.InUse(7) || j.InUse(8) {
		t.Fatalf("InUse(7) %v, InUse(8) %v", j.InUse(7), j.InUse(8))
	}
	if err := j.Forget(7); !errors.Is(err, storage.ErrInvalidOptions) {
		t.Fatalf("Forget of an attached log: %v, want ErrInvalidOptions", err)
	}
	if err := s.Abandon(); err != nil {
		t.Fatal(err)
	}
	if !j.InUse(7) || j.Stats().Live == 0 {
		t.Fatalf("an abandoned store's batches: InUse %v, %d bytes live", j.InUse(7), j.Stats().Live)
	}
	if err := j.Forget(7); err != nil {
		t.Fatal(err)
	}
	if j.InUse(7) || j.Stats().Live != 0 {
		t.Fatalf("after Forget: InUse %v, %d bytes live", j.InUse(7), j.Stats().Live)
	}
}

// A format 3 directory opens only on its journal as its log: without the
// journal, as another log, on another journal, and read-only it is
// ErrSharedJournal; a second store with the same log ID on a journal is
// ErrInvalidOptions. A directory of its own journal (format 2) moves onto
// a shared one: its writes checkpointed, its journal file removed.
func TestSharedJournalRefusesAnotherPairing(t *testing.T) {
	root := t.TempDir()
	j := openJournalFile(t, filepath.Join(root, "j1"), storage.JournalOptions{})
	defer j.Close()
	other := openJournalFile(t, filepath.Join(root, "j2"), storage.JournalOptions{})
	defer other.Close()
	dir := filepath.Join(root, "d")
	own := openJournaled(t, dir, storage.DirOptions{})
	m := storage.NewMemory()
	journalWorkload(t, own, m, 30)
	if err := own.Abandon(); err != nil { // its writes stay in its own journal
		t.Fatal(err)
	}
	s := openShared(t, dir, j, 7)
	if err := storagetest.Compare(s, m); err != nil {
		t.Fatalf("after moving onto the shared journal: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, storage.JournalFileName)); !os.IsNotExist(err) {
		t.Fatalf("the directory's own journal is left: %v", err)
	}
	if f, err := storage.DirFormat(dir); err != nil || f != storage.StorageFormatShared {
		t.Fatalf("format %d, %v; want %d", f, err, storage.StorageFormatShared)
	}
	if _, _, err := storage.OpenDir(filepath.Join(root, "e"), journalID, storage.DirOptions{SharedJournal: j, JournalLogID: 7}); !errors.Is(err, storage.ErrInvalidOptions) {
		t.Fatalf("a second store as log 7: %v", err)
	}
	journalWorkload(t, s, m, 5)
	if err := s.Abandon(); err != nil {
		t.Fatal(err)
	}
	for name, opts := range map[string]storage.DirOptions{
		"no journal":      {},
		"own journal":     {Journal: true},
		"another log":     {SharedJournal: j, JournalLogID: 8},
		"another journal": {SharedJournal: other, JournalLogID: 7},
	} {
		if _, _, err := storage.OpenDir(dir, journalID, opts); !errors.Is(err, storage.ErrSharedJournal) {
			t.Fatalf("%s: %v, want ErrSharedJournal", name, err)
		}
	}
	if _, _, err := storage.OpenDirReadOnly(dir, storage.DirOptions{}); !errors.Is(err, storage.ErrSharedJournal) {
		t.Fatalf("read-only: %v, want ErrSharedJournal", err)
	}
	s = openShared(t, dir, j, 7)
	defer s.Close()
	if err := storagetest.Compare(s, m); err != nil {
		t.Fatalf("reopened on its journal: %v", err)
	}
}

// Stores whose Applies fill a small shared journal wait for each other's
// checkpoints, never for ever: many concurrent Applies of 16 KiB records
// on four stores and a 256 KiB journal all return, and read back.
func TestSharedJournalFullWaitsForEveryStore(t *testing.T) {
	root := t.TempDir()
	j := openJournalFile(t, filepath.Join(root, "j"), storage.JournalOptions{Bytes: 256 << 10, NoSync: true})
	defer j.Close()
	var wg sync.WaitGroup
	stores := make([]*storage.DirStore, 4)
	models := make([]*storage.Memory, 4)
	for i := range stores {
		s, _, err := storage.OpenDir(filepath.Join(root, fmt.Sprint(i)), journalID, storage.DirOptions{SharedJournal: j, JournalLogID: uint32(i), NoSync: true, SegmentBytes: 256 << 10})
		if err != nil {
			t.Fatal(err)
		}
		stores[i], models[i] = s, storage.NewMemory()
	}
	errs := make([]error, len(stores))
	for i := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range 60 {
				ws := appendBatch(models[i], 1, 1+k%3, 16<<10)
				if err := stores[i].Apply(ws); err != nil {
					errs[i] = err
					return
				}
				_ = models[i].Apply(ws)
			}
		}()
	}
	wg.Wait()
	waits := uint64(0)
	for i, s := range stores {
		if errs[i] != nil {
			t.Fatalf("store %d: %v", i, errs[i])
		}
		if err := storagetest.Compare(s, models[i]); err != nil {
			t.Fatalf("store %d: %v", i, err)
		}
		waits += s.Stats().JournalWaits
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if waits == 0 {
		t.Fatal("no Apply waited for room: the test did not fill the journal")
	}
	t.Logf("journal: %+v; %d waits for room", j.Stats(), waits)
}

// A store's segments keep the sequence number of the journal records they
// hold through a roll made by an Apply too large for the journal (applied
// to the segments directly): the records stay in a shared journal while
// another log in them has not checkpointed, and the next Open must skip
// them, not replay them onto segments that hold them.
func TestSharedJournalSequenceSurvivesDirectRoll(t *testing.T) {
	root := t.TempDir()
	// Small batches stay below a quarter of the journal (no checkpoint
	// is asked for); the large one is more than half of it.
	j := openJournalFile(t, filepath.Join(root, "j"), storage.JournalOptions{Bytes: 1 << 20, NoSync: true})
	defer func() { _ = j.Close() }()
	open := func(name string, id uint32) *storage.DirStore {
		s, _, err := storage.OpenDir(filepath.Join(root, name), journalID, storage.DirOptions{SharedJournal: j, JournalLogID: id, NoSync: true, SegmentBytes: 8 << 10})
		if err != nil {
			t.Fatalf("open %s: %v", name, err)
		}
		return s
	}
	a, b := open("a", 1), open("b", 2)
	ma, mb := storage.NewMemory(), storage.NewMemory()
	for k := range 6 {
		for _, p := range []struct {
			s *storage.DirStore
			m *storage.Memory
		}{{a, ma}, {b, mb}} {
			ws := appendBatch(p.m, 1, 1+k%3, 2000)
			if err := p.s.Apply(ws); err != nil {
				t.Fatal(err)
			}
			_ = p.m.Apply(ws)
		}
	}
	// a's batches in the segments, b's still in the journal: the
	// records stay.
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	a = open("a", 1)
	big := appendBatch(ma, 1, 20, 30000)
	if err := a.Apply(big); err != nil {
		t.Fatal(err)
	}
	_ = ma.Apply(big)
	if st := a.Stats(); st.DirectApplies != 1 || st.Rolls == 0 {
		t.Fatalf("the large Apply: %d direct, %d rolls; want one direct Apply that rolls", st.DirectApplies, st.Rolls)
	}
	// As after a crash: the journal file read again.
	if err := a.Abandon(); err != nil {
		t.Fatal(err)
	}
	if err := b.Abandon(); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j = openJournalFile(t, filepath.Join(root, "j"), storage.JournalOptions{NoSync: true})
	a, b = open("a", 1), open("b", 2)
	defer a.Close()
	defer b.Close()
	if err := storagetest.Compare(a, ma); err != nil {
		t.Fatal(err)
	}
	if err := storagetest.Compare(b, mb); err != nil {
		t.Fatal(err)
	}
}

// TestSharedJournalLargeApplyWakesAfterItsCheckpoint: an Apply too large
// for the journal waits until its own store's pending batches are
// checkpointed, then goes to the segments directly. On a shared journal
// that checkpoint may cut nothing (another log's batch is the front
// record), and the Apply must still wake: it returns, and its entries are
// there. (Without the checkpoint's wake-up it waited until the other store
// happened to checkpoint.)
func TestSharedJournalLargeApplyWakesAfterItsCheckpoint(t *testing.T) {
	root := t.TempDir()
	j := openJournalFile(t, filepath.Join(root, "j"), storage.JournalOptions{Bytes: 1 << 20, NoSync: true})
	open := func(name string, id uint32) *storage.DirStore {
		s, _, err := storage.OpenDir(filepath.Join(root, name), journalID, storage.DirOptions{SharedJournal: j, JournalLogID: id, NoSync: true, SegmentBytes: 8 << 10})
		if err != nil {
			t.Fatalf("open %s: %v", name, err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	a, b := open("a", 1), open("b", 2)
	ma, mb := storage.NewMemory(), storage.NewMemory()
	// b's record first, then a's: the front record holds b's batch.
	ws := appendBatch(mb, 1, 1, 2000)
	if err := b.Apply(ws); err != nil {
		t.Fatal(err)
	}
	if err := mb.Apply(ws); err != nil {
		t.Fatal(err)
	}
	ws = appendBatch(ma, 1, 1, 2000)
	if err := a.Apply(ws); err != nil {
		t.Fatal(err)
	}
	if err := ma.Apply(ws); err != nil {
		t.Fatal(err)
	}
	big := appendBatch(ma, 1, 20, 30000) // 600 KB: over half the 1 MiB journal
	done := make(chan error, 1)
	go func() { done <- a.Apply(big) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("large Apply: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a's large Apply still waits 30s after it asked for a checkpoint of its store: nothing woke it")
	}
	if got, want := a.LEO(), uint64(21); got != want {
		t.Fatalf("a's LEO %d after the large Apply, want %d", got, want)
	}
}

// TestSharedJournalRefusesANewDirectoryForAnotherDirectorysBatches: a
// directory that ran as log 1 crashed with batches still in the journal
// and was wiped; a new directory opened as log 1 must not take those
// batches as its own (it would hold entries it never had): Open refuses
// with ErrSharedJournal and names the log. A new directory under a log ID
// without such batches opens empty (the positive control), and the
// batches' own directory, had it been kept, would replay them
// (TestSharedJournalOneRoundForTwoStores and the crash test).
func TestSharedJournalRefusesANewDirectoryForAnotherDirectorysBatches(t *testing.T) {
	root := t.TempDir()
	jp := filepath.Join(root, "j")
	j := openJournalFile(t, jp, storage.JournalOptions{Bytes: 1 << 20, NoSync: true})
	a, _, err := storage.OpenDir(filepath.Join(root, "a"), journalID, storage.DirOptions{SharedJournal: j, JournalLogID: 1, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Apply(appendBatch(storage.NewMemory(), 1, 3, 100)); err != nil {
		t.Fatal(err)
	}
	if err := a.Abandon(); err != nil { // a crash: the batch stays in the journal
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(root, "a")); err != nil {
		t.Fatal(err)
	}
	j = openJournalFile(t, jp, storage.JournalOptions{NoSync: true})
	c, _, err := storage.OpenDir(filepath.Join(root, "c"), journalID, storage.DirOptions{SharedJournal: j, JournalLogID: 1, NoSync: true})
	if err == nil {
		defer c.Close()
		t.Fatalf("a new directory opened as log 1 with LEO %d: it took the wiped directory's batches", c.LEO())
	}
	if !errors.Is(err, storage.ErrSharedJournal) || !strings.Contains(err.Error(), "log 1") {
		t.Fatalf("Open as log 1 = %v, want ErrSharedJournal naming log 1", err)
	}
	d, _, err := storage.OpenDir(filepath.Join(root, "d"), journalID, storage.DirOptions{SharedJournal: j, JournalLogID: 2, NoSync: true})
	if err != nil {
		t.Fatalf("a new directory as log 2: %v", err)
	}
	defer d.Close()
	if d.LEO() != 0 {
		t.Fatalf("a new directory as log 2 holds LEO %d, want 0", d.LEO())
	}
}
