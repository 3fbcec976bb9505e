package storage_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/replog-io/replog/internal/storagetest"
	"github.com/replog-io/replog/internal/testwait"
	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/storage"
)

var journalID = storage.Identity{ClusterID: "c", NodeID: "n"}

func openJournaled(t *testing.T, dir string, opts storage.DirOptions) *storage.DirStore {
	t.Helper()
	opts.Journal = true
	s, _, err := storage.OpenDir(dir, journalID, opts)
	if err != nil {
		t.Fatalf("OpenDir: %v", err)
	}
	return s
}

func readFormatFile(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, storage.FormatFileName))
	if err != nil {
		t.Fatalf("format file: %v", err)
	}
	return string(b)
}

// journalWorkload applies a mix of writes to s and to the model m, batch
// by batch: appends of large and small entries, a truncation with a new
// epoch, a prefix deletion, quorum states, HW checkpoints.
func journalWorkload(t *testing.T, s, m storage.Store, batches int) {
	t.Helper()
	epoch := max(m.LastEpoch(), 1)
	for i := 0; i < batches; i++ {
		leo := m.LEO()
		var ws []protocol.Write
		switch {
		case i%17 == 16 && leo > m.LogStart()+5:
			epoch++
			ws = []protocol.Write{{Kind: protocol.WriteTruncate, Offset: leo - 3},
				{Kind: protocol.WriteQuorumState, Quorum: protocol.QuorumState{Epoch: epoch, VotedFor: "n"}}}
		case i%23 == 22:
			ws = []protocol.Write{{Kind: protocol.WriteDeletePrefix, Offset: m.LogStart() + (leo-m.LogStart())/3}}
		default:
			size := 100
			if i%5 == 0 {
				size = 16 << 10 // a large record: its journal write, no overflow pages on the commit path
			}
			ws = []protocol.Write{{Kind: protocol.WriteAppend, Entries: storagetest.Batch(leo, 1+i%4, epoch, size)},
				{Kind: protocol.WriteHWCheckpoint, Offset: leo}}
		}
		if err := s.Apply(ws); err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
		if err := m.Apply(ws); err != nil {
			t.Fatalf("model, batch %d: %v", i, err)
		}
	}
}

// An Apply with the journal costs one fsync (its record's), and the
// segments' commits come in checkpoints of many Applies; every entry
// reads back, from memory or the segments, and after a reopen.
func TestJournalOneFsyncPerApply(t *testing.T) {
	dir := t.TempDir()
	s := openJournaled(t, dir, storage.DirOptions{JournalBytes: 512 << 10})
	m := storage.NewMemory()
	journalWorkload(t, s, m, 120)
	if err := storagetest.Compare(s, m); err != nil {
		t.Fatal(err)
	}
	// Counted once Close has run the last checkpoint: none is under way.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	st := s.Stats()
	if st.GroupCommits != st.Applies || st.Applies != 120 {
		t.Fatalf("%d group commits for %d Applies (want 120 each)", st.GroupCommits, st.Applies)
	}
	if st.Checkpoints == 0 || st.Commits != st.Checkpoints {
		t.Fatalf("%d checkpoints, %d segment commits: want checkpoints, one commit each", st.Checkpoints, st.Commits)
	}
	if st.Commits*4 > st.Applies {
		t.Fatalf("%d segment commits for %d Applies: the checkpoints do not batch", st.Commits, st.Applies)
	}
	// One fdatasync per record and per cut, two per segment commit.
	if want := st.GroupCommits + st.Checkpoints + 2*st.Commits; st.Fsyncs != want {
		t.Fatalf("%d fsyncs, want %d (%+v)", st.Fsyncs, want, st)
	}
	if st.JournalBytes == 0 || st.JournalLive != 0 || st.CheckpointTime <= 0 || st.CheckpointMax > st.CheckpointTime {
		t.Fatalf("journal counters: %+v", st)
	}
	s = openJournaled(t, dir, storage.DirOptions{JournalBytes: 512 << 10})
	defer s.Close()
	if err := storagetest.Compare(s, m); err != nil {
		t.Fatalf("after reopen: %v", err)
	}
	if got := s.Stats().JournalLive; got != 0 {
		t.Fatalf("Close left %d journal bytes not checkpointed", got)
	}
}

// Without the journal the counters say what a commit costs: two fsyncs.
func TestNoJournalTwoFsyncsPerApply(t *testing.T) {
	s, _, err := storage.OpenDir(t.TempDir(), journalID, storage.DirOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range 5 {
		if err := s.Append(storagetest.Batch(uint64(i), 1, 1, 10)); err != nil {
			t.Fatal(err)
		}
	}
	st := s.Stats()
	if st.Fsyncs != 2*st.Commits || st.Commits < 5 || st.GroupCommits != 0 {
		t.Fatalf("%+v", st)
	}
}

// A store abandoned with writes only in the journal (a kill) reopens with
// all of them: Open replays the journal into memory; reads serve them;
// the next checkpoint moves them into the segments.
func TestJournalReplay(t *testing.T) {
	dir := t.TempDir()
	opts := storage.DirOptions{JournalBytes: 4 << 20} // no checkpoint before the abandon
	s := openJournaled(t, dir, opts)
	m := storage.NewMemory()
	journalWorkload(t, s, m, 60)
	if st := s.Stats(); st.Checkpoints != 0 {
		t.Fatalf("%d checkpoints: the test needs the writes in the journal only", st.Checkpoints)
	}
	if err := s.Abandon(); err != nil {
		t.Fatal(err)
	}
	s = openJournaled(t, dir, opts)
	if err := storagetest.Compare(s, m); err != nil {
		t.Fatalf("after replay: %v", err)
	}
	if err := storagetest.CheckConsistent(s); err != nil {
		t.Fatal(err)
	}
	if s.Stats().JournalLive == 0 {
		t.Fatal("the replayed writes are not in the journal any more")
	}
	journalWorkload(t, s, m, 10)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Read-only: the journal's writes are replayed too, and nothing
	// changes on disk.
	s = openJournaled(t, dir, opts)
	journalWorkload(t, s, m, 7)
	if err := s.Abandon(); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(filepath.Join(dir, storage.JournalFileName))
	ro, _, err := storage.OpenDirReadOnly(dir, storage.DirOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := storagetest.Compare(ro, m); err != nil {
		t.Fatalf("read-only: %v", err)
	}
	ro.Close()
	if after, _ := os.ReadFile(filepath.Join(dir, storage.JournalFileName)); string(after) != string(before) {
		t.Fatal("a read-only open changed the journal")
	}
}

// A torn last record (a write the crash interrupted) is cut: the batch is
// absent, the ones before it present, and the journal goes on from there.
func TestJournalTornTail(t *testing.T) {
	for _, keep := range []int{0, 20, 40} { // bytes of the last record that reached the disk
		t.Run(fmt.Sprint(keep), func(t *testing.T) {
			dir := t.TempDir()
			opts := storage.DirOptions{JournalBytes: 1 << 20}
			s := openJournaled(t, dir, opts)
			m := storage.NewMemory()
			journalWorkload(t, s, m, 8)
			leo := s.LEO()
			last := []protocol.Write{{Kind: protocol.WriteAppend, Entries: storagetest.Batch(leo, 3, 1, 300)}}
			if err := s.Apply(last); err != nil {
				t.Fatal(err)
			}
			if err := s.Abandon(); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, storage.JournalFileName)
			spans, err := storage.JournalRecordSpans(path)
			if err != nil || len(spans) != 9 {
				t.Fatalf("%d records, %v", len(spans), err)
			}
			tear(t, path, spans[8][0]+int64(keep), spans[8][1]-int64(keep))
			s = openJournaled(t, dir, opts)
			if err := storagetest.Compare(s, m); err != nil {
				t.Fatalf("after a torn last record: %v", err)
			}
			if err := s.Apply(last); err != nil { // its place and sequence number are free again
				t.Fatal(err)
			}
			_ = m.Apply(last)
			if err := s.Abandon(); err != nil {
				t.Fatal(err)
			}
			s = openJournaled(t, dir, opts)
			defer s.Close()
			if err := storagetest.Compare(s, m); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// tear zeroes n bytes of the file at path from off.
func tear(t *testing.T, path string, off, n int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(make([]byte, n), off); err != nil {
		t.Fatal(err)
	}
}

// Damage to a record before the tail is never skipped: Open fails with
// ErrCorrupt naming the journal and the record's offset.
func TestJournalDamageBeforeTail(t *testing.T) {
	for _, at := range []struct {
		name string
		byte int64 // offset in the record
	}{{"payload", 40}, {"header", 6}} {
		t.Run(at.name, func(t *testing.T) {
			dir := t.TempDir()
			opts := storage.DirOptions{JournalBytes: 1 << 20}
			s := openJournaled(t, dir, opts)
			journalWorkload(t, s, storage.NewMemory(), 5)
			if err := s.Abandon(); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, storage.JournalFileName)
			spans, err := storage.JournalRecordSpans(path)
			if err != nil || len(spans) != 5 {
				t.Fatalf("%d records, %v", len(spans), err)
			}
			b, _ := os.ReadFile(path)
			b[spans[2][0]+at.byte] ^= 0x10
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
			_, _, err = storage.OpenDir(dir, journalID, storage.DirOptions{Journal: true, JournalBytes: 1 << 20})
			if !errors.Is(err, storage.ErrCorrupt) || !strings.Contains(err.Error(), path) ||
				!strings.Contains(err.Error(), fmt.Sprintf("offset %d", spans[2][0])) {
				t.Fatalf("OpenDir of a journal damaged at offset %d: %v", spans[2][0], err)
			}
			// Nor is it skipped with the journal turned off, or read-only.
			if _, _, err = storage.OpenDir(dir, journalID, storage.DirOptions{}); !errors.Is(err, storage.ErrCorrupt) {
				t.Fatalf("OpenDir without the journal: %v", err)
			}
			if _, _, err = storage.OpenDirReadOnly(dir, storage.DirOptions{}); !errors.Is(err, storage.ErrCorrupt) {
				t.Fatalf("OpenDirReadOnly: %v", err)
			}
		})
	}
}

// A record too large for the journal goes to the segments, after the
// journal's; a journal full of records waits for the checkpoint.
func TestJournalLargeAndFull(t *testing.T) {
	dir := t.TempDir()
	opts := storage.DirOptions{JournalBytes: 64 << 10}
	s := openJournaled(t, dir, opts)
	m := storage.NewMemory()
	journalWorkload(t, s, m, 30)
	big := []protocol.Write{{Kind: protocol.WriteAppend, Entries: storagetest.Batch(m.LEO(), 3, max(m.LastEpoch(), 1), 16<<10)}}
	for _, st := range []storage.Store{s, m} {
		if err := st.Apply(big); err != nil {
			t.Fatal(err)
		}
	}
	journalWorkload(t, s, m, 30)
	st := s.Stats()
	if st.DirectApplies == 0 || st.GroupCommits+st.DirectApplies != st.Applies || st.Checkpoints == 0 {
		t.Fatalf("%+v", st)
	}
	if err := storagetest.Compare(s, m); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// Turning the journal off moves its writes into the segments, removes it
// and records format 1; turning it on records format 2 before the journal
// is created.
func TestJournalOnOff(t *testing.T) {
	dir := t.TempDir()
	s := openJournaled(t, dir, storage.DirOptions{JournalBytes: 1 << 20})
	if !strings.Contains(readFormatFile(t, dir), "format 2\n") {
		t.Fatalf("format file of a journaled directory:\n%s", readFormatFile(t, dir))
	}
	m := storage.NewMemory()
	journalWorkload(t, s, m, 20)
	if err := s.Abandon(); err != nil {
		t.Fatal(err)
	}
	s, _, err := storage.OpenDir(dir, journalID, storage.DirOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := storagetest.Compare(s, m); err != nil {
		t.Fatalf("journal off: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, storage.JournalFileName)); !os.IsNotExist(err) {
		t.Fatalf("journal file after turning it off: %v", err)
	}
	if !strings.Contains(readFormatFile(t, dir), "format 1\n") {
		t.Fatalf("format file after turning the journal off:\n%s", readFormatFile(t, dir))
	}
	journalWorkload(t, s, m, 5)
	s.Close()
	s = openJournaled(t, dir, storage.DirOptions{JournalBytes: 1 << 20})
	defer s.Close()
	if err := storagetest.Compare(s, m); err != nil {
		t.Fatal(err)
	}
}

// A directory's storage format: stamped at the first read-write open of
// a directory from before formats were recorded; a newer one refused,
// naming both versions, nothing changed; a damaged one is ErrCorrupt.
func TestStorageFormat(t *testing.T) {
	dir := t.TempDir()
	s, _, err := storage.OpenDir(dir, journalID, storage.DirOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Append(storagetest.Batch(0, 3, 1, 10)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if !strings.Contains(readFormatFile(t, dir), "format 1\n") {
		t.Fatalf("format file of a new directory:\n%s", readFormatFile(t, dir))
	}
	// From before formats: no file. A read-only open leaves it so.
	if err := os.Remove(filepath.Join(dir, storage.FormatFileName)); err != nil {
		t.Fatal(err)
	}
	ro, _, err := storage.OpenDirReadOnly(dir, storage.DirOptions{})
	if err != nil || ro.LEO() != 3 {
		t.Fatalf("read-only open of an unversioned directory: %v", err)
	}
	ro.Close()
	if _, err := os.Stat(filepath.Join(dir, storage.FormatFileName)); !os.IsNotExist(err) {
		t.Fatalf("a read-only open stamped the format: %v", err)
	}
	s, _, err = storage.OpenDir(dir, journalID, storage.DirOptions{})
	if err != nil || s.LEO() != 3 {
		t.Fatalf("open of an unversioned directory: %v", err)
	}
	s.Close()
	if !strings.Contains(readFormatFile(t, dir), "format 1\n") {
		t.Fatalf("format file after stamping:\n%s", readFormatFile(t, dir))
	}

	if err := os.WriteFile(filepath.Join(dir, storage.FormatFileName), storage.EncodeFormat(4), 0o600); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("data directory %s has storage format 4; this build reads formats 1 to 3", dir)
	for name, open := range map[string]func() error{
		"OpenDir": func() error {
			_, _, err := storage.OpenDir(dir, journalID, storage.DirOptions{Journal: true})
			return err
		},
		"OpenDirReadOnly": func() error { _, _, err := storage.OpenDirReadOnly(dir, storage.DirOptions{}); return err },
	} {
		if err := open(); !errors.Is(err, storage.ErrNewerFormat) || !strings.Contains(err.Error(), want) {
			t.Fatalf("%s of a format 4 directory: %v", name, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, storage.JournalFileName)); !os.IsNotExist(err) {
		t.Fatalf("the refused open created a journal: %v", err)
	}

	b := storage.EncodeFormat(2)
	b[len(b)-3] ^= 1 // the checksum
	if err := os.WriteFile(filepath.Join(dir, storage.FormatFileName), b, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := storage.OpenDir(dir, journalID, storage.DirOptions{}); !errors.Is(err, storage.ErrCorrupt) || !strings.Contains(err.Error(), storage.FormatFileName) {
		t.Fatalf("damaged format file: %v", err)
	}
}

// EnableJournal turns the journal on in an open store (what a node does
// once its cluster's feature level allows format 2); DirFormat then says
// format 2, and the next open with the journal replays it.
func TestEnableJournal(t *testing.T) {
	dir := t.TempDir()
	s, _, err := storage.OpenDir(dir, journalID, storage.DirOptions{JournalBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	m := storage.NewMemory()
	journalWorkload(t, s, m, 10)
	if v, err := storage.DirFormat(dir); err != nil || v != 1 {
		t.Fatalf("DirFormat before: %d, %v", v, err)
	}
	for range 2 { // the second is a no-op
		if err := s.EnableJournal(); err != nil {
			t.Fatal(err)
		}
	}
	if v, err := storage.DirFormat(dir); err != nil || v != 2 {
		t.Fatalf("DirFormat after: %d, %v", v, err)
	}
	commits := s.Stats().Commits
	journalWorkload(t, s, m, 10)
	if st := s.Stats(); st.GroupCommits != 10 || st.Commits != commits {
		t.Fatalf("after EnableJournal: %d group commits, %d segment commits (%d before)", st.GroupCommits, st.Commits, commits)
	}
	if err := s.Abandon(); err != nil {
		t.Fatal(err)
	}
	s = openJournaled(t, dir, storage.DirOptions{JournalBytes: 1 << 20})
	if err := storagetest.Compare(s, m); err != nil {
		t.Fatal(err)
	}
	s.Close()
	ro, _, err := storage.OpenDirReadOnly(dir, storage.DirOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if err := ro.EnableJournal(); !errors.Is(err, storage.ErrReadOnly) {
		t.Fatalf("EnableJournal read-only: %v", err)
	}
}

// Readers running beside a writer whose Applies (appends, truncations with
// a new epoch, prefix deletions) are checkpointed all the time (a small
// journal, tiny segments that roll) always read one state of the log:
// contiguous offsets from the one asked, each entry the one its epoch
// wrote, epochs never going down.
func TestJournalConcurrentReads(t *testing.T) {
	s := openJournaled(t, t.TempDir(), storage.DirOptions{JournalBytes: 64 << 10, SegmentBytes: 8 << 10, NoSync: true})
	defer s.Close()
	const size = 200
	stop := make(chan struct{})
	errs := make(chan error, 4)
	done := make(chan struct{})
	reads := make([]int, 3)
	for r := range reads {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				start, leo := s.LogStart(), s.LEO()
				if leo <= start {
					continue
				}
				from := start + uint64(i*7919)%(leo-start)
				es, err := s.Entries(from, 0, 64<<10)
				if errors.Is(err, storage.ErrOutOfRange) {
					continue // a deletion or truncation passed from
				}
				if err != nil {
					errs <- err
					return
				}
				for k, e := range es {
					if e.Offset != from+uint64(k) || string(e.Data) != string(storagetest.Payload(e.Offset, e.Epoch, size)) ||
						(k > 0 && e.Epoch < es[k-1].Epoch) {
						errs <- fmt.Errorf("read from %d: entry %d is offset %d epoch %d (previous epoch %d): not one state of the log",
							from, k, e.Offset, e.Epoch, es[max(k-1, 0)].Epoch)
						return
					}
				}
				reads[r]++
			}
		}()
	}
	epoch := uint64(1)
	for i := 0; i < 1500; i++ {
		leo, start := s.LEO(), s.LogStart()
		var ws []protocol.Write
		switch {
		case i%13 == 12 && leo > start+20:
			epoch++
			ws = []protocol.Write{{Kind: protocol.WriteTruncate, Offset: leo - 15}}
		case i%97 == 96:
			ws = []protocol.Write{{Kind: protocol.WriteDeletePrefix, Offset: start + (leo-start)/2}}
		default:
			ws = []protocol.Write{{Kind: protocol.WriteAppend, Entries: storagetest.Batch(leo, 1+i%8, epoch, size)}}
		}
		if err := s.Apply(ws); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	close(stop)
	for range reads {
		<-done
	}
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Checkpoints < 10 || st.Rolls == 0 {
		t.Fatalf("%d checkpoints, %d rolls: the reads did not run beside checkpoints", st.Checkpoints, st.Rolls)
	}
	t.Logf("reads %v, %+v", reads, s.Stats())
}

// A prefix deletion with the journal unlinks the sealed segments below
// the new log start without waiting for more writes: the checkpoint that
// applies it to the segments runs at once, not when a quarter of the
// journal has filled again (retention would otherwise not bound the
// directory of a log that writes little).
func TestJournalDeletionUnlinksSegmentsWithoutMoreWrites(t *testing.T) {
	dir := t.TempDir()
	opts := storage.DirOptions{SegmentBytes: 16 << 10, JournalBytes: 1 << 20, NoSync: true}
	s := openJournaled(t, dir, opts)
	for i := range 60 {
		if err := s.Append(storagetest.Batch(s.LEO(), 4, 1, 200)); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	// Close checkpoints everything: the segments hold the whole log.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openJournaled(t, dir, opts)
	defer s.Close()
	files := segFiles(t, dir)
	if len(files) < 6 {
		t.Fatalf("only %d sealed segments: %v", len(files), files)
	}
	upTo := s.LEO() - 1
	if err := s.Apply([]protocol.Write{{Kind: protocol.WriteDeletePrefix, Offset: upTo}}); err != nil {
		t.Fatal(err)
	}
	if s.LogStart() != upTo {
		t.Fatalf("log start %d, want %d", s.LogStart(), upTo)
	}
	testwait.WaitFor(t, "the sealed segments below the log start to be unlinked with no write after the deletion", 10*time.Second, func() bool {
		s.Settle()
		return len(segFiles(t, dir)) <= 1
	})
	if st := s.Stats(); st.Checkpoints == 0 || st.JournalLive != 0 {
		t.Fatalf("after the deletion: %+v, want it checkpointed", st)
	}
}
