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
	f.Fuzz(func(t *testing.T, b []byte) {
		vs, err := protocol.DecodeVoters(b)
		if err != nil {
			return
		}
		if got, err := protocol.DecodeVoters(protocol.EncodeVoters(vs)); err != nil || !reflect.DeepEqual(got, vs) {
			t.Fatalf("re-encoding %v: %v, %v", vs, got, err)
		}
	})
}
