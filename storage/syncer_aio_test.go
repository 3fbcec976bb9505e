//go:build linux && (amd64 || arm64)

package storage

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"unsafe"
)

// TestAIOLayout pins the kernel ABI's layout: struct iocb is 64 bytes
// with the data at 0, the opcode at 16, the file at 20, the flags at 56 and the eventfd
// at 60; struct io_event is 32 bytes with the data at 0 and the result at
// 16.
func TestAIOLayout(t *testing.T) {
	var c aioIOCB
	var e aioEvent
	got := []uintptr{unsafe.Sizeof(c), unsafe.Offsetof(c.data), unsafe.Offsetof(c.opcode), unsafe.Offsetof(c.fildes), unsafe.Offsetof(c.flags), unsafe.Offsetof(c.resfd), unsafe.Sizeof(e), unsafe.Offsetof(e.data), unsafe.Offsetof(e.res)}
	want := []uintptr{64, 0, 16, 20, 56, 60, 32, 0, 16}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("layout %v, want %v", got, want)
		}
	}
}

// TestFileSyncerParksWhileOthersWaitForAP checks R111: while more
// goroutines wait to run than there are Ps, a journal sync goes through
// AIO (its goroutine parks, its P runs them), and what it synced reads
// back; with nothing waiting it is the plain fdatasync.
func TestFileSyncerParksWhileOthersWaitForAP(t *testing.T) {
	f := syncTestFile(t)
	var s fileSyncer
	defer s.close()

	// Nothing waiting: plain.
	if err := s.sync(f); err != nil {
		t.Fatalf("uncontended sync: %v", err)
	}
	if s.parked != 0 {
		t.Fatalf("uncontended sync went through AIO (%d parked)", s.parked)
	}
	if s.ctx == 0 {
		// No AIO on this kernel (or the sandbox refuses io_setup): the
		// plain fdatasync is what every sync is; nothing more to check
		// than that it works under load too.
		t.Log("AIO unavailable here: every sync is the plain fdatasync")
	}

	// Keep many more goroutines runnable than there are Ps.
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range 4 * waitingPerP * runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				runtime.Gosched()
			}
		}()
	}
	const n = 50
	for i := range n {
		want := bytes.Repeat([]byte{byte(i)}, 4096)
		if _, err := f.WriteAt(want, int64(i%8)*4096); err != nil {
			t.Fatal(err)
		}
		if err := s.sync(f); err != nil {
			t.Fatalf("sync %d under load: %v", i, err)
		}
		got := make([]byte, len(want))
		if _, err := f.ReadAt(got, int64(i%8)*4096); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("block %d after sync: %v", i, err)
		}
	}
	stop.Store(true)
	wg.Wait()
	if s.ctx != 0 && s.parked == 0 {
		t.Fatalf("%d syncs with %d goroutines waiting for %d Ps: none parked", n, 4*waitingPerP*runtime.GOMAXPROCS(0), runtime.GOMAXPROCS(0))
	}
	t.Logf("%d of %d syncs under load parked", s.parked, n)
}

// TestFileSyncerErrorAndFallback: a sync AIO cannot submit (a closed
// file) returns the plain fdatasync's error, and the syncer keeps syncing
// the plain way.
func TestFileSyncerErrorAndFallback(t *testing.T) {
	dir := t.TempDir()
	bad, err := os.Create(filepath.Join(dir, "bad"))
	if err != nil {
		t.Fatal(err)
	}
	_ = bad.Close()
	good, err := os.Create(filepath.Join(dir, "good"))
	if err != nil {
		t.Fatal(err)
	}
	defer good.Close()
	s := setUpSyncer(t)
	if s.ctx == 0 {
		t.Log("AIO unavailable here: the syncer is plain from the start")
	} else if err, ok := s.aio(bad); ok || err != nil {
		// Past contended(): the AIO path itself, on a file it cannot sync.
		t.Fatalf("AIO of a closed file: ok %v, err %v; want not submitted", ok, err)
	}
	// A closed file fails on its own reference (the runtime's "use of
	// closed file"), before any descriptor number is used.
	if err := s.sync(bad); err == nil || errors.Is(err, syscall.EBADF) {
		t.Fatalf("sync of a closed file: %v, want the file's closed error", err)
	}
	if err := s.sync(good); err != nil {
		t.Fatalf("sync after a failed one: %v", err)
	}
}

// TestFileSyncerSetsNothingUpAfterClose: a sync that comes after close
// (a round that was writing while its journal closed) syncs the plain way
// and sets no AIO context or eventfd up: nothing would release them.
func TestFileSyncerSetsNothingUpAfterClose(t *testing.T) {
	f := syncTestFile(t)
	var s fileSyncer
	s.close()
	if err := s.sync(f); err != nil {
		t.Fatalf("sync after close: %v", err)
	}
	if s.ctx != 0 || s.ev != nil {
		s.destroy()
		t.Fatal("a sync after close set an AIO context up that nothing releases")
	}
}

// TestFileSyncerWaitsForItsOwnCompletion: a completion of an earlier
// submission still in the context (one whose wait ended on an
// io_getevents error) does not answer a later sync: the sync returns on
// its own completion, not before its fdatasync is done.
func TestFileSyncerWaitsForItsOwnCompletion(t *testing.T) {
	f := syncTestFile(t)
	s := setUpSyncer(t)
	if s.ctx == 0 {
		t.Log("AIO unavailable here: every sync is the plain fdatasync")
		return
	}
	// An earlier submission whose completion nobody reaped: wait on the
	// eventfd until the kernel has put it in the ring.
	const stale = ^uint64(0)
	old := aioIOCB{data: stale, opcode: iocbCmdFdsync, fildes: uint32(f.Fd()), flags: iocbFlagResfd, resfd: uint32(s.ev.Fd())}
	p := &old
	if n, _, e := syscall.Syscall(syscall.SYS_IO_SUBMIT, s.ctx, 1, uintptr(unsafe.Pointer(&p))); e != 0 || n != 1 {
		t.Fatalf("io_submit: %d, %v", n, e)
	}
	var buf [8]byte
	if _, err := s.ev.Read(buf[:]); err != nil {
		t.Fatal(err)
	}
	err, ok := s.aio(f)
	if !ok || err != nil {
		t.Fatalf("aio: ok %v, err %v", ok, err)
	}
	if got := s.events[0].data; got != s.seq {
		t.Fatalf("the sync returned on the completion of submission %#x, not its own (%#x)", got, s.seq)
	}
}

// syncTestFile creates a file for a syncer test to sync; the test's
// cleanup closes it.
func syncTestFile(t *testing.T) *os.File {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "j"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f
}

// setUpSyncer returns a syncer whose AIO set-up has run (ctx 0 where AIO
// is unavailable); the test's cleanup closes it.
func setUpSyncer(t *testing.T) *fileSyncer {
	t.Helper()
	s := &fileSyncer{setup: true}
	s.init()
	t.Cleanup(s.close)
	return s
}
