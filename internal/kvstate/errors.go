package kvstate

import (
	"errors"
	"fmt"
)

var (
	// ErrExists: a Create found the key already set when it was applied.
	ErrExists = errors.New("replog: kv: key exists")
	// ErrInvalidKey: a key is empty, longer than MaxKeyBytes or not UTF-8.
	ErrInvalidKey = errors.New("replog: kv: invalid key")
	// ErrRevisionMismatch is what every *RevisionMismatchError wraps.
	ErrRevisionMismatch = errors.New("replog: kv: revision mismatch")
	// ErrMalformed is why an entry is skipped: it is not a KV operation of
	// a version this package reads.
	ErrMalformed = errors.New("replog: kv: not a kv entry")
)

// RevisionMismatchError is an Update's failure: when it was applied the
// key's revision was Current (0: the key had no value), not Expected.
// It wraps ErrRevisionMismatch.
type RevisionMismatchError struct {
	Key      string
	Expected uint64
	Current  uint64
}

func (e *RevisionMismatchError) Error() string {
	return fmt.Sprintf("%v: key %q is at revision %d, not %d", ErrRevisionMismatch, e.Key, e.Current, e.Expected)
}

// Unwrap makes errors.Is(err, ErrRevisionMismatch) hold.
func (e *RevisionMismatchError) Unwrap() error { return ErrRevisionMismatch }
