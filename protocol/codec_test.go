package protocol_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/replog-io/replog/internal/protocoltest"
	"github.com/replog-io/replog/protocol"
)

func roundTrip(t testing.TB, m protocol.Message) {
	t.Helper()
	b, err := protocol.AppendMessage(nil, m)
	if err != nil {
		t.Fatalf("encode %v: %v", m, err)
	}
	if len(b) != protocol.EncodedSize(m) {
		t.Fatalf("encoded %d bytes, EncodedSize says %d", len(b), protocol.EncodedSize(m))
	}
	if k := protocol.KindOf(b); k != m.Body.Kind() {
		t.Fatalf("KindOf = %v, want %v", k, m.Body.Kind())
	}
	got, err := protocol.DecodeMessage(b)
	if err != nil {
		t.Fatalf("decode %v: %v", m, err)
	}
	if want := protocoltest.Normalize(m); !reflect.DeepEqual(got, want) {
		t.Fatalf("round trip mismatch:\n got  %#v\n want %#v", got.Body, want.Body)
	}
	// A message is exactly its bytes: one more is an error.
	if _, err := protocol.DecodeMessage(append(b, 0)); !errors.Is(err, protocol.ErrMalformed) {
		t.Fatalf("decode with a trailing byte: %v, want ErrMalformed", err)
	}
	// Appending keeps what dst held.
	b2, err := protocol.AppendMessage([]byte("prefix"), m)
	if err != nil || !bytes.Equal(b2[:6], []byte("prefix")) || !bytes.Equal(b2[6:], b) {
		t.Fatalf("AppendMessage onto a prefix: %v", err)
	}
}

func TestCodecRoundTripSamples(t *testing.T) {
	kinds := map[protocol.Kind]bool{}
	for _, m := range protocoltest.Samples() {
		roundTrip(t, m)
		kinds[m.Body.Kind()] = true
	}
	for _, m := range protocoltest.NamedSamples() {
		roundTrip(t, m)
	}
	if len(kinds) != 9 {
		t.Fatalf("samples cover %d kinds, want 9", len(kinds))
	}
}

// TestCodecFieldLayout pins the wire position of the fields versions 2 and
// 3 added: a decoder that read them in another order would still round-trip
// its own messages, so the bytes are checked directly.
func TestCodecFieldLayout(t *testing.T) {
	be := binary.BigEndian
	body := func(m protocol.Message) []byte {
		b, err := protocol.AppendMessage(nil, m)
		if err != nil {
			t.Fatal(err)
		}
		if b[0] != protocol.Version {
			t.Fatalf("version %d, want %d", b[0], protocol.Version)
		}
		// Skip version, kind and the empty from, to and log strings.
		return b[protocol.HeaderSize+12:]
	}
	vreq := body(protocol.Message{Body: &protocol.VoteRequest{Epoch: 1, CandidateID: "c", LastEpoch: 2, LEO: 3, PreVote: true, Round: 0x0102030405060708}})
	if got := be.Uint64(vreq[8+4+1+8+8+1:]); got != 0x0102030405060708 {
		t.Fatalf("VoteRequest.Round on the wire = %#x", got)
	}
	vresp := body(protocol.Message{Body: &protocol.VoteResponse{Epoch: 1, VoterID: "v", Granted: true, PreVote: true, RequestEpoch: 0xAA, Round: 0xBB, LeaderID: "l"}})
	off := 8 + 4 + 1 + 1 + 1
	if be.Uint64(vresp[off:]) != 0xAA || be.Uint64(vresp[off+8:]) != 0xBB {
		t.Fatalf("VoteResponse RequestEpoch/Round on the wire = %#x/%#x", be.Uint64(vresp[off:]), be.Uint64(vresp[off+8:]))
	}
	areq := body(protocol.Message{Body: &protocol.AppendRequest{RequestID: 9, Epoch: 0xCC, Records: [][]byte{[]byte("r")}}})
	if be.Uint64(areq[8:]) != 0xCC || be.Uint32(areq[16:]) != 1 {
		t.Fatalf("AppendRequest.Epoch on the wire = %#x", be.Uint64(areq[8:]))
	}
	fresp := body(protocol.Message{Body: &protocol.FetchResponse{Entries: []protocol.Entry{{Offset: 1, Epoch: 2, Time: 0x0DD, Type: protocol.EntryData}}}})
	// fetch id, empty leader id, epoch, error, 4×u64, count, offset, epoch.
	if off := 8 + 4 + 8 + 1 + 32 + 4 + 8 + 8; be.Uint64(fresp[off:]) != 0x0DD {
		t.Fatalf("Entry.Time on the wire = %#x", be.Uint64(fresp[off:]))
	}
}

// TestCodecRoundTripProperty: decode(encode(m)) == m for random messages,
// of the default log and of named logs.
func TestCodecRoundTripProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		roundTrip(t, protocoltest.Random(r))
		roundTrip(t, protocoltest.RandomNamed(r))
	}
}

func TestCodecErrors(t *testing.T) {
	vote := protocol.Message{From: "a", To: "b", Body: &protocol.VoteRequest{Epoch: 1, CandidateID: "a", LastEpoch: 1, LEO: 2}}
	good, err := protocol.AppendMessage(nil, vote)
	if err != nil {
		t.Fatal(err)
	}
	fetch := protocol.Message{From: "a", To: "b", Body: &protocol.FetchResponse{Entries: []protocol.Entry{{Data: []byte("xyz")}}}}
	goodFetch, err := protocol.AppendMessage(nil, fetch)
	if err != nil {
		t.Fatal(err)
	}
	mutate := func(src []byte, f func([]byte) []byte) []byte {
		return f(append([]byte(nil), src...))
	}
	// Offset of the entries count in goodFetch: header, from, to, log,
	// fetch id, leader id, epoch, error, 4×u64.
	entriesCount := protocol.HeaderSize + 5 + 5 + 4 + 8 + 4 + 8 + 1 + 32
	cases := []struct {
		name    string
		msg     []byte
		wantMsg string
	}{
		{"empty", nil, "below the minimum"},
		{"below minimum", good[:protocol.MinSize-1], "below the minimum"},
		{"truncated", good[:len(good)-1], "voter directory id"},
		{"bad version", mutate(good, func(b []byte) []byte { b[0] = protocol.Version + 1; return b }), fmt.Sprintf("version %d, want %d..%d", protocol.Version+1, protocol.MinVersion, protocol.Version)},
		{"old version", mutate(good, func(b []byte) []byte { b[0] = 5; return b }), fmt.Sprintf("version 5, want %d..%d", protocol.MinVersion, protocol.Version)},
		{"bad kind", mutate(good, func(b []byte) []byte { b[1] = 42; return b }), "unknown kind 42"},
		{"kind zero", mutate(good, func(b []byte) []byte { b[1] = 0; return b }), "unknown kind 0"},
		{"string past end", mutate(good, func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[protocol.HeaderSize:], 1000)
			return b
		}), "from"},
		{"string length huge", mutate(good, func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[protocol.HeaderSize:], math.MaxUint32)
			return b
		}), "runs past the end"},
		// The request ends: pre-vote, round, two empty directory IDs.
		{"bad bool", mutate(good, func(b []byte) []byte { b[len(b)-8-8-1] = 2; return b }), "not a bool"},
		{"trailing bytes", append(append([]byte(nil), good...), 0, 0, 0, 0, 0), "5 trailing bytes"},
		{"missing field", mutate(good, func(b []byte) []byte { return append(b[:len(b)-16], 0, 0, 0, 0) }), "round"},
		{"entry count forged", mutate(goodFetch, func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[entriesCount:], math.MaxUint32)
			return b
		}), fmt.Sprintf("entries (byte %d): count 4294967295 needs", entriesCount)},
		{"entry count one too many", mutate(goodFetch, func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[entriesCount:], 2)
			return b
		}), "count 2 needs at least 58 bytes, 45 left"},
		{"entry data past end", mutate(goodFetch, func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[entriesCount+4+25:], 3+4+8+1+1) // past the log start voters' count, epoch and quiescent flag
			return b
		}), "entry data"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := protocol.DecodeMessage(c.msg)
			if !errors.Is(err, protocol.ErrMalformed) {
				t.Fatalf("err = %v, want ErrMalformed", err)
			}
			t.Log(err)
			if !strings.Contains(err.Error(), c.wantMsg) {
				t.Fatalf("err = %q, want it to mention %q", err, c.wantMsg)
			}
			if m.Body != nil {
				t.Fatalf("failed decode returned %v", m)
			}
		})
	}
}

func TestCodecEncodeErrors(t *testing.T) {
	for _, m := range []protocol.Message{{}, {Body: (*protocol.VoteRequest)(nil)}, {Body: (*protocol.FetchResponse)(nil)}} {
		dst := []byte("keep")
		got, err := protocol.AppendMessage(dst, m)
		if !errors.Is(err, protocol.ErrMalformed) {
			t.Errorf("AppendMessage(%#v) = %v, want ErrMalformed", m.Body, err)
		}
		if string(got) != "keep" {
			t.Errorf("AppendMessage(%#v) changed dst to %q", m.Body, got)
		}
		if protocol.EncodedSize(m) != -1 {
			t.Errorf("EncodedSize(%#v) = %d, want -1", m.Body, protocol.EncodedSize(m))
		}
	}
}

// TestKindOf: the kind is the second byte, readable before the rest; the
// kinds whose decoded form aliases its input are exactly those carrying
// byte slices.
func TestKindOf(t *testing.T) {
	if k := protocol.KindOf([]byte{protocol.Version}); k != 0 {
		t.Fatalf("KindOf of one byte = %v, want 0", k)
	}
	for _, m := range protocoltest.Samples() {
		b, _ := protocol.AppendMessage(nil, m)
		k := protocol.KindOf(b[:protocol.HeaderSize])
		if k != m.Body.Kind() {
			t.Fatalf("KindOf = %v, want %v", k, m.Body.Kind())
		}
		_, carries := m.Body.(*protocol.FetchResponse)
		_, records := m.Body.(*protocol.AppendRequest)
		if k.AliasesInput() != (carries || records) {
			t.Fatalf("%v.AliasesInput() = %t", k, k.AliasesInput())
		}
	}
}

// TestCodecAliasing: decoded data aliases the input with clipped capacity,
// so appending to one entry's data cannot overwrite the next.
func TestCodecAliasing(t *testing.T) {
	m := protocol.Message{From: "a", To: "b", Body: &protocol.FetchResponse{Entries: []protocol.Entry{{Data: []byte("aa")}, {Data: []byte("bb")}}}}
	b, _ := protocol.AppendMessage(nil, m)
	got, err := protocol.DecodeMessage(b)
	if err != nil {
		t.Fatal(err)
	}
	es := got.Body.(*protocol.FetchResponse).Entries
	_ = append(es[0].Data, 'X', 'X', 'X', 'X', 'X', 'X', 'X', 'X', 'X', 'X', 'X', 'X', 'X', 'X', 'X', 'X', 'X', 'X', 'X', 'X', 'X')
	if string(es[1].Data) != "bb" {
		t.Fatalf("append to entry 0 clobbered entry 1: %q", es[1].Data)
	}
}

// TestEncodeAllocs: encoding into a reused buffer allocates nothing.
func TestEncodeAllocs(t *testing.T) {
	m := protocoltest.FetchResponse1024()
	buf, _ := protocol.AppendMessage(nil, m)
	allocs := testing.AllocsPerRun(20, func() {
		buf, _ = protocol.AppendMessage(buf[:0], m)
	})
	if allocs != 0 {
		t.Fatalf("AppendMessage into a reused buffer: %v allocs/op, want 0", allocs)
	}
	// Decoding allocates the three strings, the body and one entry slice,
	// never per entry.
	allocs = testing.AllocsPerRun(20, func() {
		if _, err := protocol.DecodeMessage(buf); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 5 {
		t.Fatalf("DecodeMessage: %v allocs/op, want ≤ 5 (3 strings, body, entry slice)", allocs)
	}
}

func BenchmarkEncodeFetchResponse(b *testing.B) {
	m := protocoltest.FetchResponse1024()
	buf, _ := protocol.AppendMessage(nil, m)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		buf, _ = protocol.AppendMessage(buf[:0], m)
	}
}

func BenchmarkDecodeFetchResponse(b *testing.B) {
	buf, _ := protocol.AppendMessage(nil, protocoltest.FetchResponse1024())
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := protocol.DecodeMessage(buf); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeVoteRequest(b *testing.B) {
	m := protocol.Message{From: "n1", To: "n2", Body: &protocol.VoteRequest{Epoch: 5, CandidateID: "n1", LastEpoch: 4, LEO: 1000}}
	buf, _ := protocol.AppendMessage(nil, m)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		buf, _ = protocol.AppendMessage(buf[:0], m)
	}
}

func BenchmarkDecodeVoteRequest(b *testing.B) {
	buf, _ := protocol.AppendMessage(nil, protocol.Message{From: "n1", To: "n2", Body: &protocol.VoteRequest{Epoch: 5, CandidateID: "n1", LastEpoch: 4, LEO: 1000}})
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := protocol.DecodeMessage(buf); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzDecodeMessage fuzzes the message encoding (what transport's
// FuzzDecodeFrameBody used to reach behind a resealed checksum): no input
// panics; whatever decodes re-encodes to the same bytes (the encoding is
// canonical) and decodes to the same message; every error wraps
// ErrMalformed.
func FuzzDecodeMessage(f *testing.F) {
	for _, m := range protocoltest.Samples() {
		if protocol.EncodedSize(m) > 4096 {
			continue
		}
		b, err := protocol.AppendMessage(nil, m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	r := rand.New(rand.NewPCG(5, 6))
	for range 20 {
		b, _ := protocol.AppendMessage(nil, protocoltest.Random(r))
		f.Add(b)
	}
	// Messages of named logs, and the same bytes with a name the rule
	// refuses written over the valid one.
	for i, m := range protocoltest.NamedSamples() {
		if protocol.EncodedSize(m) > 4096 {
			continue
		}
		b, err := protocol.AppendMessage(nil, m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		bad := append([]byte(nil), b...)
		bad[protocol.HeaderSize+4+len(m.From)+4+len(m.To)+4] = ".A/"[i%3]
		f.Add(bad)
	}
	for range 20 {
		b, _ := protocol.AppendMessage(nil, protocoltest.RandomNamed(r))
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := protocol.DecodeMessage(b)
		if err != nil {
			if !errors.Is(err, protocol.ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		again, err := protocol.AppendMessage(nil, m)
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("re-encoding differs (%v)", err)
		}
		m2, err := protocol.DecodeMessage(again)
		if err != nil || !reflect.DeepEqual(m, m2) {
			t.Fatalf("second decode differs (%v)", err)
		}
	})
}

// TestAppendRequestType: a control request (a barrier) carries its type in
// one byte after the records; a data request is encoded without it, byte
// for byte as before the field existed (EntryData and zero alike), and the
// decoder takes exactly those forms: a type byte saying data, or naming a
// type it does not know, is malformed.
func TestAppendRequestType(t *testing.T) {
	data := protocol.Message{From: "f", To: "l", Body: &protocol.AppendRequest{RequestID: 3, Epoch: 2, Records: [][]byte{[]byte("x")}}}
	explicit := protocol.Message{From: "f", To: "l", Body: &protocol.AppendRequest{RequestID: 3, Epoch: 2, Records: [][]byte{[]byte("x")}, Type: protocol.EntryData}}
	control := protocol.Message{From: "f", To: "l", Body: &protocol.AppendRequest{RequestID: 3, Epoch: 2, Records: [][]byte{nil}, Type: protocol.EntryControl}}
	roundTrip(t, data)
	roundTrip(t, explicit)
	roundTrip(t, control)
	bd, _ := protocol.AppendMessage(nil, data)
	be, _ := protocol.AppendMessage(nil, explicit)
	if !bytes.Equal(bd, be) {
		t.Fatalf("Type EntryData encodes as %x, zero as %x: want the same bytes", be, bd)
	}
	// The data request's layout: header, from, to, log, request id, epoch,
	// record count, one record; nothing after it.
	if want := protocol.HeaderSize + 5 + 5 + 4 + 8 + 8 + 4 + 4 + 1; len(bd) != want {
		t.Fatalf("data request is %d bytes, want %d (no type byte)", len(bd), want)
	}
	bc, _ := protocol.AppendMessage(nil, control)
	if bc[len(bc)-1] != byte(protocol.EntryControl) {
		t.Fatalf("control request ends with %#x, want the type %#x", bc[len(bc)-1], byte(protocol.EntryControl))
	}
	m, err := protocol.DecodeMessage(bc)
	if err != nil || m.Body.(*protocol.AppendRequest).Type != protocol.EntryControl {
		t.Fatalf("decoded %v, %v", m, err)
	}
	voters := protocol.Message{From: "f", To: "l", Body: &protocol.AppendRequest{RequestID: 4, Epoch: 2, Records: [][]byte{protocol.EncodeVoterChange(protocol.VoterChange{Add: true, NodeID: "n4"})}, Type: protocol.EntryVoters}}
	roundTrip(t, voters)
	for _, typ := range []byte{0, byte(protocol.EntryData), 6, 0xFF} {
		bad := append(append([]byte(nil), bc[:len(bc)-1]...), typ)
		if _, err := protocol.DecodeMessage(bad); !errors.Is(err, protocol.ErrMalformed) || !strings.Contains(err.Error(), "type") {
			t.Errorf("type byte %#x: err = %v, want ErrMalformed naming the type", typ, err)
		}
	}
}
