//go:build !linux || !(amd64 || arm64)

package storage

import "os"

// fileSyncer syncs a journal file. Here it is plain fdatasync; on Linux
// (amd64, arm64) it parks the caller instead while other goroutines wait
// for a P (syncer_aio.go).
type fileSyncer struct{ parked uint64 }

func (*fileSyncer) sync(f *os.File) error { return fdatasync(f) }
func (*fileSyncer) close()                {}
