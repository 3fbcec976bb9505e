//go:build linux && (amd64 || arm64)

package storage

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

// fileSyncer runs a file's fdatasync through Linux native AIO
// (IOCB_CMD_FDSYNC, which the kernel carries out on a worker thread),
// and waits for its completion on an eventfd in the runtime's network
// poller. The calling goroutine so parks instead of sitting in a blocking
// system call: a plain fdatasync holds the thread's P for the whole sync
// (the runtime hands a P off a system call only once its monitor notices,
// rarely within a sync's half millisecond), so on a node whose journal
// syncs back to back that P's share of the process's CPU stands idle
// while every other goroutine waits for it. Where AIO is missing (an
// older kernel, a sandbox that refuses io_setup, a file system that does
// not sync through it) it falls back to fdatasync, once and for good.
type fileSyncer struct {
	mu     sync.Mutex
	setup  bool          // tried to set AIO up
	ctx    uintptr       // aio_context_t; 0: plain fdatasync
	ev     *os.File      // the eventfd the completions count on (non-blocking, in the poller)
	guess  time.Duration // when to look first for a completion (learn)
	parked uint64        // syncs that went through AIO (tests)
	seq    uint64        // the latest submission's number (its aio_data)
	iocb   aioIOCB
	events [1]aioEvent
	// runnable is where contended reads the runtime's count of
	// goroutines waiting for a P: the syncer's, so that a sync allocates
	// nothing for it.
	runnable [1]metrics.Sample
}

// aioIOCB is struct iocb of linux/aio_abi.h, in the field order of a
// little-endian machine (the build tag: the two the project runs on).
type aioIOCB struct {
	data   uint64 // aio_data: returned in the completion's data
	_      uint64 // aio_key, aio_rw_flags
	opcode uint16
	_      int16 // aio_reqprio
	fildes uint32
	_      [4]uint64 // aio_buf, aio_nbytes, aio_offset, aio_reserved2
	flags  uint32
	resfd  uint32
}

// aioEvent is struct io_event of linux/aio_abi.h.
type aioEvent struct {
	data uint64
	_    uint64 // obj
	res  int64
	_    int64 // res2
}

const (
	iocbCmdFdsync = 3
	iocbFlagResfd = 1
	efdCloexec    = 0x80000
	efdNonblock   = 0x800

	// syncPoll is how often a sync not yet done is looked for after the
	// first look.
	syncPoll = 50 * time.Microsecond
	// maxSyncGuess bounds the first look's wait (a slow disk's syncs are
	// seen by the later looks).
	maxSyncGuess = 2 * time.Millisecond
)

// sync makes f's data durable, as fdatasync does.
func (s *fileSyncer) sync(f *os.File) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.setup {
		s.setup = true
		s.init()
	}
	if s.ctx == 0 || !s.contended() {
		return fdatasync(f)
	}
	err, ok := s.aio(f)
	if !ok {
		s.destroy()
		return fdatasync(f)
	}
	s.parked++
	return err
}

// contended reports whether more goroutines wait to run than the other
// Ps could run while a sync holds one: then the P a plain fdatasync holds
// is one they wait for, and the sync goes through AIO. A goroutine's turn
// is some tens of microseconds and a sync about half a millisecond, so
// up to waitingPerP goroutines per P the other Ps run them meanwhile, and
// the plain fdatasync is the quicker of the two (no kernel worker to
// wake, no poller to pass through): a log with a few appenders keeps its
// latency. init sets AIO up only where the runtime has the metric (Go
// 1.26 on); before that every sync is the plain one.
func (s *fileSyncer) contended() bool {
	metrics.Read(s.runnable[:])
	return s.runnable[0].Value.Uint64() > waitingPerP*uint64(runtime.GOMAXPROCS(0))
}

// runnableMetric counts the goroutines waiting for a P.
const runnableMetric = "/sched/goroutines/runnable:goroutines"

// waitingPerP is how many goroutines waiting per P the other Ps absorb
// during one sync (contended).
const waitingPerP = 8

// init sets up the AIO context and the eventfd; on any failure, or on a
// runtime that does not count the goroutines waiting for a P (contended
// could never say yes), the syncer stays on plain fdatasync.
func (s *fileSyncer) init() {
	s.runnable[0].Name = runnableMetric
	metrics.Read(s.runnable[:])
	if s.runnable[0].Value.Kind() != metrics.KindUint64 {
		return
	}
	var ctx uintptr
	if _, _, e := syscall.Syscall(syscall.SYS_IO_SETUP, 1, uintptr(unsafe.Pointer(&ctx)), 0); e != 0 {
		return
	}
	fd, _, e := syscall.Syscall(syscall.SYS_EVENTFD2, 0, efdCloexec|efdNonblock, 0)
	if e != 0 {
		_, _, _ = syscall.Syscall(syscall.SYS_IO_DESTROY, ctx, 0, 0)
		return
	}
	s.ctx, s.ev = ctx, os.NewFile(fd, "replog-fsync-eventfd")
}

// aio runs one fdatasync of f through the AIO context. ok false: AIO
// cannot sync f (nothing was submitted, or the kernel refused the
// operation); the caller syncs it the plain way.
func (s *fileSyncer) aio(f *os.File) (err error, ok bool) {
	s.seq++
	rc, rerr := f.SyscallConn()
	if rerr != nil {
		return nil, false
	}
	// The submission names the descriptor by number; the kernel holds
	// the file from io_submit on, so only the submission needs the
	// file's reference (see fdatasync).
	var n uintptr
	var e syscall.Errno
	cerr := rc.Control(func(fd uintptr) {
		s.iocb = aioIOCB{data: s.seq, opcode: iocbCmdFdsync, fildes: uint32(fd), flags: iocbFlagResfd, resfd: uint32(s.ev.Fd())}
		p := &s.iocb
		n, _, e = syscall.Syscall(syscall.SYS_IO_SUBMIT, s.ctx, 1, uintptr(unsafe.Pointer(&p)))
	})
	if cerr != nil || e != 0 || n != 1 {
		return nil, false
	}
	// Under load every P is busy and the runtime looks at the poller
	// only when one runs out of work (or every 10 ms): the eventfd would
	// say "done" late. A read deadline is a timer, which each P checks
	// whenever it schedules, so the read also ends at the deadline, to
	// look for the completion then and every syncPoll after it. On an
	// idle node the eventfd ends the read as soon as the sync is done.
	deadline := time.Now().Add(s.guess)
	looks := 0
	var buf [8]byte
	for {
		_ = s.ev.SetReadDeadline(deadline)
		_, rerr := s.ev.Read(buf[:])
		if err, done := s.reapNow(); done {
			s.learn(looks == 0)
			return err, true
		}
		if rerr != nil && !errors.Is(rerr, os.ErrDeadlineExceeded) {
			// The sync was submitted and will complete: wait for it
			// the blocking way before the caller reuses anything.
			return s.reap(), true
		}
		if now := time.Now(); !now.Before(deadline) {
			looks++
			deadline = now.Add(syncPoll)
		}
	}
}

// learn moves guess, the wait before the first look, towards the middle
// of the syncs' durations: earlier when the sync was done at the first
// look (or before it: the eventfd), later when it was not. It learns from
// whether the sync was done, not from when it was seen done: on a busy
// process the goroutine runs some time after its look is due, and a
// guess that counted that time would push every first look later still.
func (s *fileSyncer) learn(doneAtFirst bool) {
	if doneAtFirst {
		s.guess -= s.guess / 8
	} else {
		s.guess += s.guess/8 + syncPoll/8
	}
	s.guess = min(max(s.guess, syncPoll), maxSyncGuess)
}

// reapNow collects the completion if it is there. A completion of an
// earlier submission (one whose wait ended on an io_getevents error) is
// not this sync's: taking it for this one would answer the round before
// its sync is done, so it is dropped and the wait goes on.
func (s *fileSyncer) reapNow() (err error, done bool) {
	var ts syscall.Timespec
	n, _, e := syscall.Syscall6(syscall.SYS_IO_GETEVENTS, s.ctx, 0, 1, uintptr(unsafe.Pointer(&s.events[0])), uintptr(unsafe.Pointer(&ts)), 0)
	if e == syscall.EINTR || (e == 0 && n == 0) {
		return nil, false
	}
	if e != 0 {
		return fmt.Errorf("io_getevents: %w", e), true
	}
	if s.events[0].data != s.seq {
		return nil, false
	}
	return s.result(), true
}

// reap waits for the completion (blocking), dropping earlier ones as
// reapNow does.
func (s *fileSyncer) reap() error {
	for {
		n, _, e := syscall.Syscall6(syscall.SYS_IO_GETEVENTS, s.ctx, 1, 1, uintptr(unsafe.Pointer(&s.events[0])), 0, 0)
		if e == syscall.EINTR {
			continue
		}
		if e != 0 {
			return fmt.Errorf("io_getevents: %w", e)
		}
		if n == 1 && s.events[0].data == s.seq {
			return s.result()
		}
	}
}

func (s *fileSyncer) result() error {
	if res := s.events[0].res; res < 0 {
		return syscall.Errno(-res)
	}
	return nil
}

// destroy drops the AIO context and the eventfd: the syncer syncs the
// plain way from then on.
func (s *fileSyncer) destroy() {
	if s.ctx == 0 {
		return
	}
	_, _, _ = syscall.Syscall(syscall.SYS_IO_DESTROY, s.ctx, 0, 0)
	_ = s.ev.Close()
	s.ctx, s.ev = 0, nil
}

// close releases what sync set up. A sync after it (a round still
// writing while its journal closes) is the plain fdatasync: it sets
// nothing up that nothing would release.
func (s *fileSyncer) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.setup = true
	s.destroy()
}
