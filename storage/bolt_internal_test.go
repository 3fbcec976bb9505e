package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/replog-io/replog/protocol"
)

func openTestBolt(t *testing.T, path string) *Bolt {
	t.Helper()
	b, err := OpenBolt(path, BoltOptions{})
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

// Requests queued while the writer is busy are merged into one transaction
// and applied in order, each validated against the state the earlier ones
// leave; an invalid one fails alone.
func TestBoltGroupCommitOrderAndIsolation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log.db")
	b := openTestBolt(t, path)
	// Hold bbolt's writer lock so the writer goroutine blocks and the
	// requests pile up in order.
	tx, err := b.db.Begin(true)
	if err != nil {
		t.Fatal(err)
	}
	reqs := []*request{
		{kind: opAppend, entries: ents(0, 3, 1)}, // ok: LEO 3
		{kind: opAppend, entries: ents(5, 1, 1)}, // gap
		{kind: opAppend, entries: ents(3, 1, 2)}, // ok (needs the first): LEO 4
		{kind: opHW, n: 4},                       // ok (needs the third)
		{kind: opHW, n: 10},                      // above LEO
		{kind: opTruncate, n: 2},                 // ok: LEO 2, map [(1,0)], HW 2
		{kind: opAppend, entries: ents(2, 2, 3)}, // ok: LEO 4, map [(1,0),(3,2)]
		{kind: opAppend, entries: ents(2, 1, 3)}, // overlap
		{kind: opQuorum, qs: protocol.QuorumState{Epoch: 3, VotedFor: "n2", LeaderID: "n2"}},            // ok
		{kind: opAppend, entries: []protocol.Entry{{Offset: 4, Epoch: 3, Type: protocol.EntryType(7)}}}, // bad type
		{kind: opDeletePrefix, n: 1}, // ok
		{kind: opAppend, entries: []protocol.Entry{{Offset: 4, Epoch: 2, Type: protocol.EntryData}}}, // epoch going down
	}
	wantErr := []error{nil, ErrInvalidAppend, nil, nil, ErrOutOfRange, nil, nil, ErrInvalidAppend, nil, ErrInvalidAppend, nil, ErrInvalidAppend}
	for _, r := range reqs {
		if !b.enqueue(r) {
			t.Fatal("enqueue failed")
		}
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	for i, r := range reqs {
		err := b.wait(r)
		if (wantErr[i] == nil) != (err == nil) || (err != nil && !errors.Is(err, wantErr[i])) {
			t.Errorf("request %d: err = %v, want %v", i, err, wantErr[i])
		}
	}
	st := b.Stats()
	// The writer may have taken the first request before the others were
	// queued: at most two transactions.
	if st.Writes != uint64(len(reqs)) || st.Commits > 2 {
		t.Fatalf("stats %+v: want %d writes in at most 2 commits", st, len(reqs))
	}
	check := func(b *Bolt, when string) {
		t.Helper()
		if b.LEO() != 4 || b.LogStart() != 1 || fmt.Sprint(b.EpochMap()) != "[{1 1} {3 2}]" {
			t.Fatalf("%s: LEO %d, start %d, map %v", when, b.LEO(), b.LogStart(), b.EpochMap())
		}
		if hw, ok, _ := b.HWCheckpoint(); !ok || hw != 2 {
			t.Fatalf("%s: HW checkpoint %d, %v; want 2", when, hw, ok)
		}
		if q, _ := b.QuorumState(); q.LeaderID != "n2" {
			t.Fatalf("%s: quorum %+v", when, q)
		}
		es, err := b.Entries(1, 0, 1000)
		if err != nil || len(es) != 3 || es[1].Epoch != 3 || es[2].Offset != 3 {
			t.Fatalf("%s: entries %+v, %v", when, es, err)
		}
	}
	check(b, "after commit")
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = openTestBolt(t, path)
	defer b.Close()
	check(b, "after reopen")
}

// Many concurrent writers: fewer transactions than calls.
func TestBoltGroupCommitMerges(t *testing.T) {
	b := openTestBolt(t, filepath.Join(t.TempDir(), "log.db"))
	defer b.Close()
	tx, err := b.db.Begin(true)
	if err != nil {
		t.Fatal(err)
	}
	const n = 50
	done := make(chan error, n)
	var queued atomic.Int32
	for i := 0; i < n; i++ {
		go func() {
			r := &request{kind: opQuorum, qs: protocol.QuorumState{Epoch: uint64(i)}}
			if !b.enqueue(r) {
				done <- ErrClosed
				return
			}
			queued.Add(1)
			done <- b.wait(r)
		}()
	}
	// Wait until they are all queued (the writer has taken some of them
	// and is blocked on the writer lock with that batch).
	deadline := time.Now().Add(60 * time.Second)
	for queued.Load() < n && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	_ = tx.Rollback()
	for i := 0; i < n; i++ {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if st := b.Stats(); st.Writes != n || st.Commits > 2 {
		t.Fatalf("stats %+v: want %d writes in at most 2 commits", st, n)
	}
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
			b, err = OpenBolt(path, BoltOptions{})
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
	b, err := OpenBolt(path, BoltOptions{})
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
	b2, err := OpenBolt(path, BoltOptions{Timeout: 50 * time.Millisecond})
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
// are invisible and deleted after open.
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
	countBelow := func() int {
		n := 0
		_ = b.db.View(func(tx *bolt.Tx) error {
			c := tx.Bucket(bucketEntries).Cursor()
			for k, _ := c.First(); k != nil && binary.BigEndian.Uint64(k) < 60; k, _ = c.Next() {
				n++
			}
			return nil
		})
		return n
	}
	deadline := time.Now().Add(30 * time.Second)
	for countBelow() > 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := countBelow(); n != 0 {
		t.Fatalf("%d entries still below the log start", n)
	}
	if b.Stats().CleanupCommits == 0 {
		t.Fatal("no cleanup transaction counted")
	}
}

// Appends from many goroutines, each queued in offset order (a mutex covers
// reserving offsets and queueing, not the wait), are all applied and merged
// into fewer transactions than calls.
func TestBoltConcurrentAppendsMerged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log.db")
	b := openTestBolt(t, path)
	const writers, each = 16, 25
	var (
		mu   sync.Mutex
		next uint64
		wg   sync.WaitGroup
	)
	errs := make(chan error, writers*each)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				mu.Lock()
				n := 1 + (w+i)%3
				r := &request{kind: opAppend, entries: ents(next, n, 1)}
				next += uint64(n)
				ok := b.enqueue(r)
				mu.Unlock()
				if !ok {
					errs <- ErrClosed
					return
				}
				if err := b.wait(r); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	st := b.Stats()
	t.Logf("%d appends in %d transactions", st.Writes, st.Commits)
	if st.Writes != writers*each || st.Commits >= st.Writes {
		t.Fatalf("stats %+v: want %d writes merged into fewer transactions", st, writers*each)
	}
	if b.LEO() != next {
		t.Fatalf("LEO %d, want %d", b.LEO(), next)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = openTestBolt(t, path)
	defer b.Close()
	es, err := b.Entries(0, 0, 1<<30)
	if err != nil || uint64(len(es)) != next {
		t.Fatalf("after reopen: %d entries, %v; want %d", len(es), err, next)
	}
	for i, e := range es {
		if want := fmt.Sprintf("e%d", i); string(e.Data) != want {
			t.Fatalf("entry %d holds %q, want %q", i, e.Data, want)
		}
	}
}
