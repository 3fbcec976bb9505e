package replog

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/replog-io/replog/storage"
)

// openSingle opens a single node on a fresh directory with o's fields
// (Dir and NodeID filled in) and waits until it leads.
func openSingle(t *testing.T, o Options) *Log {
	t.Helper()
	if o.Dir == "" {
		o.Dir = t.TempDir()
	}
	o.NoSync = true
	l, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := l.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	return l
}

// wantMessage fails unless err wraps want and its message holds every part.
func wantMessage(t *testing.T, what string, err, want error, parts ...string) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: %v; want an error wrapping %v", what, err, want)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Fatalf("%s: %q does not say %q", what, err, p)
		}
	}
}

// TestInvalidNamesAreInvalidArguments: an empty cursor name or append ID,
// or one over MaxIDLength, is an invalid argument (not a record too
// large), and the message says the length and the limit. Positive
// control: a name of exactly MaxIDLength bytes is taken.
func TestInvalidNamesAreInvalidArguments(t *testing.T) {
	l := openSingle(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	long := strings.Repeat("x", MaxIDLength+1)
	notTooLarge := func(what string, err error) {
		t.Helper()
		if errors.Is(err, ErrTooLarge) {
			t.Fatalf("%s: %v also wraps ErrTooLarge", what, err)
		}
	}
	err := l.CommitCursor(ctx, "", 1)
	wantMessage(t, "empty cursor name", err, ErrInvalidArgument, "a cursor name is empty", "256")
	notTooLarge("empty cursor name", err)
	err = l.CommitCursor(ctx, long, 1)
	wantMessage(t, "long cursor name", err, ErrInvalidArgument, "a cursor name is 257 bytes, over MaxIDLength (256)")
	notTooLarge("long cursor name", err)
	_, err = l.Cursor(ctx, "")
	wantMessage(t, "Cursor with an empty name", err, ErrInvalidArgument, "a cursor name is empty")
	_, err = l.Cursor(ctx, long)
	wantMessage(t, "Cursor with a long name", err, ErrInvalidArgument, "257 bytes")
	_, err = l.Append(ctx, []byte("x"), WithID(long))
	wantMessage(t, "long ID", err, ErrInvalidArgument, "an append ID is 257 bytes, over MaxIDLength (256)")
	notTooLarge("long ID", err)
	_, err = l.Append(ctx, []byte("x"), WithID(""))
	wantMessage(t, "empty ID", err, ErrInvalidArgument, "an append ID is empty")
	_, err = l.AppendAsync(ctx, []byte("x"), WithID(long)).Wait(ctx)
	wantMessage(t, "long ID, async", err, ErrInvalidArgument, "257 bytes")

	longest := strings.Repeat("y", MaxIDLength)
	if err := l.CommitCursor(ctx, longest, 7); err != nil {
		t.Fatalf("cursor name of MaxIDLength bytes: %v", err)
	}
	if next, err := l.Cursor(ctx, longest); err != nil || next != 7 {
		t.Fatalf("Cursor of a MaxIDLength name: %d, %v; want 7", next, err)
	}
	if _, err := l.Append(ctx, []byte("x"), WithID(longest)); err != nil {
		t.Fatalf("ID of MaxIDLength bytes: %v", err)
	}
}

// TestOversizedRecordMessage: an Append over Options.MaxRecordSize says
// the record's size and the limit; AppendBatch says which record. Both
// still wrap ErrTooLarge.
func TestOversizedRecordMessage(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, idem := range []bool{true, false} {
		l := openSingle(t, Options{MaxRecordSize: 100, DisableIdempotence: !idem})
		_, err := l.Append(ctx, make([]byte, 101))
		wantMessage(t, "Append", err, ErrTooLarge, "record is 101 bytes, over Options.MaxRecordSize (100)")
		_, err = l.AppendAsync(ctx, make([]byte, 150)).Wait(ctx)
		wantMessage(t, "AppendAsync", err, ErrTooLarge, "record is 150 bytes, over Options.MaxRecordSize (100)")
		_, err = l.AppendBatch(ctx, [][]byte{make([]byte, 10), make([]byte, 10), make([]byte, 150)})
		wantMessage(t, "AppendBatch", err, ErrTooLarge, "record 2 of the batch is 150 bytes, over Options.MaxRecordSize (100)")
		if _, err := l.Append(ctx, make([]byte, 100)); err != nil {
			t.Fatalf("a record of exactly MaxRecordSize: %v", err)
		}
	}
}

// TestSecondOpenOfADirectory: a second Open of a directory a Log of this
// process holds says so in one message (the directory, the node, which Log
// holds it), with one "replog:" prefix, and wraps ErrLocked; a directory
// held otherwise (here a store opened directly, as another process or a
// tool would) is said to be held by another process.
func TestSecondOpenOfADirectory(t *testing.T) {
	dir := t.TempDir()
	openSingle(t, Options{Dir: dir, NodeID: "n1"})
	_, err := Open(Options{Dir: dir, NodeID: "n1", NoSync: true})
	wantMessage(t, "second Open", err, ErrLocked, dir, "node n1", "another Log in this process")
	if n := strings.Count(err.Error(), "replog:"); n != 1 {
		t.Fatalf("second Open: %q has %d \"replog:\" prefixes, want 1", err, n)
	}

	other := filepath.Join(t.TempDir(), "held")
	s, _, err := storage.OpenDir(other, storage.Identity{ClusterID: "replog", NodeID: "n2"}, storage.DirOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, err = Open(Options{Dir: other, NodeID: "n2", NoSync: true})
	wantMessage(t, "Open of a directory held elsewhere", err, ErrLocked, other, "node n2", "another process")
	if strings.Contains(err.Error(), "this process") || strings.Count(err.Error(), "replog:") != 1 {
		t.Fatalf("Open of a directory held elsewhere: %q", err)
	}
}

// TestNoCursorNamesTheCursor: ErrNoCursor's message names the cursor.
func TestNoCursorNamesTheCursor(t *testing.T) {
	l := openSingle(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	next, err := l.Cursor(ctx, "billing-consumer")
	wantMessage(t, "Cursor never committed", err, ErrNoCursor, `"billing-consumer"`)
	if next != 0 {
		t.Fatalf("Cursor never committed: next %d, want 0", next)
	}
}
