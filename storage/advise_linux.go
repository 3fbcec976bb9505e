package storage

import (
	"os"
	"syscall"
)

// mapPopulate makes mapFile's read-only mapping of a file about to be
// walked page by page populated in one call (read ahead and mapped at
// once) instead of faulting its pages in one by one: most of a warm walk's
// time was the faults.
const mapPopulate = syscall.MAP_POPULATE

// willNeed asks the kernel to start reading n bytes of f at off into the
// page cache (posix_fadvise WILLNEED) without waiting: the verification's
// scattered page reads are issued together instead of one after another.
func willNeed(f *os.File, off, n int64) {
	const fadvWillNeed = 3
	_, _, _ = syscall.Syscall6(syscall.SYS_FADVISE64, f.Fd(), uintptr(off), uintptr(n), fadvWillNeed, 0, 0)
}
