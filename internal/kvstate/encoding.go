package kvstate

import (
	"encoding/binary"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/replog-io/replog/protocol"
)

// An entry of the KV on the log is
//
//	'K' 'V' version op  uvarint(request) uvarint(len(key)) key uvarint(expected) value
//
// version is 1. request names the KV that appended it and the call
// within it (so that the caller learns its own outcome); expected is the
// revision an Update names (0 for the other operations); the value is
// the rest of the entry. The magic lets a log shared with other writers
// hold their entries too: anything that does not decode is skipped.
const (
	magic0       = 'K'
	magic1       = 'V'
	entryVersion = 1
)

// Op is an operation's kind on the log.
type Op byte

// The operations.
const (
	OpPut    Op = 1
	OpDelete Op = 2
	OpCreate Op = 3
	OpUpdate Op = 4
)

// String names the operation ("put", "delete", "create", "update").
func (o Op) String() string {
	switch o {
	case OpPut:
		return "put"
	case OpDelete:
		return "delete"
	case OpCreate:
		return "create"
	case OpUpdate:
		return "update"
	}
	return fmt.Sprintf("op(%d)", byte(o))
}

// Conditional reports whether o is checked where it is applied (Create,
// Update: R90).
func (o Op) Conditional() bool { return o == OpCreate || o == OpUpdate }

// Operation is one decoded entry.
type Operation struct {
	Op Op
	// Request names the KV that appended a conditional operation and the
	// call within it (0: none), so that the caller learns its outcome.
	Request uint64
	Key     string
	// Expected is the revision an Update names (0: the key has no value).
	Expected uint64
	Value    []byte
}

// Encode returns the entry for o.
func Encode(o Operation) []byte {
	b := make([]byte, 0, 4+3*binary.MaxVarintLen64+len(o.Key)+len(o.Value))
	b = append(b, magic0, magic1, entryVersion, byte(o.Op))
	b = binary.AppendUvarint(b, o.Request)
	b = binary.AppendUvarint(b, uint64(len(o.Key)))
	b = append(b, o.Key...)
	b = binary.AppendUvarint(b, o.Expected)
	return append(b, o.Value...)
}

// Decode parses an entry; any entry that is not a well-formed operation
// of a known version fails with ErrMalformed, and none panics. The value
// aliases b.
func Decode(b []byte) (Operation, error) {
	if len(b) < 4 || b[0] != magic0 || b[1] != magic1 {
		return Operation{}, fmt.Errorf("%w: no magic", ErrMalformed)
	}
	if b[2] != entryVersion {
		return Operation{}, fmt.Errorf("%w: version %d", ErrMalformed, b[2])
	}
	o := Operation{Op: Op(b[3])}
	switch o.Op {
	case OpPut, OpDelete, OpCreate, OpUpdate:
	default:
		return Operation{}, fmt.Errorf("%w: unknown %v", ErrMalformed, o.Op)
	}
	b = b[4:]
	var n int
	if o.Request, n = binary.Uvarint(b); n <= 0 {
		return Operation{}, fmt.Errorf("%w: request", ErrMalformed)
	}
	b = b[n:]
	kl, n := binary.Uvarint(b)
	if n <= 0 || kl > uint64(len(b)-n) {
		return Operation{}, fmt.Errorf("%w: key length", ErrMalformed)
	}
	b = b[n:]
	o.Key = string(b[:kl])
	b = b[kl:]
	if err := CheckKey(o.Key); err != nil {
		return Operation{}, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if o.Expected, n = binary.Uvarint(b); n <= 0 {
		return Operation{}, fmt.Errorf("%w: expected revision", ErrMalformed)
	}
	b = b[n:]
	if o.Op == OpDelete && len(b) > 0 {
		return Operation{}, fmt.Errorf("%w: a delete with a value", ErrMalformed)
	}
	if o.Op != OpUpdate && o.Expected != 0 {
		return Operation{}, fmt.Errorf("%w: an expected revision on a %v", ErrMalformed, o.Op)
	}
	o.Value = b
	return o, nil
}

// EntryKeyPrefix starts the entry key (docs/protocol.md R102, R105) of
// the KV's Puts and Deletes: a compacted log keeps the newest entry of
// each, so the newest Put or Delete of each KV key. The prefix keeps other
// writers' keys on a shared log apart from the KV's.
const EntryKeyPrefix = "kv/"

// EntryKey returns the entry key of an unconditional write of key, or ""
// when key is too long for one (protocol.MaxKeyLength): such a key's
// entries carry none and are never compacted.
func EntryKey(key string) string {
	if len(EntryKeyPrefix)+len(key) > protocol.MaxKeyLength {
		return ""
	}
	return EntryKeyPrefix + key
}

// DecodeEntry decodes a committed entry, given as a reader sees it (its
// entry key and its data): a tombstone (an entry with the KV's entry key
// and no data) is the Delete of its key, anything else Decode's.
func DecodeEntry(entryKey string, data []byte) (Operation, error) {
	if len(data) == 0 && strings.HasPrefix(entryKey, EntryKeyPrefix) {
		o := Operation{Op: OpDelete, Key: entryKey[len(EntryKeyPrefix):]}
		if err := CheckKey(o.Key); err != nil {
			return Operation{}, fmt.Errorf("%w: %w", ErrMalformed, err)
		}
		return o, nil
	}
	return Decode(data)
}

// MaxKeyBytes is the longest key, in bytes.
const MaxKeyBytes = 1024

// CheckKey is the rule for keys: non-empty UTF-8 of at most MaxKeyBytes,
// so that keys print, sort and travel in URLs. Errors: ErrInvalidKey.
func CheckKey(k string) error {
	switch {
	case k == "":
		return fmt.Errorf("%w: empty key", ErrInvalidKey)
	case len(k) > MaxKeyBytes:
		return fmt.Errorf("%w: key of %d bytes (at most %d)", ErrInvalidKey, len(k), MaxKeyBytes)
	case !utf8.ValidString(k):
		return fmt.Errorf("%w: key is not UTF-8", ErrInvalidKey)
	}
	return nil
}
