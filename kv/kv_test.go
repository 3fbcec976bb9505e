package kv_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"
	"testing"

	"github.com/replog-io/replog/kv"
)

func TestOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		o     kv.Options
		field string // "" for valid
	}{
		{kv.Options{}, ""},
		{kv.Options{SnapshotEveryEntries: 10, SnapshotEveryBytes: 1 << 20, WatchBuffer: 1}, ""},
		{kv.Options{SnapshotEveryEntries: -1}, "SnapshotEveryEntries"},
		{kv.Options{SnapshotEveryBytes: -1}, "SnapshotEveryBytes"},
		{kv.Options{WatchBuffer: -1}, "WatchBuffer"},
	} {
		err := tc.o.Validate()
		if tc.field == "" {
			if err != nil {
				t.Errorf("%+v: %v", tc.o, err)
			}
			continue
		}
		if !errors.Is(err, kv.ErrInvalidOptions) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%+v: got %v, want ErrInvalidOptions naming %s", tc.o, err, tc.field)
		}
	}
}

// TestOperations runs each operation against the state the ones before it
// made, on one node.
func TestOperations(t *testing.T) {
	_, s := single(t, kv.Options{})
	ctx := testCtx(t)
	revs := map[string]uint64{} // step name → its revision
	type step struct {
		name string
		do   func() (uint64, error)
		want error  // errors.Is target; nil for success
		get  string // the value of "a" after it ("" for none)
	}
	var mismatch *kv.RevisionMismatchError
	steps := []step{
		{"get absent", func() (uint64, error) { _, err := s.Get("a"); return 0, err }, kv.ErrNotFound, ""},
		{"create", func() (uint64, error) { return s.Create(ctx, "a", []byte("1")) }, nil, "1"},
		{"create again", func() (uint64, error) { return s.Create(ctx, "a", []byte("2")) }, kv.ErrExists, "1"},
		{"update stale", func() (uint64, error) { return s.Update(ctx, "a", []byte("3"), revs["create"]+100) }, kv.ErrRevisionMismatch, "1"},
		{"update", func() (uint64, error) { return s.Update(ctx, "a", []byte("4"), revs["create"]) }, nil, "4"},
		{"update old rev", func() (uint64, error) { return s.Update(ctx, "a", []byte("5"), revs["create"]) }, kv.ErrRevisionMismatch, "4"},
		{"put", func() (uint64, error) { return s.Put(ctx, "a", []byte("6")) }, nil, "6"},
		{"delete", func() (uint64, error) { return s.Delete(ctx, "a") }, nil, ""},
		{"update deleted", func() (uint64, error) { return s.Update(ctx, "a", []byte("7"), revs["put"]) }, kv.ErrRevisionMismatch, ""},
		{"create after delete", func() (uint64, error) { return s.Create(ctx, "a", []byte("8")) }, nil, "8"},
		{"empty key", func() (uint64, error) { return s.Put(ctx, "", []byte("x")) }, kv.ErrInvalidKey, "8"},
		{"long key", func() (uint64, error) { return s.Put(ctx, strings.Repeat("k", kv.MaxKeyBytes+1), nil) }, kv.ErrInvalidKey, "8"},
	}
	for _, st := range steps {
		rev, err := st.do()
		if st.want == nil && err != nil || st.want != nil && !errors.Is(err, st.want) {
			t.Fatalf("%s: got %v, want %v", st.name, err, st.want)
		}
		revs[st.name] = rev
		e, err := s.Get("a")
		switch {
		case st.get == "" && !errors.Is(err, kv.ErrNotFound):
			t.Fatalf("%s: Get = %q, %v; want ErrNotFound", st.name, e.Value, err)
		case st.get != "" && (err != nil || string(e.Value) != st.get):
			t.Fatalf("%s: Get = %q, %v; want %q", st.name, e.Value, err, st.get)
		}
		if st.want == nil && st.get != "" && e.Revision != rev {
			t.Fatalf("%s: revision %d, the write returned %d", st.name, e.Revision, rev)
		}
		if errors.Is(st.want, kv.ErrRevisionMismatch) {
			_, err := s.Update(ctx, "a", []byte("x"), 1<<60)
			if !errors.As(err, &mismatch) {
				t.Fatalf("%s: %v is no *RevisionMismatchError", st.name, err)
			}
			cur, _ := s.Get("a")
			if mismatch.Current != cur.Revision || mismatch.Expected != 1<<60 || mismatch.Key != "a" {
				t.Fatalf("%s: %+v, the key is at %d", st.name, mismatch, cur.Revision)
			}
		}
	}
	st := s.Stats()
	if st.Failed == 0 || st.Keys != 1 {
		t.Errorf("stats %+v: want failed conditionals counted and one key", st)
	}
}

func TestKeysAndHistory(t *testing.T) {
	_, s := single(t, kv.Options{})
	ctx := testCtx(t)
	var want []uint64
	for _, v := range []string{"1", "2", "3"} {
		rev, err := s.Put(ctx, "app/x", []byte(v))
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, rev)
	}
	for _, k := range []string{"app/y", "other", "app/z"} {
		if _, err := s.Put(ctx, k, []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	rev, err := s.Delete(ctx, "app/z")
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Keys("app/"); !slices.Equal(got, []string{"app/x", "app/y"}) {
		t.Errorf("Keys(app/) = %v", got)
	}
	if got := s.Keys(""); len(got) != 3 {
		t.Errorf("Keys() = %v, want 3 keys", got)
	}
	h, err := s.History(ctx, "app/x")
	if err != nil {
		t.Fatal(err)
	}
	var got []uint64
	for i, c := range h {
		got = append(got, c.Revision)
		if string(c.Value) != []string{"1", "2", "3"}[i] || c.Key != "app/x" || c.Deleted {
			t.Errorf("history[%d] = %+v", i, c)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("history revisions %v, want %v", got, want)
	}
	h, err = s.History(ctx, "app/z")
	if err != nil || len(h) != 2 || !h[1].Deleted || h[1].Revision != rev {
		t.Errorf("history of a deleted key: %+v, %v", h, err)
	}
	if _, err := s.History(ctx, "nope"); !errors.Is(err, kv.ErrNotFound) {
		t.Errorf("history of an unknown key: %v", err)
	}
}

// TestForeignEntriesSkipped: a log shared with other writers holds entries
// that are not the KV's, or of a version it does not read; the KV skips
// and counts them and goes on.
func TestForeignEntriesSkipped(t *testing.T) {
	l, s := single(t, kv.Options{})
	ctx := testCtx(t)
	foreign := [][]byte{[]byte("hello"), {'K', 'V', 9, 1}, {'K', 'V', 1, 77}, {'K', 'V', 1}, {'K', 'V', 1, 1, 0x80}}
	for _, b := range foreign {
		if _, err := l.Append(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Put(ctx, "a", []byte("1")); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Skipped != uint64(len(foreign)) || st.Applied != 1 {
		t.Errorf("stats %+v: want %d skipped, 1 applied", st, len(foreign))
	}
	if e, err := s.Get("a"); err != nil || string(e.Value) != "1" {
		t.Errorf("Get = %+v, %v", e, err)
	}
}

func TestWatch(t *testing.T) {
	_, s := single(t, kv.Options{})
	ctx := testCtx(t)
	r0, _ := s.Put(ctx, "w/a", []byte("0"))
	if _, err := s.Put(ctx, "x", []byte("no")); err != nil {
		t.Fatal(err)
	}
	type seen struct {
		key, val string
		rev      uint64
		del      bool
	}
	got := make(chan seen, 16)
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		for c, err := range s.Watch(wctx, "w/") {
			if err != nil {
				done <- err
				return
			}
			got <- seen{c.Key, string(c.Value), c.Revision, c.Deleted}
		}
	}()
	first := <-got // the current value, before any change
	if first != (seen{"w/a", "0", r0, false}) {
		t.Fatalf("first = %+v", first)
	}
	r1, _ := s.Put(ctx, "w/b", []byte("1"))
	_, _ = s.Put(ctx, "y", []byte("not watched"))
	_, _ = s.Create(ctx, "w/b", []byte("fails: not watched"))
	r2, _ := s.Delete(ctx, "w/a")
	want := []seen{{"w/b", "1", r1, false}, {"w/a", "", r2, true}}
	for i, w := range want {
		if g := <-got; g != w {
			t.Fatalf("change %d = %+v, want %+v", i, g, w)
		}
	}
	stop()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("watch ended with %v", err)
	}
}

// TestWatchBehind: a watcher that falls further behind than WatchBuffer
// is told so, rather than silently missing changes.
func TestWatchBehind(t *testing.T) {
	_, s := single(t, kv.Options{WatchBuffer: 2})
	ctx := testCtx(t)
	if _, err := s.Put(ctx, "first", nil); err != nil {
		t.Fatal(err)
	}
	next, stop := iter.Pull2(s.Watch(ctx, ""))
	defer stop()
	if c, err, _ := next(); err != nil || c.Key != "first" {
		t.Fatalf("first = %+v, %v", c, err)
	}
	for i := range 4 {
		if _, err := s.Put(ctx, fmt.Sprint("k", i), nil); err != nil {
			t.Fatal(err)
		}
	}
	_, err, _ := next()
	if !errors.Is(err, kv.ErrWatchBehind) {
		t.Errorf("got %v, want ErrWatchBehind", err)
	}
}

// TestClosed: after Close, operations fail with ErrClosed, Done is closed
// and Err says ErrClosed (nil, and Done open, while a KV runs); and a KV
// whose Log closes ends by itself (goleak checks its goroutine is gone),
// Done then closed with Err ErrClosed.
func TestClosed(t *testing.T) {
	l, s := single(t, kv.Options{})
	ctx := testCtx(t)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, "a", nil); !errors.Is(err, kv.ErrClosed) {
		t.Errorf("Put after Close: %v", err)
	}
	if _, err := s.Get("a"); !errors.Is(err, kv.ErrClosed) {
		t.Errorf("Get after Close: %v", err)
	}
	select {
	case <-s.Done():
	default:
		t.Error("Done is not closed after Close")
	}
	if err := s.Err(); !errors.Is(err, kv.ErrClosed) {
		t.Errorf("Err after Close: %v", err)
	}
	s2 := openKV(t, l, kv.Options{})
	if err := s2.Err(); err != nil {
		t.Errorf("Err of a running KV: %v", err)
	}
	select {
	case <-s2.Done():
		t.Error("Done is closed while the KV runs")
	default:
	}
	l.Close()
	<-s2.Done()
	if err := s2.Err(); !errors.Is(err, kv.ErrClosed) {
		t.Errorf("Err after the log closed: %v", err)
	}
	for c, err := range s2.Watch(ctx, "") {
		if err == nil {
			t.Fatalf("change %+v after the log closed", c)
		}
		if !errors.Is(err, kv.ErrClosed) {
			t.Errorf("watch ended with %v, want ErrClosed", err)
		}
	}
}
