package faults

import (
	"strings"
	"testing"
)

// TestCheckKV: the KV checker passes the states the writes explain and
// finds the ones they do not: an acknowledged write lost (its key at an
// older value, or absent), a revision other than the acknowledgement's,
// a value no one wrote, a key no one wrote; an unknown write after the
// acknowledged one may or may not have been applied, a refused or failed
// one never was.
func TestCheckKV(t *testing.T) {
	ops := []KVOp{
		{Kind: "put", Key: "a", Value: "a1", Outcome: OK, Revision: 10},
		{Kind: "put", Key: "a", Value: "a2", Outcome: OK, Revision: 12},
		{Kind: "put", Key: "b", Value: "b1", Outcome: OK, Revision: 11},
		{Kind: "delete", Key: "b", Outcome: OK, Revision: 14},
		{Kind: "put", Key: "c", Value: "c1", Outcome: OK, Revision: 13},
		{Kind: "put", Key: "c", Value: "c2", Outcome: Unknown},
		{Kind: "update", Key: "d", Value: "d1", Outcome: Refused},
		{Kind: "put", Key: "e", Value: "e1", Outcome: Failed},
	}
	good := []KVEntry{{Key: "a", Value: "a2", Revision: 12}, {Key: "c", Value: "c1", Revision: 13}}
	if bad := CheckKV(ops, good); len(bad) != 0 {
		t.Errorf("the acknowledged state: %v", bad)
	}
	withUnknown := []KVEntry{{Key: "a", Value: "a2", Revision: 12}, {Key: "c", Value: "c2", Revision: 20}}
	if bad := CheckKV(ops, withUnknown); len(bad) != 0 {
		t.Errorf("the unknown write applied: %v", bad)
	}
	for _, tc := range []struct {
		name  string
		state []KVEntry
		key   string
	}{
		{"lost put", []KVEntry{{Key: "a", Value: "a1", Revision: 10}, {Key: "c", Value: "c1", Revision: 13}}, `"a"`},
		{"key gone", []KVEntry{{Key: "c", Value: "c1", Revision: 13}}, `"a"`},
		{"other revision", []KVEntry{{Key: "a", Value: "a2", Revision: 15}, {Key: "c", Value: "c1", Revision: 13}}, `"a"`},
		{"lost delete", []KVEntry{{Key: "a", Value: "a2", Revision: 12}, {Key: "b", Value: "b1", Revision: 11}, {Key: "c", Value: "c1", Revision: 13}}, `"b"`},
		{"unknown below the ack", []KVEntry{{Key: "a", Value: "a2", Revision: 12}, {Key: "c", Value: "c2", Revision: 9}}, `"c"`},
		{"refused applied", append(good[:2:2], KVEntry{Key: "d", Value: "d1", Revision: 16}), `"d"`},
		{"failed applied", append(good[:2:2], KVEntry{Key: "e", Value: "e1", Revision: 16}), `"e"`},
		{"no one wrote it", append(good[:2:2], KVEntry{Key: "z", Value: "z", Revision: 17}), `"z"`},
	} {
		bad := CheckKV(ops, tc.state)
		if len(bad) != 1 || !strings.Contains(bad[0], "key "+tc.key) {
			t.Errorf("%s: %v, want one violation of key %s", tc.name, bad, tc.key)
		}
	}
	if err := DiffKV(KVState{Entries: good}, KVState{Entries: withUnknown}); err == nil {
		t.Errorf("DiffKV found two states alike that differ in a key")
	}
	if err := DiffKV(KVState{Entries: good, Next: 1}, KVState{Entries: good, Next: 2}); err != nil {
		t.Errorf("DiffKV: equal entries: %v", err)
	}
}
