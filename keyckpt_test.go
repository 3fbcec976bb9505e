package replog

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/replog-io/replog/storage"
)

// TestRestartUsesTheKeyCheckpoint (R76): the node's loop hands the core's
// key checkpoint to its store (replog.keys appears once the log has grown
// by KeyCheckpointBytes), and a restart on it answers caller IDs appended
// below the checkpoint and above it as duplicates of their originals.
func TestRestartUsesTheKeyCheckpoint(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := appendCtx(t)
	defer cancel()
	before, err := l.Append(ctx, []byte("first"), WithID("before"))
	if err != nil {
		t.Fatal(err)
	}
	// 17 MiB of records: past the default KeyCheckpointBytes (16 MiB).
	batch := make([][]byte, 16)
	for i := range batch {
		batch[i] = bytes.Repeat([]byte{'x'}, 64<<10)
	}
	for range 17 {
		if _, err := l.AppendBatch(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	after, err := l.Append(ctx, []byte("last"), WithID("after"))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(dir, storage.KeyCheckpointFileName)); err != nil || fi.Size() == 0 {
		t.Fatalf("no key checkpoint after 17 MiB of log: %v", err)
	}
	l, err = Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for id, want := range map[string]uint64{"before": before, "after": after} {
		if off, err := l.Append(ctx, []byte("again"), WithID(id)); !errors.Is(err, ErrDuplicate) || off != want {
			t.Fatalf("ID %q after the restart: %d, %v; want %d and ErrDuplicate", id, off, err, want)
		}
	}
	if _, err := l.Append(ctx, []byte("new"), WithID("new")); err != nil {
		t.Fatalf("a new ID after the restart: %v", err)
	}
}
