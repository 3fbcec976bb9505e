package storage

import (
	"os"
	"syscall"
)

// fdatasync syncs f's data (and the metadata needed to read it back), not
// its times: the journal is preallocated, so its size never changes.
func fdatasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }
