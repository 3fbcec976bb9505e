//go:build unix && !linux

package storage

// mapPopulate: no MAP_POPULATE here (see advise_linux.go).
const mapPopulate = 0
