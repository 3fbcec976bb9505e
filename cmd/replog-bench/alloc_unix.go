//go:build unix

package main

import (
	"io/fs"
	"syscall"
)

// allocated returns the bytes of disk blocks allocated to fi's file, -1
// if unknown.
func allocated(fi fs.FileInfo) int64 {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return -1
	}
	return st.Blocks * 512 // st_blocks counts 512-byte units (POSIX)
}
