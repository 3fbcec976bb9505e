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
