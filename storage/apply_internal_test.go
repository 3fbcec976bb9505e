package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/replog-io/replog/protocol"
)

// oneSegment is a DirOptions.SegmentBytes larger than the logs of the
// tests that use it: the store never rolls, the whole log is in its active
// file (and the file grows in small steps: a sixteenth of it).
const oneSegment = 4 << 20

// testID is the identity of the tests' directories.
var testID = Identity{ClusterID: "c", NodeID: "n"}

// openOneSegment opens the data directory dir with one segment.
func openOneSegment(t testing.TB, dir string) *DirStore {
	t.Helper()
	d, _, err := OpenDir(dir, testID, DirOptions{SegmentBytes: oneSegment})
	if err != nil {
		t.Fatalf("OpenDir: %v", err)
	}
	return d
}

func ents(from uint64, n int, epoch uint64) []protocol.Entry {
	es := make([]protocol.Entry, n)
	for i := range es {
		es[i] = protocol.Entry{Offset: from + uint64(i), Epoch: epoch, Type: protocol.EntryData, Data: []byte(fmt.Sprintf("e%d", from+uint64(i)))}
	}
	return es
}

// committedTxID returns bbolt's own count of committed write transactions
// of d's active file (the transaction ID a read transaction sees):
// independent of DirStats.
func committedTxID(t *testing.T, d *DirStore) int {
	t.Helper()
	id := 0
	if err := d.state.Load().active.db.View(func(tx *bolt.Tx) error { id = tx.ID(); return nil }); err != nil {
		t.Fatal(err)
	}
	return id
}

// A batch of mixed writes (entries, the quorum state, the HW checkpoint, a
// truncation and the appends after it) is one Apply, one bbolt commit (two
// fsyncs) — where the same writes one call each cost one commit apiece.
// Counted twice: by DirStats and by bbolt's own transaction IDs.
func TestDirMixedBatchIsOneCommit(t *testing.T) {
	dir := t.TempDir()
	d := openOneSegment(t, dir)
	batch := []protocol.Write{
		{Kind: protocol.WriteQuorumState, Quorum: protocol.QuorumState{Epoch: 2, VotedFor: "n1", LeaderID: "n1"}},
		{Kind: protocol.WriteAppend, Entries: ents(0, 3, 1)},
		{Kind: protocol.WriteAppend, Entries: ents(3, 2, 2)},
		{Kind: protocol.WriteHWCheckpoint, Offset: 4},
		{Kind: protocol.WriteTruncate, Offset: 4}, // needs the appends before it
		{Kind: protocol.WriteAppend, Entries: ents(4, 2, 2)},
		{Kind: protocol.WriteHWCheckpoint, Offset: 5},
	}
	tx0, st0 := committedTxID(t, d), d.Stats()
	if err := d.Apply(batch); err != nil {
		t.Fatal(err)
	}
	st := d.Stats()
	if a, w, c := st.Applies-st0.Applies, st.Writes-st0.Writes, st.Commits-st0.Commits; a != 1 || w != 7 || c != 1 {
		t.Fatalf("one Apply of 7 mixed writes counted %d Applies, %d writes, %d commits; want 1, 7, 1", a, w, c)
	}
	if n := committedTxID(t, d) - tx0; n != 1 {
		t.Fatalf("bbolt committed %d transactions for one Apply, want 1", n)
	}
	check := func(d *DirStore, when string) {
		t.Helper()
		if d.LEO() != 6 || fmt.Sprint(d.EpochMap()) != "[{1 0} {2 3}]" {
			t.Fatalf("%s: LEO %d, map %v", when, d.LEO(), d.EpochMap())
		}
		if hw, ok, _ := d.HWCheckpoint(); !ok || hw != 5 {
			t.Fatalf("%s: HW checkpoint %d, %v; want 5", when, hw, ok)
		}
		if q, _ := d.QuorumState(); q.LeaderID != "n1" || q.Epoch != 2 {
			t.Fatalf("%s: quorum %+v", when, q)
		}
	}
	check(d, "after Apply")

	// The same writes one call each, as the writer used to hand them:
	// one commit per write.
	tx0, st0 = committedTxID(t, d), d.Stats()
	if err := d.Apply([]protocol.Write{{Kind: protocol.WriteTruncate, Offset: 0}}); err != nil {
		t.Fatal(err)
	}
	for _, w := range batch {
		if err := d.Apply([]protocol.Write{w}); err != nil {
			t.Fatal(err)
		}
	}
	if n, c := committedTxID(t, d)-tx0, d.Stats().Commits-st0.Commits; n != 8 || c != 8 {
		t.Fatalf("8 single-write Applies: %d bbolt transactions, %d commits counted; want 8", n, c)
	}
	check(d, "after the single writes")
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d = openOneSegment(t, dir)
	defer d.Close()
	check(d, "after reopen")
}

// An invalid write anywhere in a batch rolls the whole batch back: no
// commit, no fsync, nothing changed; a batch of no-ops commits nothing.
func TestDirInvalidBatchCommitsNothing(t *testing.T) {
	d := openOneSegment(t, t.TempDir())
	defer d.Close()
	if err := d.Append(ents(0, 3, 1)); err != nil {
		t.Fatal(err)
	}
	good := []protocol.Write{
		{Kind: protocol.WriteQuorumState, Quorum: protocol.QuorumState{Epoch: 3}},
		{Kind: protocol.WriteAppend, Entries: ents(3, 2, 3)},
	}
	bad := map[string]struct {
		w    protocol.Write
		want error
	}{
		"gap":              {protocol.Write{Kind: protocol.WriteAppend, Entries: ents(9, 1, 3)}, ErrInvalidAppend},
		"epoch going down": {protocol.Write{Kind: protocol.WriteAppend, Entries: ents(5, 1, 2)}, ErrInvalidAppend},
		"HW above LEO":     {protocol.Write{Kind: protocol.WriteHWCheckpoint, Offset: 6}, ErrOutOfRange},
		"unknown kind":     {protocol.Write{Kind: 99}, ErrInvalidWrite},
	}
	for name, c := range bad {
		tx0, st0 := committedTxID(t, d), d.Stats()
		err := d.Apply(append(slices.Clone(good), c.w))
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), "write 3 of 3") {
			t.Fatalf("%s: %v, want %v naming write 3 of 3", name, err, c.want)
		}
		if n := committedTxID(t, d) - tx0; n != 0 || d.Stats().Commits != st0.Commits {
			t.Fatalf("%s: %d transactions committed", name, n)
		}
		if d.LEO() != 3 || d.LastEpoch() != 1 {
			t.Fatalf("%s: LEO %d, last epoch %d: the batch was partly applied", name, d.LEO(), d.LastEpoch())
		}
	}
	tx0 := committedTxID(t, d)
	noops := []protocol.Write{{Kind: protocol.WriteAppend}, {Kind: protocol.WriteTruncate, Offset: 3}, {Kind: protocol.WriteDeletePrefix, Offset: 0}}
	if err := d.Apply(noops); err != nil {
		t.Fatal(err)
	}
	if err := d.Apply(nil); err != nil {
		t.Fatal(err)
	}
	if n := committedTxID(t, d) - tx0; n != 0 {
		t.Fatalf("no-op batches committed %d transactions, want 0", n)
	}
	// Positive control: the good writes alone commit.
	if err := d.Apply(good); err != nil || d.LEO() != 5 || committedTxID(t, d)-tx0 != 1 {
		t.Fatalf("good batch: %v, LEO %d", err, d.LEO())
	}
}

// The store merges nothing: concurrent Apply calls are serialized, each in
// its own transaction (group commit is the caller's job), and all land.
func TestDirConcurrentAppliesSerialized(t *testing.T) {
	d := openOneSegment(t, t.TempDir())
	defer d.Close()
	const writers, each = 8, 20
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				q := protocol.QuorumState{Epoch: uint64(w*each + i + 1)}
				if err := d.Apply([]protocol.Write{{Kind: protocol.WriteQuorumState, Quorum: q}}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if st := d.Stats(); st.Applies != writers*each || st.Commits != writers*each {
		t.Fatalf("stats %+v: want %d Applies in %d commits", st, writers*each, writers*each)
	}
}

// Readers never wait for Apply: while a write holds the store's write
// lock, Entries and the in-memory answers still return.
func TestDirReadsDoNotWaitForApply(t *testing.T) {
	d := openOneSegment(t, t.TempDir())
	defer d.Close()
	if err := d.Append(ents(0, 3, 1)); err != nil {
		t.Fatal(err)
	}
	d.mu.Lock() // as an Apply in progress does
	done := make(chan error, 1)
	go func() {
		es, err := d.Entries(0, 0, 1000)
		if err == nil && (len(es) != 3 || d.LEO() != 3) {
			err = fmt.Errorf("read %d entries, LEO %d", len(es), d.LEO())
		}
		if _, qerr := d.QuorumState(); err == nil {
			err = qerr
		}
		done <- err
	}()
	select {
	case err := <-done:
		d.mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		d.mu.Unlock()
		t.Fatal("a read waited for the write lock")
	}
}

// flipStored changes one byte of the stored value of offset off directly
// through bbolt, in the bbolt file at path.
func flipStored(t *testing.T, path string, off uint64, at int) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error {
		bk := tx.Bucket(bucketEntries)
		v := bytes.Clone(bk.Get(u64key(off)))
		if v == nil {
			return fmt.Errorf("no entry at %d", off)
		}
		v[at%len(v)] ^= 0x40
		return bk.Put(u64key(off), v)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestDirCorruptionDetectedOnRead(t *testing.T) {
	for _, at := range []int{0, 1, 2, 5, 6, 7, 9} { // version, type, CRC, epoch, payload
		t.Run(fmt.Sprint("byte", at), func(t *testing.T) {
			dir := t.TempDir()
			d := openOneSegment(t, dir)
			if err := d.Append(ents(0, 10, 1)); err != nil {
				t.Fatal(err)
			}
			if err := d.Close(); err != nil {
				t.Fatal(err)
			}
			flipStored(t, filepath.Join(dir, DataFileName), 5, at)
			d = openOneSegment(t, dir) // open only spot-checks the ends
			defer d.Close()
			for _, from := range []uint64{0, 3, 5} {
				es, err := d.Entries(from, 0, 1000)
				if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "offset 5") || es != nil {
					t.Fatalf("Entries(%d) = %d entries, %v; want ErrCorrupt naming offset 5", from, len(es), err)
				}
			}
			// Entries before and after it still read.
			if es, err := d.Entries(0, 5, 1000); err != nil || len(es) != 5 {
				t.Fatalf("Entries(0, 5) = %d, %v", len(es), err)
			}
			if es, err := d.Entries(6, 0, 1000); err != nil || len(es) != 4 {
				t.Fatalf("Entries(6) = %d, %v", len(es), err)
			}
		})
	}
}

func TestDirOpenDetectsCorruption(t *testing.T) {
	cases := map[string]func(tx *bolt.Tx) error{
		"last entry flipped": func(tx *bolt.Tx) error {
			bk := tx.Bucket(bucketEntries)
			v := bytes.Clone(bk.Get(u64key(9)))
			v[len(v)-1] ^= 1
			return bk.Put(u64key(9), v)
		},
		"epoch map disagrees with last entry": func(tx *bolt.Tx) error {
			return tx.Bucket(bucketEpochs).Put(u64key(3), u64key(9)) // (3, 9): entry 9 has epoch 2
		},
		"epoch map row above LEO": func(tx *bolt.Tx) error {
			return tx.Bucket(bucketEpochs).Put(u64key(4), u64key(11))
		},
		"epoch map out of order": func(tx *bolt.Tx) error {
			return tx.Bucket(bucketEpochs).Put(u64key(1), u64key(7))
		},
		"entry missing at log start": func(tx *bolt.Tx) error {
			return tx.Bucket(bucketEntries).Delete(u64key(0))
		},
		"unknown format": func(tx *bolt.Tx) error {
			return tx.Bucket(bucketMeta).Put(keyFormat, []byte{9})
		},
		"bad log start": func(tx *bolt.Tx) error {
			return tx.Bucket(bucketMeta).Put(keyLogStart, []byte{1, 2})
		},
		"HW above LEO": func(tx *bolt.Tx) error {
			return tx.Bucket(bucketMeta).Put(keyHW, u64key(11))
		},
		"quorum state flipped": func(tx *bolt.Tx) error {
			v := bytes.Clone(tx.Bucket(bucketQuorum).Get(keyQuorum))
			v[1] ^= 1
			return tx.Bucket(bucketQuorum).Put(keyQuorum, v)
		},
	}
	for name, corrupt := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, DataFileName)
			d := openOneSegment(t, dir)
			if err := d.Append(append(ents(0, 5, 1), ents(5, 5, 2)...)); err != nil {
				t.Fatal(err)
			}
			if err := d.SetQuorumState(protocol.QuorumState{Epoch: 2, VotedFor: "a"}); err != nil {
				t.Fatal(err)
			}
			if err := d.Close(); err != nil {
				t.Fatal(err)
			}
			d = openOneSegment(t, dir) // positive control
			if err := d.Close(); err != nil {
				t.Fatal(err)
			}
			db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if err := db.Update(corrupt); err != nil {
				t.Fatal(err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			d, _, err = OpenDir(dir, testID, DirOptions{SegmentBytes: oneSegment})
			if err == nil {
				d.Close()
				t.Fatal("OpenDir succeeded on a corrupt active file")
			}
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) {
				t.Fatalf("OpenDir: %v; want ErrCorrupt naming the file", err)
			}
		})
	}
}

// An active file that is not a bbolt file is refused, in a directory with
// its identity and in one without (a legacy directory is not adopted).
func TestDirOpenNotABoltFile(t *testing.T) {
	for _, withIdentity := range []bool{true, false} {
		t.Run(fmt.Sprintf("identity=%v", withIdentity), func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, DataFileName)
			if withIdentity {
				openOneSegment(t, dir).Close()
			}
			if err := os.WriteFile(path, bytes.Repeat([]byte("not a bbolt file "), 1000), 0o600); err != nil {
				t.Fatal(err)
			}
			d, _, err := OpenDir(dir, testID, DirOptions{})
			if err == nil {
				d.Close()
				t.Fatal("OpenDir succeeded on a file that is not a bbolt file")
			}
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) {
				t.Fatalf("OpenDir: %v; want ErrCorrupt naming the file", err)
			}
			if _, err := os.Stat(filepath.Join(dir, IdentityFileName)); !withIdentity && !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("an identity was written for a refused directory: %v", err)
			}
		})
	}
}

// A second OpenDir of a held directory fails with ErrLocked naming it; once
// the first store is closed, it opens.
func TestDirLocked(t *testing.T) {
	dir := t.TempDir()
	d := openOneSegment(t, dir)
	d2, _, err := OpenDir(dir, testID, DirOptions{Timeout: 50 * time.Millisecond})
	if err == nil {
		d2.Close()
		t.Fatal("second OpenDir on a held directory succeeded")
	}
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("second OpenDir: %v; want ErrLocked naming %s", err, dir)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d2 = openOneSegment(t, dir)
	if err := d2.Close(); err != nil {
		t.Fatal(err)
	}
}

// countBelow counts the entry keys below off in d's active file, directly
// in bbolt.
func countBelow(t *testing.T, d *DirStore, off uint64) int {
	t.Helper()
	n := 0
	err := d.state.Load().active.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketEntries).Cursor()
		for k, _ := c.First(); k != nil && binary.BigEndian.Uint64(k) < off; k, _ = c.Next() {
			n++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Entries below the log start in the active file (a prefix deletion inside
// it: the segment's space is freed when the segment goes whole, not entry
// by entry) are never visible, before or after a reopen, and the deletion
// is one commit however many entries it drops.
func TestDirEntriesBelowLogStartInvisible(t *testing.T) {
	dir := t.TempDir()
	d := openOneSegment(t, dir)
	n := 25000
	for off := 0; off < n; off += 5000 {
		if err := d.Append(ents(uint64(off), 5000, 1)); err != nil {
			t.Fatal(err)
		}
	}
	upTo := uint64(n - 10)
	c0 := d.Stats().Commits
	if err := d.DeletePrefix(upTo); err != nil {
		t.Fatal(err)
	}
	if c := d.Stats().Commits - c0; c != 1 {
		t.Fatalf("a prefix deletion of %d entries took %d commits, want 1", upTo, c)
	}
	for _, when := range []string{"after the deletion", "after reopen"} {
		if d.LogStart() != upTo || d.LEO() != uint64(n) {
			t.Fatalf("%s: start %d, LEO %d", when, d.LogStart(), d.LEO())
		}
		if _, err := d.Entries(10, 1, 100); !errors.Is(err, ErrOutOfRange) {
			t.Fatalf("%s: Entries(10) = %v, want ErrOutOfRange", when, err)
		}
		if es, err := d.Entries(upTo, 0, 1<<20); err != nil || len(es) != 10 || es[0].Offset != upTo {
			t.Fatalf("%s: Entries(%d) = %d entries, %v", when, upTo, len(es), err)
		}
		if got := countBelow(t, d, upTo); got != int(upTo) {
			t.Fatalf("%s: %d entries below the log start in the file, want the %d deleted (kept until the segment goes)", when, got, upTo)
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
		d = openOneSegment(t, dir)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
}
