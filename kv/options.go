package kv

import (
	"fmt"
	"log/slog"
)

// Options configures a KV. The zero value is a working KV that never
// snapshots. Open never modifies the caller's Options.
type Options struct {
	// SnapshotEveryEntries saves a snapshot of the KV's state
	// (Log.SaveSnapshot) once this many operations have been applied
	// since the last one. 0 (the default): never by count.
	SnapshotEveryEntries int
	// SnapshotEveryBytes saves a snapshot once the operations applied
	// since the last one add up to this many bytes of entries. 0 (the
	// default): never by size. With both set, whichever comes first.
	SnapshotEveryBytes int64
	// WatchBuffer is how many of the latest changes the KV keeps for its
	// watchers: a Watch that falls further behind ends with
	// ErrWatchBehind. Default 4096.
	WatchBuffer int
	// Logger receives failed snapshots (at Warn) and skipped entries (at
	// Debug). Default slog.Default().
	Logger *slog.Logger
}

// defaultWatchBuffer is WatchBuffer's default.
const defaultWatchBuffer = 4096

// Validate reports the first bad field, wrapping ErrInvalidOptions.
func (o Options) Validate() error {
	switch {
	case o.SnapshotEveryEntries < 0:
		return fmt.Errorf("%w: SnapshotEveryEntries %d is negative", ErrInvalidOptions, o.SnapshotEveryEntries)
	case o.SnapshotEveryBytes < 0:
		return fmt.Errorf("%w: SnapshotEveryBytes %d is negative", ErrInvalidOptions, o.SnapshotEveryBytes)
	case o.WatchBuffer < 0:
		return fmt.Errorf("%w: WatchBuffer %d is negative", ErrInvalidOptions, o.WatchBuffer)
	}
	return nil
}

// withDefaults returns a copy of o with its zero fields set to their
// defaults.
func (o Options) withDefaults() Options {
	if o.WatchBuffer == 0 {
		o.WatchBuffer = defaultWatchBuffer
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}
