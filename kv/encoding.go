package kv

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/replog-io/replog"
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

// op is an operation's kind on the log.
type op byte

const (
	opPut    op = 1
	opDelete op = 2
	opCreate op = 3
	opUpdate op = 4
)

func (o op) String() string {
	switch o {
	case opPut:
		return "put"
	case opDelete:
		return "delete"
	case opCreate:
		return "create"
	case opUpdate:
		return "update"
	}
	return fmt.Sprintf("op(%d)", byte(o))
}

// operation is one decoded entry.
type operation struct {
	op       op
	request  uint64
	key      string
	expected uint64
	value    []byte
}

// errMalformed is why an entry is skipped: it is not a KV operation of a
// version this package reads.
var errMalformed = errors.New("replog: kv: not a kv entry")

// encode returns the entry for o.
func encode(o operation) []byte {
	b := make([]byte, 0, 4+3*binary.MaxVarintLen64+len(o.key)+len(o.value))
	b = append(b, magic0, magic1, entryVersion, byte(o.op))
	b = binary.AppendUvarint(b, o.request)
	b = binary.AppendUvarint(b, uint64(len(o.key)))
	b = append(b, o.key...)
	b = binary.AppendUvarint(b, o.expected)
	return append(b, o.value...)
}

// decode parses an entry; any entry that is not a well-formed operation
// of a known version fails with errMalformed, and none panics. The value
// aliases b.
func decode(b []byte) (operation, error) {
	if len(b) < 4 || b[0] != magic0 || b[1] != magic1 {
		return operation{}, fmt.Errorf("%w: no magic", errMalformed)
	}
	if b[2] != entryVersion {
		return operation{}, fmt.Errorf("%w: version %d", errMalformed, b[2])
	}
	o := operation{op: op(b[3])}
	switch o.op {
	case opPut, opDelete, opCreate, opUpdate:
	default:
		return operation{}, fmt.Errorf("%w: unknown %v", errMalformed, o.op)
	}
	b = b[4:]
	var n int
	if o.request, n = binary.Uvarint(b); n <= 0 {
		return operation{}, fmt.Errorf("%w: request", errMalformed)
	}
	b = b[n:]
	kl, n := binary.Uvarint(b)
	if n <= 0 || kl > uint64(len(b)-n) {
		return operation{}, fmt.Errorf("%w: key length", errMalformed)
	}
	b = b[n:]
	o.key = string(b[:kl])
	b = b[kl:]
	if err := checkKey(o.key); err != nil {
		return operation{}, fmt.Errorf("%w: %w", errMalformed, err)
	}
	if o.expected, n = binary.Uvarint(b); n <= 0 {
		return operation{}, fmt.Errorf("%w: expected revision", errMalformed)
	}
	b = b[n:]
	if o.op == opDelete && len(b) > 0 {
		return operation{}, fmt.Errorf("%w: a delete with a value", errMalformed)
	}
	if o.op != opUpdate && o.expected != 0 {
		return operation{}, fmt.Errorf("%w: an expected revision on a %v", errMalformed, o.op)
	}
	o.value = b
	return o, nil
}

// entryKeyPrefix starts the entry key (replog.WithKey, docs/protocol.md
// R102, R105) of the KV's Puts and Deletes: a compacted log keeps the
// newest entry of each, so the newest Put or Delete of each KV key. The
// prefix keeps other writers' keys on a shared log apart from the KV's.
const entryKeyPrefix = "kv/"

// entryKey returns the entry key of an unconditional write of key, or ""
// when key is too long for one (replog.MaxKeyLength): such a key's
// entries carry none and are never compacted.
func entryKey(key string) string {
	if len(entryKeyPrefix)+len(key) > replog.MaxKeyLength {
		return ""
	}
	return entryKeyPrefix + key
}

// decodeEntry decodes a committed entry: a tombstone (an entry with the
// KV's entry key and no data) is the Delete of its key, anything else
// decode's.
func decodeEntry(e replog.Entry) (operation, error) {
	if len(e.Data) == 0 && strings.HasPrefix(e.Key, entryKeyPrefix) {
		o := operation{op: opDelete, key: e.Key[len(entryKeyPrefix):]}
		if err := checkKey(o.key); err != nil {
			return operation{}, fmt.Errorf("%w: %w", errMalformed, err)
		}
		return o, nil
	}
	return decode(e.Data)
}

// MaxKeyBytes is the longest key, in bytes.
const MaxKeyBytes = 1024

// checkKey is the rule for keys: non-empty UTF-8 of at most MaxKeyBytes,
// so that keys print, sort and travel in URLs.
func checkKey(k string) error {
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
