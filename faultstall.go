//go:build replog_fault_disk_stall

package replog

// A fault build, for internal/faults only (never build a release with the
// tag replog_fault_disk_stall): with REPLOG_FAULT_DISK_STALL set to a
// duration, each SIGUSR1 the process gets stalls its disk for that long
// (from the signal: one during a stall prolongs it).
// Every write of the store that starts in that time waits until it is
// over, as behind a device whose writes and fsyncs hang, while the loop
// serves fetches and reads from what it has; each write held prints one
// line to stderr ("replog fault: disk stall: a write waited 201ms") for
// the harness to count. Without the tag none of this is built.

import (
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/storage"
)

func init() {
	d, err := time.ParseDuration(os.Getenv("REPLOG_FAULT_DISK_STALL"))
	if err != nil || d <= 0 {
		return
	}
	st := &faultDiskStall{d: d}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGUSR1)
	go func() {
		for range sigs {
			st.begin()
		}
	}()
	orig := openStore
	openStore = func(dir string, id storage.Identity, opts storage.DirOptions) (storage.Store, storage.Identity, error) {
		s, id, err := orig(dir, id, opts)
		ds, ok := s.(*storage.DirStore)
		if err != nil || !ok {
			return s, id, err
		}
		// Embedding the *DirStore keeps every other method, and so every
		// optional interface the root asks the store for.
		return &faultStallStore{DirStore: ds, stall: st}, id, nil
	}
}

// faultDiskStall is the time until which writes wait.
type faultDiskStall struct {
	d     time.Duration
	mu    sync.Mutex
	until time.Time
}

func (s *faultDiskStall) begin() {
	s.mu.Lock()
	s.until = time.Now().Add(s.d)
	s.mu.Unlock()
	fmt.Fprintf(os.Stderr, "replog fault: disk stall of %v begins\n", s.d)
}

// wait holds the caller until the stall under way, if any, is over; a
// signal during a stall makes it last longer.
func (s *faultDiskStall) wait() {
	start, held := time.Now(), false
	for {
		s.mu.Lock()
		w := time.Until(s.until)
		s.mu.Unlock()
		if w <= 0 {
			break
		}
		time.Sleep(w)
		held = true
	}
	if held {
		fmt.Fprintf(os.Stderr, "replog fault: disk stall: a write waited %v\n", time.Since(start).Round(time.Millisecond))
	}
}

type faultStallStore struct {
	*storage.DirStore
	stall *faultDiskStall
}

func (s *faultStallStore) Apply(ws []protocol.Write) error {
	s.stall.wait()
	return s.DirStore.Apply(ws)
}

// groupStore lets the node's writer commit this store's writes in its
// rounds on the shared journal, each held by the stall first, as Apply is.
func (s *faultStallStore) groupStore() (*storage.DirStore, func()) {
	return s.DirStore, s.stall.wait
}
