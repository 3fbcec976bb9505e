package storage

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/replog-io/replog/protocol"
)

// breakWrites makes every write through the descriptors this process holds
// on the file at path fail: each is replaced (dup3) by a read-only
// descriptor of the same file, so that reads still work and the
// descriptor is still its owner's to close.
func breakWrites(t *testing.T, path string) {
	t.Helper()
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		t.Fatal(err)
	}
	ro, err := os.Open(real)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatalf("breaking a file's writes needs /proc/self/fd: %v", err)
	}
	broken := 0
	for _, e := range fds {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd == int(ro.Fd()) {
			continue
		}
		if target, err := os.Readlink("/proc/self/fd/" + e.Name()); err != nil || target != real {
			continue
		}
		if err := syscall.Dup3(int(ro.Fd()), fd, syscall.O_CLOEXEC); err != nil {
			t.Fatal(err)
		}
		broken++
	}
	if broken == 0 {
		t.Fatalf("no descriptor of %s is open", real)
	}
}

// A failed commit latches: that Apply and every later one fail, nothing is
// applied, and the store must be reopened.
func TestDirFailedCommitLatches(t *testing.T) {
	dir := t.TempDir()
	d := openOneSegment(t, dir)
	if err := d.Append(ents(0, 3, 1)); err != nil {
		t.Fatal(err)
	}
	// Make bbolt's page writes fail.
	breakWrites(t, filepath.Join(dir, DataFileName))
	err := d.Apply([]protocol.Write{{Kind: protocol.WriteAppend, Entries: ents(3, 2, 1)}, {Kind: protocol.WriteHWCheckpoint, Offset: 5}})
	if err == nil || !strings.Contains(err.Error(), "commit") {
		t.Fatalf("Apply on a broken file: %v, want a commit error", err)
	}
	if d.LEO() != 3 {
		t.Fatalf("LEO %d after a failed commit, want 3", d.LEO())
	}
	applies := d.Stats().Applies
	err2 := d.Apply([]protocol.Write{{Kind: protocol.WriteQuorumState, Quorum: protocol.QuorumState{Epoch: 1}}})
	if err2 == nil || !strings.Contains(err2.Error(), "refuses writes after a failed commit") || !errors.Is(err2, errors.Unwrap(err)) {
		t.Fatalf("Apply after a failed commit: %v, want the latched failure", err2)
	}
	if d.Stats().Applies != applies {
		t.Fatal("an Apply ran a transaction after a failed commit")
	}
	_ = d.Close() // the file cannot be written: the error does not matter
	// Reopened, the store holds what the last good commit left.
	d = openOneSegment(t, dir)
	defer d.Close()
	if d.LEO() != 3 {
		t.Fatalf("reopened: LEO %d, want 3", d.LEO())
	}
}
