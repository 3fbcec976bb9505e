package protocol_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/replog-io/replog/protocol"
)

func TestVotersRoundTrip(t *testing.T) {
	for _, vs := range [][]protocol.Voter{
		{{ID: "n1", DirID: "d1"}},
		{{ID: "n1", DirID: "d1"}, {ID: "n2", DirID: "0123456789abcdef0123456789abcdef"}, {ID: "é", DirID: "\xff"}},
	} {
		got, err := protocol.DecodeVoters(protocol.EncodeVoters(vs))
		if err != nil || !reflect.DeepEqual(got, vs) {
			t.Fatalf("round trip of %v = %v, %v", vs, got, err)
		}
	}
}

// TestVoterSetOwedRoundTrip: a set with owed incarnations (R58) round
// trips in format 2; one without keeps format 1's bytes, so that logs
// written before owed lists existed read the same.
func TestVoterSetOwedRoundTrip(t *testing.T) {
	vs := []protocol.Voter{{ID: "n1", DirID: "d1"}, {ID: "n3", DirID: "d3"}}
	owed := []protocol.Voter{{ID: "n2", DirID: "d2"}}
	b := protocol.EncodeVoterSet(vs, owed)
	if b[0] != 2 {
		t.Fatalf("format %d with owed incarnations, want 2", b[0])
	}
	gotVs, gotOwed, err := protocol.DecodeVoterSet(b)
	if err != nil || !reflect.DeepEqual(gotVs, vs) || !reflect.DeepEqual(gotOwed, owed) {
		t.Fatalf("round trip: %v %v %v", gotVs, gotOwed, err)
	}
	if got, err := protocol.DecodeVoters(b); err != nil || !reflect.DeepEqual(got, vs) {
		t.Fatalf("DecodeVoters of a set with owed ones: %v %v", got, err)
	}
	plain := protocol.EncodeVoterSet(vs, nil)
	if plain[0] != 1 || string(plain) != string(protocol.EncodeVoters(vs)) {
		t.Fatalf("a set with none owed: format %d, bytes differ from EncodeVoters", plain[0])
	}
	if _, o, err := protocol.DecodeVoterSet(plain); err != nil || o != nil {
		t.Fatalf("format 1 decodes owed %v, %v", o, err)
	}
	for name, c := range map[string]struct {
		b    []byte
		want string
	}{
		"owed votes":       {protocol.EncodeVoterSet(vs, []protocol.Voter{{ID: "n1", DirID: "d0"}}), "a place it has"},
		"owed twice":       {protocol.EncodeVoterSet(vs, []protocol.Voter{{ID: "n2", DirID: "a"}, {ID: "n2", DirID: "b"}}), "twice"},
		"owed no dir":      {protocol.EncodeVoterSet(vs, []protocol.Voter{{ID: "n2"}}), "non-empty"},
		"format 2, none":   {append([]byte{2}, append(protocol.EncodeVoters(vs)[1:], 0)...), "no owed"},
		"format 2, cut":    {b[:len(b)-1], "runs past the end"},
		"format 2, extra":  {append(append([]byte(nil), b...), 7), "trailing"},
		"format 2, no end": {append([]byte{2}, protocol.EncodeVoters(vs)[1:]...), "voter count"},
	} {
		if _, _, err := protocol.DecodeVoterSet(c.b); !errors.Is(err, protocol.ErrMalformed) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want ErrMalformed mentioning %q", name, err, c.want)
		}
	}
}

func TestVotersRefused(t *testing.T) {
	good := protocol.EncodeVoters([]protocol.Voter{{ID: "n1", DirID: "d1"}, {ID: "n2", DirID: "d2"}})
	cases := []struct {
		name string
		b    []byte
		want string
	}{
		{"empty", nil, "0 bytes"},
		{"format", append([]byte{9}, good[1:]...), "format 9"},
		{"count past end", append([]byte{1, 3}, good[2:]...), "runs past the end"},
		{"trailing", append(append([]byte(nil), good...), 0), "trailing"},
		{"no voters", []byte{1, 0}, "0 voters"},
		{"twice", protocol.EncodeVoters([]protocol.Voter{{ID: "n1", DirID: "a"}, {ID: "n1", DirID: "b"}}), "twice"},
		{"no directory", protocol.EncodeVoters([]protocol.Voter{{ID: "n1"}}), "non-empty"},
		{"no id", protocol.EncodeVoters([]protocol.Voter{{DirID: "d"}}), "non-empty"},
	}
	for _, c := range cases {
		_, err := protocol.DecodeVoters(c.b)
		if !errors.Is(err, protocol.ErrMalformed) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want ErrMalformed mentioning %q", c.name, err, c.want)
		}
	}
}

func TestVoterChangeRoundTrip(t *testing.T) {
	for _, c := range []protocol.VoterChange{{Add: true, NodeID: "n4"}, {NodeID: "n1"}} {
		got, err := protocol.DecodeVoterChange(protocol.EncodeVoterChange(c))
		if err != nil || got != c {
			t.Fatalf("round trip of %+v = %+v, %v", c, got, err)
		}
	}
	for _, b := range [][]byte{nil, {1}, {2, 'x'}} {
		if _, err := protocol.DecodeVoterChange(b); !errors.Is(err, protocol.ErrMalformed) {
			t.Errorf("DecodeVoterChange(%q) = %v, want ErrMalformed", b, err)
		}
	}
}

func FuzzDecodeVoters(f *testing.F) {
	f.Add(protocol.EncodeVoters([]protocol.Voter{{ID: "n1", DirID: "d1"}}))
	f.Add([]byte{1, 255, 0, 0, 0, 1})
	f.Add(protocol.EncodeVoterSet([]protocol.Voter{{ID: "n1", DirID: "d1"}}, []protocol.Voter{{ID: "n2", DirID: "d2"}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		vs, owed, err := protocol.DecodeVoterSet(b)
		if err != nil {
			return
		}
		if got, gotOwed, err := protocol.DecodeVoterSet(protocol.EncodeVoterSet(vs, owed)); err != nil || !reflect.DeepEqual(got, vs) || !reflect.DeepEqual(gotOwed, owed) {
			t.Fatalf("re-encoding %v owing %v: %v %v, %v", vs, owed, got, gotOwed, err)
		}
	})
}
