//go:build linux

package main

import (
	"os"
	"syscall"
)

// fdatasync is what the store's journal uses on Linux.
func fdatasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }
