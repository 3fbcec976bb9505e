package protocol_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/replog-io/replog/internal/protocoltest"
	"github.com/replog-io/replog/protocol"
)

// TestValidLogName: the name rule's edges, each side of each bound.
func TestValidLogName(t *testing.T) {
	max := strings.Repeat("a", protocol.MaxLogNameLength)
	for _, name := range []string{"a", "orders", "tenant-42", "a.b_c-d", "0", "x.", "_", "-", "a..b", max} {
		if err := protocol.ValidLogName(name); err != nil {
			t.Errorf("%q: %v, want valid", name, err)
		}
	}
	for _, name := range []string{"", max + "a", ".", "..", ".hidden", "Orders", "a/b", `a\b`, "a b", "a\x00", "é", "a:b", "a*"} {
		if err := protocol.ValidLogName(name); !errors.Is(err, protocol.ErrInvalidLogName) {
			t.Errorf("%q: %v, want ErrInvalidLogName", name, err)
		}
	}
}

// TestLogNameAtVersion9 (R79): from LogNameVersion on every kind of
// message carries its log's name right after To (4 bytes for the default
// log's empty one, EncodedSizeAt exact) and reads back with it; at 8 a
// message of the default log encodes as it always did and decodes with no
// name, and one of a named log is refused (ErrLogNameVersion, dst
// unchanged) rather than encoded without its name, which the peer would
// read as the default log's.
func TestLogNameAtVersion9(t *testing.T) {
	if protocol.Version < protocol.LogNameVersion || protocol.FeatureLevelNamedLogs < protocol.LogNameVersion || protocol.LogNameVersion <= protocol.DurableOffsetVersion {
		t.Fatalf("Version %d, LogNameVersion %d, FeatureLevelNamedLogs %d: the name must come after version 8, and the level no earlier than it",
			protocol.Version, protocol.LogNameVersion, protocol.FeatureLevelNamedLogs)
	}
	const name = "orders.eu-1_a"
	kinds := map[protocol.Kind]bool{}
	for _, m := range protocoltest.Samples() {
		kinds[m.Body.Kind()] = true
		at8, err := protocol.AppendMessageAt(nil, m, 8)
		if err != nil {
			t.Fatal(err)
		}
		at9, err := protocol.AppendMessageAt(nil, m, protocol.LogNameVersion)
		if err != nil {
			t.Fatal(err)
		}
		if len(at9) != len(at8)+4 || len(at9) != protocol.EncodedSizeAt(m, 9) || len(at8) != protocol.EncodedSizeAt(m, 8) {
			t.Fatalf("%v: %d bytes at 8, %d at 9 (EncodedSizeAt %d, %d): want 4 more at 9", m, len(at8), len(at9), protocol.EncodedSizeAt(m, 8), protocol.EncodedSizeAt(m, 9))
		}
		for _, b := range [][]byte{at8, at9} {
			got, err := protocol.DecodeMessage(b)
			if err != nil || got.Log != "" || !reflect.DeepEqual(got, protocoltest.Normalize(m)) {
				t.Fatalf("%v at %d: decoded %v (log %q), %v", m, b[0], got, got.Log, err)
			}
		}

		named := m
		named.Log = name
		dst := []byte("keep")
		out, err := protocol.AppendMessageAt(dst, named, 8)
		if !errors.Is(err, protocol.ErrLogNameVersion) || !bytes.Equal(out, dst) {
			t.Fatalf("%v of log %q at 8: %q, %v; want ErrLogNameVersion and dst unchanged", m, name, out, err)
		}
		b, err := protocol.AppendMessageAt(nil, named, protocol.LogNameVersion)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) != len(at9)+len(name) || len(b) != protocol.EncodedSizeAt(named, 9) {
			t.Fatalf("%v of log %q: %d bytes, want %d", m, name, len(b), len(at9)+len(name))
		}
		// The name sits right after To: header, From, To, then its length.
		off := protocol.HeaderSize + 4 + len(m.From) + 4 + len(m.To)
		if n := binary.BigEndian.Uint32(b[off:]); n != uint32(len(name)) || string(b[off+4:off+4+len(name)]) != name {
			t.Fatalf("%v: the name is not after To (length %d at byte %d)", m, n, off)
		}
		got, err := protocol.DecodeMessage(b)
		if want := protocoltest.Normalize(named); err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("%v of log %q decoded as %v (log %q), %v", m, name, got, got.Log, err)
		}
	}
	if len(kinds) != 9 {
		t.Fatalf("samples cover %d kinds, want 9", len(kinds))
	}
}

// TestDecodeRefusesBadLogName: a version-9 message whose name the rule
// refuses is malformed (and says it is the name), never delivered as a log
// of that name; encoding one is refused too, at every version.
func TestDecodeRefusesBadLogName(t *testing.T) {
	body := &protocol.BeginEpoch{Epoch: 4, LeaderID: "l"}
	for _, bad := range []string{".", "..", ".x", "Orders", "a/b", "a\x00", strings.Repeat("a", protocol.MaxLogNameLength+1)} {
		// The default log's encoding with the bad name spliced in where
		// its empty one is: the bytes a peer could send.
		def, err := protocol.AppendMessage(nil, protocol.Message{From: "l", To: "f", Body: body})
		if err != nil {
			t.Fatal(err)
		}
		off := protocol.HeaderSize + 5 + 5
		b := append(binary.BigEndian.AppendUint32(append([]byte(nil), def[:off]...), uint32(len(bad))), bad...)
		b = append(b, def[off+4:]...)
		_, err = protocol.DecodeMessage(b)
		if !errors.Is(err, protocol.ErrMalformed) || !errors.Is(err, protocol.ErrInvalidLogName) || !strings.Contains(err.Error(), "log (byte") {
			t.Errorf("log %q: %v, want ErrMalformed and ErrInvalidLogName naming the field", bad, err)
		}
		for v := uint8(protocol.MinVersion); v <= protocol.Version; v++ {
			if _, err := protocol.AppendMessageAt(nil, protocol.Message{From: "l", To: "f", Log: bad, Body: body}, v); err == nil {
				t.Errorf("log %q encoded at %d", bad, v)
			}
		}
	}
	// Positive control: a valid name spliced in the same way decodes.
	def, _ := protocol.AppendMessage(nil, protocol.Message{From: "l", To: "f", Body: body})
	off := protocol.HeaderSize + 5 + 5
	b := append(binary.BigEndian.AppendUint32(append([]byte(nil), def[:off]...), 2), "ok"...)
	b = append(b, def[off+4:]...)
	if m, err := protocol.DecodeMessage(b); err != nil || m.Log != "ok" {
		t.Fatalf("valid name: %v, %v", m, err)
	}
}
