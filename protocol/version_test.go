package protocol_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/replog-io/replog/protocol"
)

// TestUnknownMessage: what a newer peer may send (a kind above the known
// ones, a version above Version) is ErrUnknownMessage as well as
// ErrMalformed, so a transport can drop it and keep the connection;
// garbage (kind 0, a version below MinVersion, a truncated body) is
// ErrMalformed only.
func TestUnknownMessage(t *testing.T) {
	good, err := protocol.AppendMessage(nil, protocol.Message{From: "a", To: "b", Body: &protocol.BeginEpoch{Epoch: 1, LeaderID: "a"}})
	if err != nil {
		t.Fatal(err)
	}
	edit := func(i int, v byte) []byte {
		b := append([]byte(nil), good...)
		b[i] = v
		return b
	}
	for _, c := range []struct {
		name    string
		b       []byte
		unknown bool
	}{
		{"new kind", edit(1, 200), true},
		{"next kind", edit(1, byte(protocol.KindHeartbeat)+1), true},
		{"newer version", edit(0, protocol.Version+1), true},
		{"kind zero", edit(1, 0), false},
		{"older version", edit(0, protocol.MinVersion-1), false},
		{"truncated", good[:len(good)-1], false},
	} {
		_, err := protocol.DecodeMessage(c.b)
		if !errors.Is(err, protocol.ErrMalformed) || errors.Is(err, protocol.ErrUnknownMessage) != c.unknown {
			t.Errorf("%s: %v; want ErrMalformed, ErrUnknownMessage %v", c.name, err, c.unknown)
		}
	}
}

// TestAppendMessageAt: every version spoken encodes (the version byte is
// the one asked for, and decodes back); one outside MinVersion..Version is
// refused with ErrVersion, dst unchanged.
func TestAppendMessageAt(t *testing.T) {
	m := protocol.Message{From: "a", To: "b", Body: &protocol.VoteRequest{Epoch: 4, CandidateID: "a"}}
	for v := uint8(protocol.MinVersion); v <= protocol.Version; v++ {
		b, err := protocol.AppendMessageAt(nil, m, v)
		if err != nil || b[0] != v {
			t.Fatalf("version %d: %x %v", v, b, err)
		}
		if _, err := protocol.DecodeMessage(b); err != nil {
			t.Fatalf("version %d does not decode: %v", v, err)
		}
	}
	cur, _ := protocol.AppendMessage(nil, m)
	if at, _ := protocol.AppendMessageAt(nil, m, protocol.Version); !bytes.Equal(cur, at) {
		t.Fatal("AppendMessage is not AppendMessageAt(Version)")
	}
	for _, v := range []uint8{protocol.MinVersion - 1, protocol.Version + 1} {
		dst := []byte("x")
		out, err := protocol.AppendMessageAt(dst, m, v)
		if !errors.Is(err, protocol.ErrVersion) || !bytes.Equal(out, dst) {
			t.Errorf("version %d: %q %v, want ErrVersion and dst unchanged", v, out, err)
		}
	}
}
