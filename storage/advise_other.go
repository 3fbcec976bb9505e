//go:build !linux

package storage

import "os"

// mapPopulate: no MAP_POPULATE here (see advise_linux.go).
const mapPopulate = 0

// willNeed: no read-ahead hint here (see advise_linux.go).
func willNeed(*os.File, int64, int64) {}
