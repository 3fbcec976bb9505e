//go:build unix

package storage

import (
	"errors"
	"os"
	"syscall"
	"time"
)

// errLockTimeout: lockFile gave up.
var errLockTimeout = errors.New("lock not obtained")

// lockFile takes an exclusive flock on f, retrying until timeout as bbolt
// does. bbolt later locks the same open file again, which succeeds at once
// (a flock belongs to the open file description), so the store holds its
// lock from before the file is verified until it is closed.
func lockFile(f *os.File, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return err
		}
		if time.Now().After(deadline) {
			return errLockTimeout
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// unlockFile releases lockFile's lock.
func unlockFile(f *os.File) error {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
}

// mapFile maps size bytes of f read-only, populated at once where the
// platform allows (mapPopulate): its caller walks every page.
func mapFile(f *os.File, size int64) (data []byte, unmap func(), err error) {
	if size <= 0 || int64(int(size)) != size {
		return nil, nil, errors.New("cannot map")
	}
	data, err = syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED|mapPopulate)
	if err != nil {
		return nil, nil, err
	}
	return data, func() { _ = syscall.Munmap(data) }, nil
}
