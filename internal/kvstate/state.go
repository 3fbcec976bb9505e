package kvstate

import (
	"fmt"
	"slices"
)

// Record is a key's state: its value, or that it was deleted, and the
// revisions of its changes that a node may still hold in its log.
type Record struct {
	Value   []byte
	Rev     uint64 // the last change's revision
	Deleted bool
	Revs    []uint64 // newest last
}

// Live reports whether the key has a value.
func (r *Record) Live() bool { return r != nil && !r.Deleted }

// State is the KV's state: each key's record. Its zero value is not
// usable; make one with make(State).
type State map[string]*Record

// Outcome is what applying one committed entry did.
type Outcome struct {
	// Skipped is why the entry is no KV operation (wrapping ErrMalformed):
	// it changed nothing. The other fields are then zero.
	Skipped error
	// The operation applied.
	Op      Op
	Key     string
	Request uint64
	// Failed is a conditional operation's failure: ErrExists (wrapped) for
	// a Create, a *RevisionMismatchError for an Update; nil when it
	// succeeded, and for Put and Delete.
	Failed error
	// Changed says the key changed: to Value, or deleted (Deleted). A
	// failed conditional and a Delete of a key without a value change
	// nothing.
	Changed bool
	Value   []byte
	Deleted bool
}

// Apply applies the committed entry at offset (its entry key and data, as
// a reader sees them) to s and returns what it did (R90): a Put sets the
// key; a Delete deletes it if it has a value; a Create sets it only if it
// has none; an Update only if its revision (0: no value) is the one the
// entry names. Every node applies the same committed entries in the same
// order from the same state, so every node decides each conditional
// operation alike. The value is s's own copy.
func (s State) Apply(offset uint64, entryKey string, data []byte) Outcome {
	o, err := DecodeEntry(entryKey, data)
	if err != nil {
		return Outcome{Skipped: err}
	}
	r := s[o.Key]
	res := Outcome{Op: o.Op, Key: o.Key, Request: o.Request}
	switch o.Op {
	case OpPut:
		s.set(&res, r, o.Value, offset)
	case OpDelete:
		if r.Live() {
			r.Value, r.Deleted, r.Rev = nil, true, offset
			r.Revs = append(r.Revs, offset)
			res.Changed, res.Deleted = true, true
		}
	case OpCreate:
		if r.Live() {
			res.Failed = fmt.Errorf("%w: key %q is at revision %d", ErrExists, o.Key, r.Rev)
			break
		}
		s.set(&res, r, o.Value, offset)
	case OpUpdate:
		cur := s.Revision(o.Key)
		if cur != o.Expected && !bugUpdateNoRevision {
			res.Failed = &RevisionMismatchError{Key: o.Key, Expected: o.Expected, Current: cur}
			break
		}
		s.set(&res, r, o.Value, offset)
	}
	return res
}

// Revision is key's revision: its last change's offset, 0 when it has no
// value.
func (s State) Revision(key string) uint64 {
	if r := s[key]; r.Live() {
		return r.Rev
	}
	return 0
}

// set gives key (res.Key) the value at rev; r is its record, nil if none.
func (s State) set(res *Outcome, r *Record, value []byte, rev uint64) {
	if r == nil {
		r = &Record{}
		s[res.Key] = r
	}
	value = slices.Clone(value)
	r.Value, r.Deleted, r.Rev = value, false, rev
	r.Revs = append(r.Revs, rev)
	res.Changed, res.Value = true, value
}
