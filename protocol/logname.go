package protocol

import (
	"errors"
	"fmt"
)

// MaxLogNameLength is the longest name a named log may have, in bytes.
const MaxLogNameLength = 64

// ErrInvalidLogName: a log name ValidLogName refuses. A decoded message
// naming such a log wraps it together with ErrMalformed.
var ErrInvalidLogName = errors.New("replog: invalid log name")

// ValidLogName reports whether name may name a log: 1 to
// MaxLogNameLength bytes of [a-z0-9._-], not starting with '.' (so
// neither "." nor ".."). It is the one definition of the rule: the codec
// refuses a message naming another, and a node creates no log of
// another name. The alphabet keeps a name safe as a path element of a
// data directory and as a metric label on every platform (no case
// folding, no separators, no hidden files); the empty name is the
// default log's, which has no name to validate.
//
// The error wraps ErrInvalidLogName and says what is wrong.
func ValidLogName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty (the default log has no name)", ErrInvalidLogName)
	case len(name) > MaxLogNameLength:
		return fmt.Errorf("%w: %d bytes, at most %d", ErrInvalidLogName, len(name), MaxLogNameLength)
	case name[0] == '.':
		return fmt.Errorf("%w: %q starts with '.'", ErrInvalidLogName, name)
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: %q has %q at byte %d (allowed: a-z 0-9 . _ -)", ErrInvalidLogName, name, c, i)
		}
	}
	return nil
}
