package storage

import (
	"os"
	"syscall"
)

// fdatasync syncs f's data (and the metadata needed to read it back), not
// its times: the journal is preallocated, so its size never changes. It
// runs under the file's own reference (RawConn.Control), as f.Sync does:
// a bare f.Fd() would let a concurrent Close free the descriptor number,
// and a file opened meanwhile could take it and be synced instead.
func fdatasync(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = syscall.Fdatasync(int(fd)) }); err != nil {
		return err
	}
	return serr
}
