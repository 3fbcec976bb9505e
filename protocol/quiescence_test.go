package protocol_test

import (
	"errors"
	"testing"

	"github.com/replog-io/replog/protocol"
)

// TestQuiescenceWire: at QuiescenceVersion the quiescent flags and a
// Heartbeat round-trip; below it the flags take no bytes (and decode as
// false: the fetch is a normal one to an older peer) and a Heartbeat
// cannot be encoded, nor decoded at a version that lacks it.
func TestQuiescenceWire(t *testing.T) {
	fetch := protocol.Message{From: "b", To: "a", Body: &protocol.FetchRequest{FetchID: 3, ReplicaID: "b", CurrentEpoch: 2, FetchOffset: 9, Quiescent: true}}
	answer := protocol.Message{From: "a", To: "b", Body: &protocol.FetchResponse{FetchID: 3, LeaderID: "a", Epoch: 2, HighWatermark: 9, Quiescent: true}}
	hb := protocol.Message{From: "a", To: "b", Body: &protocol.Heartbeat{Session: 77, Quiescent: 5, Resync: true}}
	for _, m := range []protocol.Message{fetch, answer, hb} {
		b, err := protocol.AppendMessageAt(nil, m, protocol.QuiescenceVersion)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) != protocol.EncodedSizeAt(m, protocol.QuiescenceVersion) {
			t.Fatalf("%s: %d bytes, EncodedSizeAt says %d", m, len(b), protocol.EncodedSizeAt(m, protocol.QuiescenceVersion))
		}
		got, err := protocol.DecodeMessage(b)
		if err != nil || !protocol.IsQuiescent(got) && m.Body.Kind() != protocol.KindHeartbeat || got.String() != m.String() {
			t.Fatalf("%s decodes as %s, %v", m, got, err)
		}
	}
	for _, m := range []protocol.Message{fetch, answer} {
		b, err := protocol.AppendMessageAt(nil, m, protocol.QuiescenceVersion-1)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) != protocol.EncodedSizeAt(m, protocol.QuiescenceVersion)-1 {
			t.Fatalf("%s at %d: %d bytes, want one fewer than at %d", m, protocol.QuiescenceVersion-1, len(b), protocol.QuiescenceVersion)
		}
		if got, err := protocol.DecodeMessage(b); err != nil || protocol.IsQuiescent(got) {
			t.Fatalf("%s at %d decodes as %s, %v: want it not quiescent", m, protocol.QuiescenceVersion-1, got, err)
		}
	}
	if _, err := protocol.AppendMessageAt(nil, hb, protocol.QuiescenceVersion-1); !errors.Is(err, protocol.ErrVersion) {
		t.Fatalf("a heartbeat at %d: %v, want ErrVersion", protocol.QuiescenceVersion-1, err)
	}
	b, _ := protocol.AppendMessageAt(nil, hb, protocol.QuiescenceVersion)
	b[0] = protocol.QuiescenceVersion - 1
	if _, err := protocol.DecodeMessage(b); !errors.Is(err, protocol.ErrMalformed) {
		t.Fatalf("a heartbeat decoded at %d: %v, want ErrMalformed", protocol.QuiescenceVersion-1, err)
	}
}
