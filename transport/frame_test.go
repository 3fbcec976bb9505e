package transport

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/replog-io/replog/internal/protocoltest"
	"github.com/replog-io/replog/protocol"
)

var (
	normalize      = protocoltest.Normalize
	sampleMessages = protocoltest.Samples
	randMessage    = protocoltest.Random
)

func roundTrip(t testing.TB, m protocol.Message) {
	t.Helper()
	frame, err := AppendFrame(nil, m)
	if err != nil {
		t.Fatalf("encode %v: %v", m, err)
	}
	if len(frame) != EncodedSize(m) {
		t.Fatalf("encoded %d bytes, EncodedSize says %d", len(frame), EncodedSize(m))
	}
	// Trailing bytes after the frame belong to the next frame.
	got, n, err := DecodeFrame(append(frame, 0xAA, 0xBB), 0)
	if err != nil {
		t.Fatalf("decode %v: %v", m, err)
	}
	if n != len(frame) {
		t.Fatalf("decode consumed %d bytes, frame is %d", n, len(frame))
	}
	if want := normalize(m); !reflect.DeepEqual(got, want) {
		t.Fatalf("round trip mismatch:\n got  %#v\n want %#v", got.Body, want.Body)
	}
	// Through the stream reader too.
	r := NewReader(bytes.NewReader(frame), 0)
	got2, err := r.Read()
	if err != nil {
		t.Fatalf("Reader.Read %v: %v", m, err)
	}
	if !reflect.DeepEqual(got2, normalize(m)) {
		t.Fatalf("Reader round trip mismatch for %v", m)
	}
	if _, err := r.Read(); err != io.EOF {
		t.Fatalf("Reader after last frame: %v, want io.EOF", err)
	}
}

func TestCodecRoundTripSamples(t *testing.T) {
	kinds := map[protocol.Kind]bool{}
	for _, m := range sampleMessages() {
		roundTrip(t, m)
		kinds[m.Body.Kind()] = true
	}
	if len(kinds) != 9 {
		t.Fatalf("samples cover %d kinds, want 9", len(kinds))
	}
}

// updateGolden rewrites the golden file of protocol.Version from today's
// codec: only with a change of protocol.Version (a deliberate change of
// the wire). The files of older versions are never rewritten: they are
// what the releases speaking only them read.
var updateGolden = flag.Bool("update-golden", false, "rewrite the golden frames of protocol.Version (only when protocol.Version changes)")

// goldenFrames names each wire version's golden file: testdata/frames.golden
// is version 6, the only one the previous release (30f352f) reads.
var goldenFrames = []struct {
	v    uint8
	path string
}{
	{6, "testdata/frames.golden"},
	{7, "testdata/frames_v7.golden"},
	{8, "testdata/frames_v8.golden"},
	{9, "testdata/frames_v9.golden"},
	{10, "testdata/frames_v10.golden"},
}

// goldenMessage is m as encoded for version v's golden file: from
// protocol.FeatureLevelVersion on a fetch carries FeatureLevel 7, from
// protocol.DurableOffsetVersion on a durable offset half its fetch
// offset, and from protocol.LogNameVersion on a message of an odd kind
// belongs to the log "orders-1" (so the fields' positions are pinned, and
// the default log's empty name too); below, a field is not sent at all.
func goldenMessage(m protocol.Message, v uint8) protocol.Message {
	if v >= protocol.LogNameVersion && m.Body != nil && m.Body.Kind()%2 == 1 {
		m.Log = "orders-1"
	}
	if f, ok := m.Body.(*protocol.FetchRequest); ok && f != nil && v >= protocol.FeatureLevelVersion {
		c := *f
		c.FeatureLevel = 7
		if v >= protocol.DurableOffsetVersion {
			c.HasDurableOffset, c.DurableOffset = true, c.FetchOffset/2
		}
		c.Quiescent = v >= protocol.QuiescenceVersion && c.FetchID%2 == 1
		m.Body = &c
	}
	if f, ok := m.Body.(*protocol.FetchResponse); ok && f != nil && v >= protocol.QuiescenceVersion {
		c := *f
		c.Quiescent = c.FetchID%2 == 1
		m.Body = &c
	}
	return m
}

// TestFrameGolden: the frames written today in each wire version spoken
// are byte for byte those in that version's golden file (the samples and
// 200 random messages, those of at most 4 KiB), and each decodes to its
// message. The version-6 file was first written by the codec before it
// moved to package protocol (proving the move kept the wire
// byte-identical), and rewritten with -update-golden for wire version 3
// (entry times, forwarded control entries, DeleteRecords); the version-7
// file was written when fetches began to carry FeatureLevel, the version-8
// file when they began to carry their durable offset, the version-9 file
// when every message began to carry its log's name, the version-10 file
// when fetches and their answers began to carry the quiescent flag. Any
// other
// change to the bytes on the wire fails here.
func TestFrameGolden(t *testing.T) {
	if last := goldenFrames[len(goldenFrames)-1].v; last != protocol.Version || goldenFrames[0].v != protocol.MinVersion {
		t.Fatalf("golden files cover %d..%d, the codec speaks %d..%d", goldenFrames[0].v, last, protocol.MinVersion, protocol.Version)
	}
	for _, g := range goldenFrames {
		msgs := sampleMessages()
		r := rand.New(rand.NewPCG(7, 8))
		for range 200 {
			msgs = append(msgs, randMessage(r))
		}
		if *updateGolden && g.v == protocol.Version {
			var out bytes.Buffer
			for _, m := range msgs {
				m = goldenMessage(m, g.v)
				if EncodedSizeAt(m, g.v) > 4096 {
					continue
				}
				f, err := AppendFrameAt(nil, m, g.v)
				if err != nil {
					t.Fatal(err)
				}
				fmt.Fprintf(&out, "%x\n", f)
			}
			if err := os.WriteFile(g.path, out.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		raw, err := os.ReadFile(g.path)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(raw))
		sc.Buffer(nil, 1<<20)
		i := 0
		for _, m := range msgs {
			m = goldenMessage(m, g.v)
			if EncodedSizeAt(m, g.v) > 4096 {
				continue
			}
			if !sc.Scan() {
				t.Fatalf("%s ends after %d frames", g.path, i)
			}
			want, err := hex.DecodeString(sc.Text())
			if err != nil {
				t.Fatal(err)
			}
			got, err := AppendFrameAt(nil, m, g.v)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("version %d frame %d (%v) differs from the golden frame:\n got  %x\n want %x", g.v, i, m, got, want)
			}
			dec, _, err := DecodeFrame(want, 0)
			if err != nil || !reflect.DeepEqual(dec, normalize(m)) {
				t.Fatalf("version %d golden frame %d decodes to %v (%v), want %v", g.v, i, dec, err, m)
			}
			i++
		}
		if sc.Scan() {
			t.Fatalf("%s has more than %d frames", g.path, i)
		}
		if i < 200 {
			t.Fatalf("only %d golden frames of version %d compared", i, g.v)
		}
	}
}

// TestCodecFieldLayout: a frame is the length of what follows (the
// message and the CRC), protocol's encoding of the message unchanged, and a CRC-32C of
// every byte before it. The message's own field layout is protocol's to
// test (protocol.TestCodecFieldLayout); this checks only the framing.
func TestCodecFieldLayout(t *testing.T) {
	be := binary.BigEndian
	for _, m := range []protocol.Message{
		{From: "a", To: "b", Body: &protocol.VoteRequest{Epoch: 1, CandidateID: "a", LastEpoch: 2, LEO: 3, PreVote: true, Round: 7}},
		{From: "b", To: "a", Body: &protocol.AppendRequest{RequestID: 9, Epoch: 0xCC, Records: [][]byte{[]byte("r")}}},
	} {
		f, err := AppendFrame(nil, m)
		if err != nil {
			t.Fatal(err)
		}
		msg, err := protocol.AppendMessage(nil, m)
		if err != nil {
			t.Fatal(err)
		}
		if n := be.Uint32(f); int(n) != len(msg)+crcSize {
			t.Errorf("%s: length field %d, want the message's %d bytes + the CRC", m, n, len(msg))
		}
		if !bytes.Equal(f[lenSize:len(f)-crcSize], msg) {
			t.Errorf("%s: frame body is not protocol's encoding of the message", m)
		}
		if got, want := be.Uint32(f[len(f)-crcSize:]), crc32.Checksum(f[:len(f)-crcSize], castagnoli); got != want {
			t.Errorf("%s: CRC %#x, want CRC-32C of length and message %#x", m, got, want)
		}
	}
}

// TestCodecRoundTripProperty: decode(encode(m)) == m for random messages,
// and frames concatenated in one stream decode back in order.
func TestCodecRoundTripProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var stream []byte
	var msgs []protocol.Message
	for range 2000 {
		m := randMessage(r)
		roundTrip(t, m)
		var err error
		if stream, err = AppendFrame(stream, m); err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, m)
	}
	rd := NewReader(bytes.NewReader(stream), 0)
	for i, want := range msgs {
		got, err := rd.Read()
		if err != nil {
			t.Fatalf("stream frame %d: %v", i, err)
		}
		if !reflect.DeepEqual(got, normalize(want)) {
			t.Fatalf("stream frame %d mismatch", i)
		}
	}
	if _, err := rd.Read(); err != io.EOF {
		t.Fatalf("end of stream: %v", err)
	}
}

// reseal recomputes the CRC of a hand-edited frame, so the decoder gets past
// the checksum to the field checks.
func reseal(f []byte) []byte {
	n := len(f)
	binary.BigEndian.PutUint32(f, uint32(n-lenSize))
	binary.BigEndian.PutUint32(f[n-crcSize:], crc32.Checksum(f[:n-crcSize], castagnoli))
	return f
}

// TestCodecErrors: every way a frame can be bad, through DecodeFrame and
// the stream Reader. Errors in the message behind a good checksum wrap
// ErrBadFrame and protocol.ErrMalformed (byte positions in their text count
// from the message's start, after the length prefix).
func TestCodecErrors(t *testing.T) {
	vote := protocol.Message{From: "a", To: "b", Body: &protocol.VoteRequest{Epoch: 1, CandidateID: "a", LastEpoch: 1, LEO: 2}}
	good, err := AppendFrame(nil, vote)
	if err != nil {
		t.Fatal(err)
	}
	fetch := protocol.Message{From: "a", To: "b", Body: &protocol.FetchResponse{Entries: []protocol.Entry{{Data: []byte("xyz")}}}}
	goodFetch, err := AppendFrame(nil, fetch)
	if err != nil {
		t.Fatal(err)
	}
	mutate := func(src []byte, f func([]byte) []byte) []byte {
		return f(append([]byte(nil), src...))
	}
	// Offset of the entries count in goodFetch: header, from, to, log,
	// fetch id, leader id, epoch, error, 4×u64.
	entriesCount := headerSize + 5 + 5 + 4 + 8 + 4 + 8 + 1 + 32
	cases := []struct {
		name      string
		frame     []byte
		max       int
		wantErr   error
		wantMsg   string
		malformed bool // also wraps protocol.ErrMalformed
	}{
		{"empty", nil, 0, ErrBadFrame, "truncated length prefix", false},
		{"short prefix", good[:3], 0, ErrBadFrame, "truncated length prefix", false},
		{"truncated frame", good[:len(good)-1], 0, ErrBadFrame, "truncated frame", false},
		{"truncated body", good[:10], 0, ErrBadFrame, "truncated frame", false},
		{"bad crc", mutate(good, func(f []byte) []byte { f[len(f)-1] ^= 1; return f }), 0, ErrBadFrame, "checksum", false},
		{"flipped body bit", mutate(good, func(f []byte) []byte { f[12] ^= 0x10; return f }), 0, ErrBadFrame, "checksum", false},
		{"bad version", mutate(good, func(f []byte) []byte { f[4] = protocol.Version + 1; return reseal(f) }), 0, ErrBadFrame, "version", true},
		{"old version", mutate(good, func(f []byte) []byte { f[4] = 1; return reseal(f) }), 0, ErrBadFrame, "version 1, want 6", true},
		{"bad kind", mutate(good, func(f []byte) []byte { f[5] = 42; return reseal(f) }), 0, ErrBadFrame, "unknown kind 42", true},
		{"kind zero", mutate(good, func(f []byte) []byte { f[5] = 0; return reseal(f) }), 0, ErrBadFrame, "unknown kind 0", true},
		{"oversize", good, len(good) - 1, ErrFrameTooLarge, "limit", false},
		{"huge length prefix", []byte{0xff, 0xff, 0xff, 0xff, 1, 3}, 0, ErrFrameTooLarge, "limit", false},
		{"below minimum", []byte{0, 0, 0, 2, 1, 3}, 0, ErrBadFrame, "minimum", false},
		{"string past end", mutate(good, func(f []byte) []byte {
			binary.BigEndian.PutUint32(f[headerSize:], 1000)
			return reseal(f)
		}), 0, ErrBadFrame, "from", true},
		{"string length huge", mutate(good, func(f []byte) []byte {
			binary.BigEndian.PutUint32(f[headerSize:], math.MaxUint32)
			return reseal(f)
		}), 0, ErrBadFrame, "runs past the end", true},
		{"bad bool", mutate(good, func(f []byte) []byte { f[len(f)-crcSize-8-8-1] = 2; return reseal(f) }), 0, ErrBadFrame, "not a bool", true},
		{"trailing bytes", mutate(good, func(f []byte) []byte {
			f = append(f[:len(f)-crcSize], 0, 0, 0, 0, 0)
			return reseal(f)
		}), 0, ErrBadFrame, "trailing", true},
		{"missing field", mutate(good, func(f []byte) []byte {
			f = append(f[:len(f)-crcSize-16], 0, 0, 0, 0) // round cut short, directory IDs gone
			return reseal(f)
		}), 0, ErrBadFrame, "round", true},
		{"entry count forged", mutate(goodFetch, func(f []byte) []byte {
			binary.BigEndian.PutUint32(f[entriesCount:], math.MaxUint32)
			return reseal(f)
		}), 0, ErrBadFrame, fmt.Sprintf("entries (byte %d): count 4294967295 needs", entriesCount-lenSize), true},
		{"entry count one too many", mutate(goodFetch, func(f []byte) []byte {
			binary.BigEndian.PutUint32(f[entriesCount:], 2)
			return reseal(f)
		}), 0, ErrBadFrame, "count 2 needs at least 58 bytes, 45 left", true},
		{"entry data past end", mutate(goodFetch, func(f []byte) []byte {
			binary.BigEndian.PutUint32(f[entriesCount+4+25:], 3+4+8+1+1) // past the log start voters' count, epoch and quiescent flag
			return reseal(f)
		}), 0, ErrBadFrame, "entry data", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, n, err := DecodeFrame(c.frame, c.max)
			if !errors.Is(err, c.wantErr) {
				t.Fatalf("err = %v, want %v", err, c.wantErr)
			}
			t.Log(err)
			if !strings.Contains(err.Error(), c.wantMsg) {
				t.Fatalf("err = %q, want it to mention %q", err, c.wantMsg)
			}
			if errors.Is(err, protocol.ErrMalformed) != c.malformed {
				t.Fatalf("err = %v: wraps protocol.ErrMalformed %t, want %t", err, !c.malformed, c.malformed)
			}
			if m.Body != nil || n != 0 {
				t.Fatalf("failed decode returned %v, %d", m, n)
			}
			// The stream reader agrees (or reports the truncation as EOF).
			_, rerr := NewReader(bytes.NewReader(c.frame), c.max).Read()
			if rerr == nil {
				t.Fatalf("Reader accepted a bad frame")
			}
			if !errors.Is(rerr, c.wantErr) && !errors.Is(rerr, io.EOF) && !errors.Is(rerr, io.ErrUnexpectedEOF) {
				t.Fatalf("Reader err = %v", rerr)
			}
		})
	}
}

func TestCodecEncodeErrors(t *testing.T) {
	for _, m := range []protocol.Message{{}, {Body: (*protocol.VoteRequest)(nil)}, {Body: (*protocol.FetchResponse)(nil)}} {
		if _, err := AppendFrame(nil, m); !errors.Is(err, ErrBadFrame) {
			t.Errorf("AppendFrame(%#v) = %v, want ErrBadFrame", m.Body, err)
		}
		if EncodedSize(m) != -1 {
			t.Errorf("EncodedSize(%#v) = %d, want -1", m.Body, EncodedSize(m))
		}
	}
}

// TestEncodeAllocs: framing into a reused buffer allocates nothing.
func TestEncodeAllocs(t *testing.T) {
	m := protocoltest.FetchResponse1024()
	buf, _ := AppendFrame(nil, m)
	allocs := testing.AllocsPerRun(20, func() {
		buf, _ = AppendFrame(buf[:0], m)
	})
	if allocs != 0 {
		t.Fatalf("AppendFrame into a reused buffer: %v allocs/op, want 0", allocs)
	}
	allocs = testing.AllocsPerRun(20, func() {
		if _, _, err := DecodeFrame(buf, 0); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 5 {
		t.Fatalf("DecodeFrame: %v allocs/op, want ≤ 5 (3 strings, body, entry slice)", allocs)
	}
}

// FuzzDecodeFrame: no input panics; whatever decodes re-encodes to the
// same bytes (the encoding is canonical) and decodes to the same message,
// and DecodeFrame and the stream Reader agree. (The fields behind the
// checksum are fuzzed by protocol's FuzzDecodeMessage.)
func FuzzDecodeFrame(f *testing.F) {
	for _, m := range sampleMessages() {
		if EncodedSize(m) > 4096 {
			continue
		}
		frame, err := AppendFrame(nil, m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(frame)
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 20 {
		frame, _ := AppendFrame(nil, randMessage(r))
		f.Add(frame)
	}
	for _, m := range protocoltest.NamedSamples() {
		if EncodedSize(m) > 4096 {
			continue
		}
		frame, err := AppendFrame(nil, m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(frame)
	}
	for range 20 {
		frame, _ := AppendFrame(nil, protocoltest.RandomNamed(r))
		f.Add(frame)
	}
	f.Add([]byte{0, 0, 0, 0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		const max = 1 << 20
		m, n, err := DecodeFrame(b, max)
		rd := NewReader(bytes.NewReader(b), max)
		m2, rerr := rd.Read()
		if err != nil {
			if !errors.Is(err, ErrBadFrame) && !errors.Is(err, ErrFrameTooLarge) {
				t.Fatalf("error %v wraps neither ErrBadFrame nor ErrFrameTooLarge", err)
			}
			if rerr == nil {
				t.Fatalf("DecodeFrame failed (%v) but Reader accepted", err)
			}
			return
		}
		if rerr != nil {
			t.Fatalf("DecodeFrame accepted but Reader failed: %v", rerr)
		}
		if !reflect.DeepEqual(m, m2) {
			t.Fatalf("DecodeFrame and Reader disagree")
		}
		again, err := AppendFrame(nil, m)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		if !bytes.Equal(again, b[:n]) {
			t.Fatalf("re-encoding differs from the decoded frame")
		}
	})
}

// A peer that announces a large frame and then sends little must not make
// the reader allocate the whole announced size up front.
func TestReaderAllocatesAsBytesArrive(t *testing.T) {
	frame, err := AppendFrame(nil, protocol.Message{From: "a", To: "b", Body: &protocol.FetchResponse{FetchID: 1}})
	if err != nil {
		t.Fatal(err)
	}
	// Announce a 15 MiB frame of the kind that gets its own buffer, then
	// send only the header and a few bytes.
	hdr := append([]byte(nil), frame[:headerSize]...)
	binary.BigEndian.PutUint32(hdr, 15<<20)
	in := io.MultiReader(bytes.NewReader(hdr), bytes.NewReader(make([]byte, 100)))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = NewReader(in, DefaultMaxFrameSize).Read()
	runtime.ReadMemStats(&after)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("truncated frame: %v, want io.ErrUnexpectedEOF", err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
		t.Fatalf("reading 106 bytes of an announced 15 MiB frame allocated %d bytes", grew)
	}
}
