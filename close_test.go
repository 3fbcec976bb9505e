package replog

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/replog-io/replog/storage"
)

// dirListing describes every file under dir: path, size, modification
// time.
func dirListing(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s %d %d\n", p, fi.Size(), fi.ModTime().UnixNano())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestClosedLogLeavesItsDirectoryAlone: once Close returns, no goroutine
// of the Log or its store is left and nothing touches the data directory
// (a caller may remove or copy it at once). The node runs everything that
// writes there in the background: the commit journal (on at level 7) with
// records still pending at Close, so Close's last checkpoint rolls
// segments, and retention's deletions, whose files the store's goroutine
// unlinks.
func TestClosedLogLeavesItsDirectoryAlone(t *testing.T) {
	old := retentionInterval
	retentionInterval = 20 * time.Millisecond
	defer func() { retentionInterval = old }()
	ignore := goleak.IgnoreCurrent()
	dir := t.TempDir()
	l, err := Open(Options{Dir: dir, NodeID: "n1", NoSync: true, SegmentBytes: 64 << 10, RetentionBytes: 128 << 10})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			l.Close()
		}
	}()
	waitFor(t, "the single node to raise its level to 7 and turn its journal on", 15*time.Second, func() bool {
		_, err := os.Stat(filepath.Join(dir, storage.JournalFileName))
		return l.Status().FeatureLevel >= 7 && err == nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rec := make([]byte, 1000)
	for i := range 1500 {
		copy(rec, fmt.Sprintf("rec-%06d", i))
		if _, err := l.Append(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	if st := l.Stats(); st.StorageGroupCommits == 0 {
		t.Fatalf("no journal records written: %+v", st)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	closed = true
	before := dirListing(t, dir)
	goleak.VerifyNone(t, ignore)
	// Longer than every background interval of the node (retention's,
	// here 20 ms; the checkpointer runs when asked).
	time.Sleep(500 * time.Millisecond)
	if after := dirListing(t, dir); after != before {
		t.Fatalf("the directory changed after Close returned:\nat Close:\n%s\nlater:\n%s", before, after)
	}
}
