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

func openTestBolt(t *testing.T, path string) *Bolt {
	t.Helper()
	b, err := OpenBolt(path, DirOptions{})
	if err != nil {
		t.Fatalf("OpenBolt: %v", err)
	}
	return b
}

func ents(from uint64, n int, epoch uint64) []protocol.Entry {
	es := make([]protocol.Entry, n)
	for i := range es {
		es[i] = protocol.Entry{Offset: from + uint64(i), Epoch: epoch, Type: protocol.EntryData, Data: []byte(fmt.Sprintf("e%d", from+uint64(i)))}
	}
	return es
}

// committedTxID returns bbolt's own count of committed write transactions
// (the transaction ID a read transaction sees): independent of BoltStats.
func committedTxID(t *testing.T, b *Bolt) int {
	t.Helper()
	id := 0
	if err := b.db.View(func(tx *bolt.Tx) error { id = tx.ID(); return nil }); err != nil {
		t.Fatal(err)
	}
	return id
}

// A batch of mixed writes (entries, the quorum state, the HW checkpoint, a
// truncation and the appends after it) is one Apply, one bbolt commit (two
// fsyncs) — where the same writes one call each cost one commit apiece.
// Counted twice: by BoltStats and by bbolt's own transaction IDs.
func TestBoltMixedBatchIsOneCommit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log.db")
	b := openTestBolt(t, path)
	batch := []protocol.Write{
		{Kind: protocol.WriteQuorumState, Quorum: protocol.QuorumState{Epoch: 2, VotedFor: "n1", LeaderID: "n1"}},
		{Kind: protocol.WriteAppend, Entries: ents(0, 3, 1)},
		{Kind: protocol.WriteAppend, Entries: ents(3, 2, 2)},
		{Kind: protocol.WriteHWCheckpoint, Offset: 4},
		{Kind: protocol.WriteTruncate, Offset: 4}, // needs the appends before it
		{Kind: protocol.WriteAppend, Entries: ents(4, 2, 2)},
		{Kind: protocol.WriteHWCheckpoint, Offset: 5},
	}
	tx0, st0 := committedTxID(t, b), b.Stats()
	if err := b.Apply(batch); err != nil {
		t.Fatal(err)
	}
	st := b.Stats()
	if d := (BoltStats{Applies: st.Applies - st0.Applies, Writes: st.Writes - st0.Writes, Commits: st.Commits - st0.Commits}); d != (BoltStats{Applies: 1, Writes: 7, Commits: 1}) {
		t.Fatalf("one Apply of 7 mixed writes counted %+v, want 1 Apply, 7 writes, 1 commit", d)
	}
	if n := committedTxID(t, b) - tx0; n != 1 {
		t.Fatalf("bbolt committed %d transactions for one Apply, want 1", n)
	}
	check := func(b *Bolt, when string) {
		t.Helper()
		if b.LEO() != 6 || fmt.Sprint(b.EpochMap()) != "[{1 0} {2 3}]" {
			t.Fatalf("%s: LEO %d, map %v", when, b.LEO(), b.EpochMap())
		}
		if hw, ok, _ := b.HWCheckpoint(); !ok || hw != 5 {
			t.Fatalf("%s: HW checkpoint %d, %v; want 5", when, hw, ok)
		}
		if q, _ := b.QuorumState(); q.LeaderID != "n1" || q.Epoch != 2 {
			t.Fatalf("%s: quorum %+v", when, q)
		}
	}
	check(b, "after Apply")

	// The same writes one call each, as the writer used to hand them:
	// one commit per write.
	tx0, st0 = committedTxID(t, b), b.Stats()
	if err := b.Apply([]protocol.Write{{Kind: protocol.WriteTruncate, Offset: 0}}); err != nil {
		t.Fatal(err)
	}
	for _, w := range batch {
		if err := b.Apply([]protocol.Write{w}); err != nil {
			t.Fatal(err)
		}
	}
	if n, c := committedTxID(t, b)-tx0, b.Stats().Commits-st0.Commits; n != 8 || c != 8 {
		t.Fatalf("8 single-write Applies: %d bbolt transactions, %d commits counted; want 8", n, c)
	}
	check(b, "after the single writes")
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = openTestBolt(t, path)
	defer b.Close()
	check(b, "after reopen")
}

// An invalid write anywhere in a batch rolls the whole batch back: no
// commit, no fsync, nothing changed; a batch of no-ops commits nothing.
func TestBoltInvalidBatchCommitsNothing(t *testing.T) {
	b := openTestBolt(t, filepath.Join(t.TempDir(), "log.db"))
	defer b.Close()
	if err := b.Append(ents(0, 3, 1)); err != nil {
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
		tx0, st0 := committedTxID(t, b), b.Stats()
		err := b.Apply(append(slices.Clone(good), c.w))
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), "write 3 of 3") {
			t.Fatalf("%s: %v, want %v naming write 3 of 3", name, err, c.want)
		}
		if n := committedTxID(t, b) - tx0; n != 0 || b.Stats().Commits != st0.Commits {
			t.Fatalf("%s: %d transactions committed", name, n)
		}
		if b.LEO() != 3 || b.LastEpoch() != 1 {
			t.Fatalf("%s: LEO %d, last epoch %d: the batch was partly applied", name, b.LEO(), b.LastEpoch())
		}
	}
	tx0 := committedTxID(t, b)
	noops := []protocol.Write{{Kind: protocol.WriteAppend}, {Kind: protocol.WriteTruncate, Offset: 3}, {Kind: protocol.WriteDeletePrefix, Offset: 0}}
	if err := b.Apply(noops); err != nil {
		t.Fatal(err)
	}
	if err := b.Apply(nil); err != nil {
		t.Fatal(err)
	}
	if n := committedTxID(t, b) - tx0; n != 0 {
		t.Fatalf("no-op batches committed %d transactions, want 0", n)
	}
	// Positive control: the good writes alone commit.
	if err := b.Apply(good); err != nil || b.LEO() != 5 || committedTxID(t, b)-tx0 != 1 {
		t.Fatalf("good batch: %v, LEO %d", err, b.LEO())
	}
}

// The store merges nothing: concurrent Apply calls are serialized, each in
// its own transaction (group commit is the caller's job), and all land.
func TestBoltConcurrentAppliesSerialized(t *testing.T) {
	b := openTestBolt(t, filepath.Join(t.TempDir(), "log.db"))
	defer b.Close()
	const writers, each = 8, 20
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				q := protocol.QuorumState{Epoch: uint64(w*each + i + 1)}
				if err := b.Apply([]protocol.Write{{Kind: protocol.WriteQuorumState, Quorum: q}}); err != nil {
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
	if st := b.Stats(); st.Applies != writers*each || st.Commits != writers*each {
		t.Fatalf("stats %+v: want %d Applies in %d commits", st, writers*each, writers*each)
	}
}

// Readers never wait for Apply: while a write holds the store's write
// lock, Entries and the in-memory answers still return.
func TestBoltReadsDoNotWaitForApply(t *testing.T) {
	b := openTestBolt(t, filepath.Join(t.TempDir(), "log.db"))
	defer b.Close()
	if err := b.Append(ents(0, 3, 1)); err != nil {
		t.Fatal(err)
	}
	b.mu.Lock() // as an Apply in progress does
	done := make(chan error, 1)
	go func() {
		es, err := b.Entries(0, 0, 1000)
		if err == nil && (len(es) != 3 || b.LEO() != 3) {
			err = fmt.Errorf("read %d entries, LEO %d", len(es), b.LEO())
		}
		if _, qerr := b.QuorumState(); err == nil {
			err = qerr
		}
		done <- err
	}()
	select {
	case err := <-done:
		b.mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		b.mu.Unlock()
		t.Fatal("a read waited for the write lock")
	}
}

// A failed commit latches: that Apply and every later one fail, nothing is
// applied, and the store must be reopened.
func TestBoltFailedCommitLatches(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log.db")
	b := openTestBolt(t, path)
	if err := b.Append(ents(0, 3, 1)); err != nil {
		t.Fatal(err)
	}
	// Make bbolt's page writes fail: its file descriptor is closed under it.
	if err := b.file.Close(); err != nil {
		t.Fatal(err)
	}
	err := b.Apply([]protocol.Write{{Kind: protocol.WriteAppend, Entries: ents(3, 2, 1)}, {Kind: protocol.WriteHWCheckpoint, Offset: 5}})
	if err == nil || !strings.Contains(err.Error(), "commit") {
		t.Fatalf("Apply on a broken file: %v, want a commit error", err)
	}
	if b.LEO() != 3 {
		t.Fatalf("LEO %d after a failed commit, want 3", b.LEO())
	}
	applies := b.Stats().Applies
	err2 := b.Apply([]protocol.Write{{Kind: protocol.WriteQuorumState, Quorum: protocol.QuorumState{Epoch: 1}}})
	if err2 == nil || !strings.Contains(err2.Error(), "refuses writes after a failed commit") || !errors.Is(err2, errors.Unwrap(err)) {
		t.Fatalf("Apply after a failed commit: %v, want the latched failure", err2)
	}
	if b.Stats().Applies != applies {
		t.Fatal("an Apply ran a transaction after a failed commit")
	}
	_ = b.Close() // the file is gone from under bbolt: the error does not matter
}

// flipStored changes one byte of the stored value of offset off directly
// through bbolt.
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

func TestBoltCorruptionDetectedOnRead(t *testing.T) {
	for _, at := range []int{0, 1, 2, 5, 6, 7, 9} { // version, type, CRC, epoch, payload
		t.Run(fmt.Sprint("byte", at), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "log.db")
			b := openTestBolt(t, path)
			if err := b.Append(ents(0, 10, 1)); err != nil {
				t.Fatal(err)
			}
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			flipStored(t, path, 5, at)
			b = openTestBolt(t, path) // open only spot-checks the ends
			defer b.Close()
			for _, from := range []uint64{0, 3, 5} {
				es, err := b.Entries(from, 0, 1000)
				if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "offset 5") || es != nil {
					t.Fatalf("Entries(%d) = %d entries, %v; want ErrCorrupt naming offset 5", from, len(es), err)
				}
			}
			// Entries before and after it still read.
			if es, err := b.Entries(0, 5, 1000); err != nil || len(es) != 5 {
				t.Fatalf("Entries(0, 5) = %d, %v", len(es), err)
			}
			if es, err := b.Entries(6, 0, 1000); err != nil || len(es) != 4 {
				t.Fatalf("Entries(6) = %d, %v", len(es), err)
			}
		})
	}
}

func TestBoltOpenDetectsCorruption(t *testing.T) {
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
			path := filepath.Join(t.TempDir(), "log.db")
			b := openTestBolt(t, path)
			if err := b.Append(append(ents(0, 5, 1), ents(5, 5, 2)...)); err != nil {
				t.Fatal(err)
			}
			if err := b.SetQuorumState(protocol.QuorumState{Epoch: 2, VotedFor: "a"}); err != nil {
				t.Fatal(err)
			}
			if err := b.Close(); err != nil {
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
			b, err = OpenBolt(path, DirOptions{})
			if err == nil {
				b.Close()
				t.Fatal("OpenBolt succeeded on a corrupt file")
			}
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) {
				t.Fatalf("OpenBolt: %v; want ErrCorrupt naming the file", err)
			}
		})
	}
}

func TestBoltOpenNotABoltFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log.db")
	if err := os.WriteFile(path, bytes.Repeat([]byte("not a bbolt file "), 1000), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := OpenBolt(path, DirOptions{})
	if err == nil {
		b.Close()
		t.Fatal("OpenBolt succeeded on a file that is not a bbolt file")
	}
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) {
		t.Fatalf("OpenBolt: %v; want ErrCorrupt naming the file", err)
	}
}

func TestBoltLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log.db")
	b := openTestBolt(t, path)
	b2, err := OpenBolt(path, DirOptions{Timeout: 50 * time.Millisecond})
	if err == nil {
		b2.Close()
		t.Fatal("second OpenBolt on a held file succeeded")
	}
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), path) {
		t.Fatalf("second OpenBolt: %v; want ErrLocked naming %s", err, path)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b2 = openTestBolt(t, path)
	if err := b2.Close(); err != nil {
		t.Fatal(err)
	}
}

// Entries left below the log start (a crash before the cleanup finished)
// are invisible, and the next Apply's transaction deletes them (no commit
// of its own).
func TestBoltCleanupAfterOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log.db")
	b := openTestBolt(t, path)
	if err := b.Append(ents(0, 100, 1)); err != nil {
		t.Fatal(err)
	}
	if err := b.DeletePrefix(60); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	// Put back entries below the log start, as if the cleanup had not run.
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for i := range ents(0, 60, 1) {
			e := ents(uint64(i), 1, 1)[0]
			if err := tx.Bucket(bucketEntries).Put(u64key(e.Offset), appendEntry(nil, &e)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	b = openTestBolt(t, path)
	defer b.Close()
	if b.LogStart() != 60 || b.LEO() != 100 {
		t.Fatalf("start %d, LEO %d", b.LogStart(), b.LEO())
	}
	if _, err := b.Entries(10, 1, 100); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("Entries(10) = %v, want ErrOutOfRange", err)
	}
	if n := countBelow(t, b, 60); n != 60 {
		t.Fatalf("%d entries below the log start after open, want the 60 put back", n)
	}
	if err := b.SetQuorumState(protocol.QuorumState{Epoch: 1}); err != nil {
		t.Fatal(err)
	}
	if n := countBelow(t, b, 60); n != 0 {
		t.Fatalf("%d entries still below the log start", n)
	}
	if st := b.Stats(); st.CleanupCommits != 1 || st.Commits != 1 {
		t.Fatalf("stats %+v: want the cleanup inside the Apply's one commit", st)
	}
}

// countBelow counts the entry keys below off, directly in bbolt.
func countBelow(t *testing.T, b *Bolt, off uint64) int {
	t.Helper()
	n := 0
	err := b.db.View(func(tx *bolt.Tx) error {
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

// A large prefix deletion is paid off in chunks: its own transaction and
// each later Apply's delete up to cleanupChunk entries, then nothing more.
func TestBoltCleanupInChunks(t *testing.T) {
	b := openTestBolt(t, filepath.Join(t.TempDir(), "log.db"))
	defer b.Close()
	n := 2*cleanupChunk + 500
	if err := b.Append(ents(0, n, 1)); err != nil {
		t.Fatal(err)
	}
	upTo := uint64(n - 10)
	if err := b.DeletePrefix(upTo); err != nil {
		t.Fatal(err)
	}
	for i, want := range []int{n - 10 - cleanupChunk, n - 10 - 2*cleanupChunk, 0} {
		if got := countBelow(t, b, upTo); got != want {
			t.Fatalf("after %d Applies: %d entries below the log start, want %d", i+1, got, want)
		}
		if err := b.SetHWCheckpoint(uint64(n)); err != nil {
			t.Fatal(err)
		}
	}
	if st := b.Stats(); st.CleanupCommits != 3 || st.Commits != 5 {
		t.Fatalf("stats %+v: want 3 cleanup chunks inside 5 commits", st)
	}
}
