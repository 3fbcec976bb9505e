//go:build !unix

package storage

import (
	"errors"
	"os"
	"time"
)

var errLockTimeout = errors.New("lock not obtained")

// lockFile does nothing where flock is missing: bbolt's own lock (taken
// after the file is verified) is then the only one, and OpenDir does not
// serialize concurrent callers on one directory.
func lockFile(f *os.File, timeout time.Duration) error { return nil }

func unlockFile(f *os.File) error { return nil }

// mapFile is not available here: the verifier reads with pread.
func mapFile(f *os.File, size int64) ([]byte, func(), error) {
	return nil, nil, errors.New("not mapped on this platform")
}
