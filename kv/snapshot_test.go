package kv_test

import (
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/replog-io/replog"
	"github.com/replog-io/replog/kv"
)

// waitFor polls cond (the KV's apply loop works in its own goroutine)
// until it holds, failing the test after a while.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestSnapshotSurvivesRetention: with RetainUntilSnapshot, the log start
// moves past old entries (up to the KV's newest snapshot) and a KV
// reopened on the node, on a reopened Log, still has every key, at its
// revision, from the snapshot and the entries after it.
func TestSnapshotSurvivesRetention(t *testing.T) {
	dir := t.TempDir()
	ctx := testCtx(t)
	l := openLog(t, dir, true)
	s := openKV(t, l, kv.Options{SnapshotEveryEntries: 5})
	want := map[string]kv.Entry{}
	for i := range 23 {
		key := fmt.Sprintf("k%02d", i%11) // some keys set more than once
		rev, err := s.Put(ctx, key, []byte(fmt.Sprint(i)))
		if err != nil {
			t.Fatal(err)
		}
		want[key] = kv.Entry{Key: key, Value: []byte(fmt.Sprint(i)), Revision: rev}
	}
	if _, err := s.Delete(ctx, "k03"); err != nil {
		t.Fatal(err)
	}
	delete(want, "k03")
	waitFor(t, "a snapshot", func() bool { return s.Stats().Snapshots >= 4 })
	snaps := l.Snapshots()
	if len(snaps) == 0 {
		t.Fatal("the KV saved no snapshot")
	}
	// Retention asks for everything committed; RetainUntilSnapshot stops
	// it at the newest snapshot.
	ls, err := l.DeleteBefore(ctx, l.Status().ReadableHW)
	if err != nil {
		t.Fatal(err)
	}
	if ls == 0 || ls > snaps[0].Offset {
		t.Fatalf("log start %d: want it moved, up to the snapshot at %d", ls, snaps[0].Offset)
	}
	total := s.Stats().Applied
	s.Close()
	l.Close()

	l = openLog(t, dir, true)
	defer l.Close()
	if l.Status().LogStart != ls {
		t.Fatalf("reopened log start %d, want %d", l.Status().LogStart, ls)
	}
	s = openKV(t, l, kv.Options{})
	if err := s.Barrier(ctx); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Applied >= total || st.Restored != l.Snapshots()[0].Offset {
		t.Errorf("reopened KV applied %d operations (%d were written), restored at %d: want fewer, from the newest snapshot at %d", st.Applied, total, st.Restored, l.Snapshots()[0].Offset)
	}
	if got := s.Keys(""); len(got) != len(want) {
		t.Errorf("keys %v, want %d", got, len(want))
	}
	for key, w := range want {
		e, err := s.Get(key)
		if err != nil || string(e.Value) != string(w.Value) || e.Revision != w.Revision {
			t.Errorf("%s: got %+v, %v; want %+v", key, e, err, w)
		}
	}
	if _, err := s.Get("k03"); !errors.Is(err, kv.ErrNotFound) {
		t.Errorf("deleted key: %v", err)
	}
	// History reaches back as far as the log does, and always holds the
	// current value.
	h, err := s.History(ctx, "k00")
	if err != nil || len(h) == 0 || h[len(h)-1].Revision != want["k00"].Revision {
		t.Errorf("history of k00: %+v, %v", h, err)
	}
	for _, c := range h[:len(h)-1] {
		if c.Revision < ls {
			t.Errorf("history holds revision %d, below the log start %d", c.Revision, ls)
		}
	}
}

// TestOpenRefusesAForeignSnapshot: a snapshot the service saved itself is
// not taken for the KV's state.
func TestOpenRefusesAForeignSnapshot(t *testing.T) {
	l := openLog(t, t.TempDir(), false)
	defer l.Close()
	ctx := testCtx(t)
	if _, err := l.Append(ctx, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := l.SaveSnapshot(ctx, l.Status().ReadableHW, func(w io.Writer) error {
		_, err := io.WriteString(w, "not a kv")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if s, err := kv.Open(ctx, l, kv.Options{Logger: quiet}); err == nil {
		s.Close()
		t.Fatal("Open took another writer's snapshot as its state")
	}
}

// TestOpenAfterLostEntries: without RetainUntilSnapshot, retention may
// delete what the KV's state needs; Open says so rather than serve a
// state missing those writes.
func TestOpenAfterLostEntries(t *testing.T) {
	l := openLog(t, t.TempDir(), false)
	defer l.Close()
	ctx := testCtx(t)
	s := openKV(t, l, kv.Options{})
	for i := range 5 {
		if _, err := s.Put(ctx, fmt.Sprint("k", i), nil); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	if _, err := l.DeleteBefore(ctx, l.Status().ReadableHW); err != nil {
		t.Fatal(err)
	}
	if s, err := kv.Open(ctx, l, kv.Options{Logger: quiet}); !errors.Is(err, replog.ErrOutOfRange) {
		if s != nil {
			s.Close()
		}
		t.Fatalf("Open: %v, want ErrOutOfRange", err)
	}
}
