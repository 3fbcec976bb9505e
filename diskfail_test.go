package replog

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replog-io/replog/storage"
)

// failingStore fails every Append after the first okAppends.
type failingStore struct {
	storage.Store
	okAppends int32
	appends   atomic.Int32
}

func (s *failingStore) Append(es []storage.Entry) error {
	if s.appends.Add(1) > s.okAppends {
		return errors.New("EIO: disk on fire")
	}
	return s.Store.Append(es)
}

// A failed disk write stops the node loudly: the append in flight gets
// ErrStorageFailed with ErrUnknownOutcome, later appends ErrStorageFailed
// alone, readers end with it, Status and Close report it.
func TestDiskFailureStopsTheNodeLoudly(t *testing.T) {
	orig := openStore
	t.Cleanup(func() { openStore = orig })
	openStore = func(path string, o storage.BoltOptions) (storage.Store, error) {
		s, err := storage.OpenBolt(path, o)
		if err != nil {
			return nil, err
		}
		return &failingStore{Store: s, okAppends: 3}, nil
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
