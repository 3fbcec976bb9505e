package kvstate

import (
	"errors"
	"testing"
)

// TestApply (R90): Put sets, Delete deletes a live key only, Create only
// if absent (ErrExists), Update only at the revision it names (0: absent;
// a *RevisionMismatchError carrying the current one); a tombstone is the
// Delete of its key; a foreign entry is skipped and changes nothing.
func TestApply(t *testing.T) {
	s := State{}
	put := func(key, v string) []byte { return Encode(Operation{Op: OpPut, Key: key, Value: []byte(v)}) }
	steps := []struct {
		key     string // the entry key
		data    []byte
		failed  error
		changed bool
		rev     uint64 // "a"'s revision after the step
	}{
		{"", []byte("not a kv entry"), nil, false, 0},
		{"", Encode(Operation{Op: OpUpdate, Request: 1, Key: "a", Expected: 0, Value: []byte("x")}), nil, true, 1},
		{"", Encode(Operation{Op: OpCreate, Request: 2, Key: "a", Value: []byte("y")}), ErrExists, false, 1},
		{"", Encode(Operation{Op: OpUpdate, Request: 3, Key: "a", Expected: 7, Value: []byte("z")}), ErrRevisionMismatch, false, 1},
		{"", Encode(Operation{Op: OpUpdate, Request: 4, Key: "a", Expected: 1, Value: []byte("w")}), nil, true, 4},
		{EntryKey("a"), put("a", "v"), nil, true, 5},
		{EntryKey("a"), nil, nil, true, 0}, // a tombstone
		{EntryKey("a"), nil, nil, false, 0},
		{"", Encode(Operation{Op: OpUpdate, Request: 8, Key: "a", Expected: 5, Value: []byte("u")}), ErrRevisionMismatch, false, 0},
		{"", Encode(Operation{Op: OpCreate, Request: 9, Key: "a", Value: []byte("c")}), nil, true, 9},
	}
	for i, st := range steps {
		o := s.Apply(uint64(i), st.key, st.data)
		if i == 0 {
			if !errors.Is(o.Skipped, ErrMalformed) || len(s) != 0 {
				t.Fatalf("a foreign entry: %+v, state %v", o, s)
			}
			continue
		}
		if o.Skipped != nil || !errors.Is(o.Failed, st.failed) || st.failed == nil && o.Failed != nil || o.Changed != st.changed {
			t.Fatalf("step %d: %+v; want failed %v, changed %v", i, o, st.failed, st.changed)
		}
		if got := s.Revision("a"); got != st.rev {
			t.Fatalf("step %d: revision %d, want %d", i, got, st.rev)
		}
		var m *RevisionMismatchError
		if errors.As(o.Failed, &m) && (m.Current != s.Revision("a") || m.Key != "a") {
			t.Fatalf("step %d: %+v does not carry the current revision %d", i, m, s.Revision("a"))
		}
	}
	if r := s["a"]; string(r.Value) != "c" || len(r.Revs) != 5 {
		t.Fatalf("the record: %+v", r)
	}
}
