package protocol_test

import (
	"errors"
	"testing"

	"github.com/replog-io/replog/internal/protocoltest"
	"github.com/replog-io/replog/protocol"
)

// TestSnapshotMessages: the snapshot transfer kinds round-trip at
// SnapshotTransferVersion (and as messages of named logs); below it they
// are refused on both sides: the encoder fails with ErrVersion (a peer of
// an older version would not know the kind) and the decoder refuses a
// frame that claims an older version.
func TestSnapshotMessages(t *testing.T) {
	kinds := map[protocol.Kind]bool{}
	for _, m := range protocoltest.SnapshotSamples() {
		roundTrip(t, m)
		m.Log = "orders"
		roundTrip(t, m)
		kinds[m.Body.Kind()] = true
		for v := uint8(protocol.MinVersion); v < protocol.SnapshotTransferVersion; v++ {
			if b, err := protocol.AppendMessageAt(nil, protocol.Message{Body: m.Body}, v); !errors.Is(err, protocol.ErrVersion) || len(b) != 0 {
				t.Fatalf("%v at version %d: %x %v, want ErrVersion", m, v, b, err)
			}
		}
		b, err := protocol.AppendMessageAt(nil, protocol.Message{Body: m.Body}, protocol.SnapshotTransferVersion)
		if err != nil {
			t.Fatal(err)
		}
		b[0] = protocol.SnapshotTransferVersion - 1
		b = append(b[:10], b[14:]...) // no log name below version 9
		if _, err := protocol.DecodeMessage(b); !errors.Is(err, protocol.ErrMalformed) {
			t.Fatalf("%v decoded at version %d: %v", m, b[0], err)
		}
	}
	if !kinds[protocol.KindSnapshotRequest] || !kinds[protocol.KindSnapshotResponse] || len(kinds) != 2 {
		t.Fatalf("snapshot samples cover %v", kinds)
	}
	if !protocol.KindSnapshotResponse.AliasesInput() || protocol.KindSnapshotRequest.AliasesInput() {
		t.Fatal("AliasesInput: a snapshot answer's data aliases its frame, a request has none")
	}
	// Truncated anywhere, a snapshot message is malformed, never a panic.
	for _, m := range protocoltest.SnapshotSamples() {
		b, _ := protocol.AppendMessage(nil, m)
		for n := range len(b) {
			if _, err := protocol.DecodeMessage(b[:n]); !errors.Is(err, protocol.ErrMalformed) {
				t.Fatalf("%v truncated to %d bytes: %v", m, n, err)
			}
			if n > 64 {
				break
			}
		}
	}
}
