package replog

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/storage"
)

// failingStore fails every Apply that holds an append after the first
// okAppends (applying nothing of it).
type failingStore struct {
	storage.Store
	okAppends int32
	appends   atomic.Int32
}

func (s *failingStore) Apply(ws []protocol.Write) error {
	for _, w := range ws {
		if w.Kind == protocol.WriteAppend && s.appends.Add(1) > s.okAppends {
			return errors.New("EIO: disk on fire")
		}
	}
	return s.Store.Apply(ws)
}

// A failed disk write stops the node loudly: the append in flight gets
// ErrStorageFailed with ErrUnknownOutcome, later appends ErrStorageFailed
// alone, readers end with it, Status and Close report it.
func TestDiskFailureStopsTheNodeLoudly(t *testing.T) {
	orig := openStore
	t.Cleanup(func() { openStore = orig })
	openStore = func(dir string, id storage.Identity, o storage.DirOptions) (storage.Store, storage.Identity, error) {
		s, id, err := storage.OpenDir(dir, id, o)
		if err != nil {
			return nil, id, err
		}
		return &failingStore{Store: s, okAppends: 3}, id, nil
	}
	l, err := Open(Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	// Reader started before the failure must end with it.
	readerDone := make(chan error, 1)
	go func() {
		var last error
		for _, err := range l.Read(ctx, 0) {
			last = err
		}
		readerDone <- last
	}()

	var inFlight error
	for i := range 10 {
		if _, err := l.Append(ctx, []byte{byte(i)}); err != nil {
			inFlight = err
			break
		}
	}
	if !errors.Is(inFlight, ErrStorageFailed) || !errors.Is(inFlight, ErrUnknownOutcome) {
		t.Fatalf("append hit by the failure: %v, want ErrStorageFailed and ErrUnknownOutcome", inFlight)
	}
	_, err = l.Append(ctx, []byte("after"))
	if !errors.Is(err, ErrStorageFailed) || errors.Is(err, ErrUnknownOutcome) {
		t.Fatalf("append after the failure: %v, want ErrStorageFailed alone (nothing appended)", err)
	}
	select {
	case err := <-readerDone:
		if !errors.Is(err, ErrStorageFailed) {
			t.Fatalf("reader ended with %v, want ErrStorageFailed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("reader still waiting on a node whose disk failed")
	}
	if st := l.Status(); st.Error == "" {
		t.Fatalf("Status does not report the failure: %+v", st)
	}
	if err := l.Close(); !errors.Is(err, ErrStorageFailed) {
		t.Fatalf("Close = %v, want ErrStorageFailed", err)
	}
}

// A data directory belongs to the cluster and node it was created for:
// opening it as another node or cluster fails with ErrIdentityMismatch and
// changes nothing; the rightful node then opens it with its log intact.
func TestOpenRefusesAnotherNodesDirectory(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(Options{Dir: dir, NodeID: "a", ClusterID: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := l.Append(ctx, []byte("a's entry")); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for _, o := range []Options{
		{Dir: dir, NodeID: "b", ClusterID: "c1"},
		{Dir: dir, NodeID: "a", ClusterID: "c2"},
	} {
		if l, err := Open(o); !errors.Is(err, ErrIdentityMismatch) {
			if err == nil {
				l.Close()
			}
			t.Fatalf("Open as %s/%s: %v, want ErrIdentityMismatch", o.ClusterID, o.NodeID, err)
		}
	}
	l, err = Open(Options{Dir: dir, NodeID: "a", ClusterID: "c1"})
	if err != nil {
		t.Fatalf("the rightful node cannot reopen its directory: %v", err)
	}
	defer l.Close()
	if got := readN(t, l, 1, 10*time.Second); string(got[0].Data) != "a's entry" {
		t.Fatalf("reopened log holds %q", got[0].Data)
	}
}

// A directory that shows a node lived there, but whose data file is gone
// or empty, is refused with ErrCorrupt naming the file: the node must not
// start empty and vote as if it still had its log. A wiped directory (the
// operator's explicit choice) starts a new node.
func TestOpenRefusesDirectoryWhoseDataFileVanished(t *testing.T) {
	for _, damage := range []struct {
		name string
		do   func(path string) error
	}{
		{"removed", os.Remove},
		{"emptied", func(path string) error { return os.Truncate(path, 0) }},
	} {
		dir := t.TempDir()
		l, err := Open(Options{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		if _, err := l.Append(ctx, []byte("x")); err != nil {
			t.Fatal(err)
		}
		cancel()
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		data := filepath.Join(dir, storage.DataFileName)
		if err := damage.do(data); err != nil {
			t.Fatal(err)
		}
		if l, err := Open(Options{Dir: dir}); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), storage.DataFileName) {
			if err == nil {
				l.Close()
			}
			t.Fatalf("data file %s: Open = %v, want ErrCorrupt naming %s", damage.name, err, storage.DataFileName)
		}
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
		l, err = Open(Options{Dir: dir})
		if err != nil {
			t.Fatalf("wiped directory: %v", err)
		}
		// A new cluster of one: at most the voter set it records (R57).
		if st := l.Status(); st.LEO > 1 {
			t.Fatalf("wiped directory opened with LEO %d", st.LEO)
		}
		l.Close()
	}
}
