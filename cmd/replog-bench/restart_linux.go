//go:build linux

package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"unsafe"
)

// dropDirCache asks the kernel to drop the cached pages of every file under
// root (posix_fadvise DONTNEED; /proc/sys/vm/drop_caches needs more than
// a container's root): the restart then reads its files cold.
func dropDirCache(root string) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		_ = syscall.Fdatasync(int(f.Fd()))
		const fadvDontNeed = 4 // POSIX_FADV_DONTNEED on Linux
		if _, _, e := syscall.Syscall6(syscall.SYS_FADVISE64, f.Fd(), 0, 0, fadvDontNeed, 0, 0); e != 0 {
			return e
		}
		return nil
	})
}

// residentBytes is the page cache held for the files under root (mincore
// over a read-only mapping of each).
func residentBytes(root string) int64 {
	var total int64
	ps := int64(os.Getpagesize())
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return nil
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil || fi.Size() == 0 {
			return nil
		}
		m, err := syscall.Mmap(int(f.Fd()), 0, int(fi.Size()), syscall.PROT_READ, syscall.MAP_SHARED)
		if err != nil {
			return nil
		}
		defer syscall.Munmap(m)
		vec := make([]byte, (fi.Size()+ps-1)/ps)
		if _, _, e := syscall.Syscall(syscall.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
			return nil
		}
		for _, v := range vec {
			if v&1 != 0 {
				total += ps
			}
		}
		return nil
	})
	return total
}

// readBytes is this process's read_bytes from /proc/self/io: what it
// caused to be read from the disk (-1 if unknown).
func readBytes() int64 {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "read_bytes: "); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err == nil {
				return n
			}
		}
	}
	return -1
}
