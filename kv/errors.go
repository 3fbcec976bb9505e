package kv

import (
	"errors"

	"github.com/replog-io/replog/internal/kvstate"
)

var (
	// ErrNotFound: the key has no value on this node (never set, or
	// deleted).
	ErrNotFound = errors.New("replog: kv: key not found")
	// ErrExists: a Create found the key already set when it was applied.
	ErrExists = kvstate.ErrExists
	// ErrInvalidKey: a key is empty, longer than MaxKeyBytes or not UTF-8.
	ErrInvalidKey = kvstate.ErrInvalidKey
	// ErrInvalidOptions: Options.Validate found a bad field; the message
	// names it.
	ErrInvalidOptions = errors.New("replog: kv: invalid options")
	// ErrClosed: the KV was closed, or its Log closed.
	ErrClosed = errors.New("replog: kv: closed")
	// ErrStopped: the KV stopped applying the log on an error (wrapped
	// with it), e.g. an *replog.OutOfRangeError when retention deleted
	// entries it had not applied yet. Close it and open another.
	ErrStopped = errors.New("replog: kv: stopped")
	// ErrWatchBehind: a Watch fell more than Options.WatchBuffer changes
	// behind; watch again (after a Get or Keys for the current values).
	ErrWatchBehind = errors.New("replog: kv: watch fell behind")
)

// RevisionMismatchError is an Update's failure: when it was applied the
// key's revision was Current (0: the key had no value), not Expected.
// It wraps ErrRevisionMismatch.
type RevisionMismatchError = kvstate.RevisionMismatchError

// ErrRevisionMismatch is what every *RevisionMismatchError wraps.
var ErrRevisionMismatch = kvstate.ErrRevisionMismatch
