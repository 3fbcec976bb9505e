package transport

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"math"
	"math/rand/v2"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/replog-io/replog/storage"
)

// normalize maps empty slices to nil, which is how they decode.
func normalize(m Message) Message {
	switch b := m.Body.(type) {
	case *FetchResponse:
		c := *b
		if len(c.Entries) == 0 {
			c.Entries = nil
		} else {
			c.Entries = append([]storage.Entry(nil), c.Entries...)
			for i := range c.Entries {
				if len(c.Entries[i].Data) == 0 {
					c.Entries[i].Data = nil
				}
			}
		}
		m.Body = &c
	case *AppendRequest:
		c := *b
		if len(c.Records) == 0 {
			c.Records = nil
		} else {
			c.Records = append([][]byte(nil), c.Records...)
			for i := range c.Records {
				if len(c.Records[i]) == 0 {
					c.Records[i] = nil
				}
			}
		}
		m.Body = &c
	}
	return m
}

func roundTrip(t testing.TB, m Message) {
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

// sampleMessages returns one or more messages of every kind, edge cases
// included.
func sampleMessages() []Message {
	big := bytes.Repeat([]byte{0x5A}, 1<<20)
	return []Message{
		{From: "a", To: "b", Body: &FetchRequest{FetchID: 1, ReplicaID: "a", CurrentEpoch: 2, FetchOffset: 3, LastFetchedEpoch: 1, MaxBytes: 1 << 20, MaxWaitMs: 500}},
		{Body: &FetchRequest{}},
		{From: "n1", To: "n2", Body: &FetchRequest{FetchID: math.MaxUint64, CurrentEpoch: math.MaxUint64, FetchOffset: math.MaxUint64, LastFetchedEpoch: math.MaxUint64, MaxBytes: math.MaxUint32, MaxWaitMs: math.MaxUint32}},
		{From: "b", To: "a", Body: &FetchResponse{FetchID: 9, LeaderID: "b", Epoch: 4, HighWatermark: 10, LogStartOffset: 0}},
		{From: "b", To: "a", Body: &FetchResponse{FetchID: 9, LeaderID: "b", Epoch: 4, Entries: []storage.Entry{}}},
		{From: "b", To: "a", Body: &FetchResponse{FetchID: 1, LeaderID: "b", Epoch: 5, Error: FetchDivergingEpoch, DivergingEpoch: 3, DivergingEndOffset: 77}},
		{From: "b", To: "a", Body: &FetchResponse{FetchID: 2, LeaderID: "", Epoch: 5, Error: FetchError(200)}},
		{From: "b", To: "a", Body: &FetchResponse{FetchID: 3, LeaderID: "b", Epoch: 4, HighWatermark: 3, Entries: []storage.Entry{
			{Offset: 0, Epoch: 1, Type: storage.EntryData, Data: []byte("hello")},
			{Offset: 1, Epoch: 1, Type: storage.EntryControl},
			{Offset: 2, Epoch: 4, Type: storage.EntryData, Data: []byte{}},
			{Offset: 3, Epoch: 4, Type: storage.EntryType(99), Data: big},
		}}},
		{From: "x", To: "y", Body: &VoteRequest{Epoch: 7, CandidateID: "x", LastEpoch: 6, LEO: 100, PreVote: true, Round: 41}},
		{From: "x", To: "y", Body: &VoteRequest{Epoch: math.MaxUint64, CandidateID: "x", Round: math.MaxUint64}},
		{Body: &VoteRequest{}},
		{From: "y", To: "x", Body: &VoteResponse{Epoch: 7, VoterID: "y", Granted: true, PreVote: true, RequestEpoch: 8, Round: 41, LeaderID: "z"}},
		{From: "y", To: "x", Body: &VoteResponse{Epoch: 7, VoterID: "y", RequestEpoch: math.MaxUint64, Round: math.MaxUint64}},
		{Body: &VoteResponse{}},
		{From: "l", To: "f", Body: &BeginEpoch{Epoch: 8, LeaderID: "l"}},
		{Body: &BeginEpoch{}},
		{From: "f", To: "l", Body: &AppendRequest{RequestID: 5, Epoch: 3, Records: [][]byte{[]byte("r1"), nil, {}, big}}},
		{From: "f", To: "l", Body: &AppendRequest{RequestID: 7, Epoch: math.MaxUint64, Records: [][]byte{[]byte("r")}}},
		{From: "f", To: "l", Body: &AppendRequest{RequestID: 6}},
		{From: "f", To: "l", Body: &AppendRequest{RequestID: 6, Records: [][]byte{}}},
		{From: "l", To: "f", Body: &AppendResponse{RequestID: 5, Error: AppendNotLeader, LeaderID: "q", FirstOffset: 12}},
		{Body: &AppendResponse{}},
		{From: strings.Repeat("é", 100), To: "\x00", Body: &BeginEpoch{Epoch: 1, LeaderID: "\xff\xfe"}},
	}
}

func TestCodecRoundTripSamples(t *testing.T) {
	kinds := map[Kind]bool{}
	for _, m := range sampleMessages() {
		roundTrip(t, m)
		kinds[m.Body.Kind()] = true
	}
	if len(kinds) != 7 {
		t.Fatalf("samples cover %d kinds, want 7", len(kinds))
	}
}

// TestCodecFieldLayout pins the wire position of the fields frame version 2
// added: a decoder that read them in another order would still round-trip
// its own frames, so the bytes are checked directly.
func TestCodecFieldLayout(t *testing.T) {
	be := binary.BigEndian
	body := func(m Message) []byte {
		f, err := AppendFrame(nil, m)
		if err != nil {
			t.Fatal(err)
		}
		if f[lenSize] != 2 {
			t.Fatalf("frame version %d, want 2", f[lenSize])
		}
		// Skip length, version, kind and the empty from and to strings.
		return f[headerSize+8 : len(f)-crcSize]
	}
	vreq := body(Message{Body: &VoteRequest{Epoch: 1, CandidateID: "c", LastEpoch: 2, LEO: 3, PreVote: true, Round: 0x0102030405060708}})
	if got := be.Uint64(vreq[8+4+1+8+8+1:]); got != 0x0102030405060708 {
		t.Fatalf("VoteRequest.Round on the wire = %#x", got)
	}
	vresp := body(Message{Body: &VoteResponse{Epoch: 1, VoterID: "v", Granted: true, PreVote: true, RequestEpoch: 0xAA, Round: 0xBB, LeaderID: "l"}})
	off := 8 + 4 + 1 + 1 + 1
	if be.Uint64(vresp[off:]) != 0xAA || be.Uint64(vresp[off+8:]) != 0xBB {
		t.Fatalf("VoteResponse RequestEpoch/Round on the wire = %#x/%#x", be.Uint64(vresp[off:]), be.Uint64(vresp[off+8:]))
	}
	areq := body(Message{Body: &AppendRequest{RequestID: 9, Epoch: 0xCC, Records: [][]byte{[]byte("r")}}})
	if be.Uint64(areq[8:]) != 0xCC || be.Uint32(areq[16:]) != 1 {
		t.Fatalf("AppendRequest.Epoch on the wire = %#x", be.Uint64(areq[8:]))
	}
}

func randString(r *rand.Rand) string {
	b := make([]byte, r.IntN(12))
	for i := range b {
		b[i] = byte(r.IntN(256))
	}
	return string(b)
}

func randBytes(r *rand.Rand) []byte {
	switch r.IntN(4) {
	case 0:
		return nil
	case 1:
		return []byte{}
	}
	b := make([]byte, r.IntN(300))
	for i := range b {
		b[i] = byte(r.IntN(256))
	}
	return b
}

// randMessage builds a random message of a random kind.
func randMessage(r *rand.Rand) Message {
	m := Message{From: randString(r), To: randString(r)}
	u64 := func() uint64 {
		if r.IntN(4) == 0 {
			return math.MaxUint64 - uint64(r.IntN(3))
		}
		return r.Uint64() >> uint(r.IntN(64))
	}
	switch r.IntN(7) + 1 {
	case 1:
		m.Body = &FetchRequest{FetchID: u64(), ReplicaID: randString(r), CurrentEpoch: u64(), FetchOffset: u64(), LastFetchedEpoch: u64(), MaxBytes: r.Uint32(), MaxWaitMs: r.Uint32()}
	case 2:
		b := &FetchResponse{FetchID: u64(), LeaderID: randString(r), Epoch: u64(), Error: FetchError(r.IntN(6)), DivergingEpoch: u64(), DivergingEndOffset: u64(), HighWatermark: u64(), LogStartOffset: u64()}
		if n := r.IntN(20); n > 0 || r.IntN(2) == 0 {
			b.Entries = make([]storage.Entry, n)
			for i := range b.Entries {
				b.Entries[i] = storage.Entry{Offset: u64(), Epoch: u64(), Type: storage.EntryType(r.IntN(4)), Data: randBytes(r)}
			}
		}
		m.Body = b
	case 3:
		m.Body = &VoteRequest{Epoch: u64(), CandidateID: randString(r), LastEpoch: u64(), LEO: u64(), PreVote: r.IntN(2) == 0, Round: u64()}
	case 4:
		m.Body = &VoteResponse{Epoch: u64(), VoterID: randString(r), Granted: r.IntN(2) == 0, PreVote: r.IntN(2) == 0, RequestEpoch: u64(), Round: u64(), LeaderID: randString(r)}
	case 5:
		m.Body = &BeginEpoch{Epoch: u64(), LeaderID: randString(r)}
	case 6:
		b := &AppendRequest{RequestID: u64(), Epoch: u64()}
		if n := r.IntN(10); n > 0 || r.IntN(2) == 0 {
			b.Records = make([][]byte, n)
			for i := range b.Records {
				b.Records[i] = randBytes(r)
			}
		}
		m.Body = b
	case 7:
		m.Body = &AppendResponse{RequestID: u64(), Error: AppendError(r.IntN(5)), LeaderID: randString(r), FirstOffset: u64()}
	}
	return m
}

// TestCodecRoundTripProperty: decode(encode(m)) == m for random messages,
// and frames concatenated in one stream decode back in order.
func TestCodecRoundTripProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var stream []byte
	var msgs []Message
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

func TestCodecErrors(t *testing.T) {
	vote := Message{From: "a", To: "b", Body: &VoteRequest{Epoch: 1, CandidateID: "a", LastEpoch: 1, LEO: 2}}
	good, err := AppendFrame(nil, vote)
	if err != nil {
		t.Fatal(err)
	}
	fetch := Message{From: "a", To: "b", Body: &FetchResponse{Entries: []storage.Entry{{Data: []byte("xyz")}}}}
	goodFetch, err := AppendFrame(nil, fetch)
	if err != nil {
		t.Fatal(err)
	}
	mutate := func(src []byte, f func([]byte) []byte) []byte {
		return f(append([]byte(nil), src...))
	}
	// Offset of the entries count in goodFetch: header, from, to, fetch id,
	// leader id, epoch, error, 4×u64.
	entriesCount := headerSize + 5 + 5 + 8 + 4 + 8 + 1 + 32
	cases := []struct {
		name    string
		frame   []byte
		max     int
		wantErr error
		wantMsg string
	}{
		{"empty", nil, 0, ErrBadFrame, "truncated length prefix"},
		{"short prefix", good[:3], 0, ErrBadFrame, "truncated length prefix"},
		{"truncated frame", good[:len(good)-1], 0, ErrBadFrame, "truncated frame"},
		{"truncated body", good[:10], 0, ErrBadFrame, "truncated frame"},
		{"bad crc", mutate(good, func(f []byte) []byte { f[len(f)-1] ^= 1; return f }), 0, ErrBadFrame, "checksum"},
		{"flipped body bit", mutate(good, func(f []byte) []byte { f[12] ^= 0x10; return f }), 0, ErrBadFrame, "checksum"},
		{"bad version", mutate(good, func(f []byte) []byte { f[4] = FrameVersion + 1; return reseal(f) }), 0, ErrBadFrame, "version"},
		{"old version", mutate(good, func(f []byte) []byte { f[4] = 1; return reseal(f) }), 0, ErrBadFrame, "frame version 1, want 2"},
		{"bad kind", mutate(good, func(f []byte) []byte { f[5] = 42; return reseal(f) }), 0, ErrBadFrame, "unknown kind 42"},
		{"kind zero", mutate(good, func(f []byte) []byte { f[5] = 0; return reseal(f) }), 0, ErrBadFrame, "unknown kind 0"},
		{"oversize", good, len(good) - 1, ErrFrameTooLarge, "limit"},
		{"huge length prefix", []byte{0xff, 0xff, 0xff, 0xff, 1, 3}, 0, ErrFrameTooLarge, "limit"},
		{"below minimum", []byte{0, 0, 0, 2, 1, 3}, 0, ErrBadFrame, "minimum"},
		{"string past end", mutate(good, func(f []byte) []byte {
			binary.BigEndian.PutUint32(f[headerSize:], 1000)
			return reseal(f)
		}), 0, ErrBadFrame, "from"},
		{"string length huge", mutate(good, func(f []byte) []byte {
			binary.BigEndian.PutUint32(f[headerSize:], math.MaxUint32)
			return reseal(f)
		}), 0, ErrBadFrame, "runs past the end"},
		{"bad bool", mutate(good, func(f []byte) []byte { f[len(f)-crcSize-8-1] = 2; return reseal(f) }), 0, ErrBadFrame, "not a bool"},
		{"trailing bytes", mutate(good, func(f []byte) []byte {
			f = append(f[:len(f)-crcSize], 0, 0, 0, 0, 0)
			return reseal(f)
		}), 0, ErrBadFrame, "trailing"},
		{"missing field", mutate(good, func(f []byte) []byte {
			f = append(f[:len(f)-crcSize-8], 0, 0, 0, 0)
			return reseal(f)
		}), 0, ErrBadFrame, "round"},
		{"entry count forged", mutate(goodFetch, func(f []byte) []byte {
			binary.BigEndian.PutUint32(f[entriesCount:], math.MaxUint32)
			return reseal(f)
		}), 0, ErrBadFrame, "entries (byte 69): count 4294967295 needs"},
		{"entry count one too many", mutate(goodFetch, func(f []byte) []byte {
			binary.BigEndian.PutUint32(f[entriesCount:], 2)
			return reseal(f)
		}), 0, ErrBadFrame, "count 2 needs at least 42 bytes, 24 left"},
		{"entry data past end", mutate(goodFetch, func(f []byte) []byte {
			binary.BigEndian.PutUint32(f[entriesCount+4+17:], 4)
			return reseal(f)
		}), 0, ErrBadFrame, "entry data"},
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
	for _, m := range []Message{{}, {Body: (*VoteRequest)(nil)}, {Body: (*FetchResponse)(nil)}} {
		if _, err := AppendFrame(nil, m); !errors.Is(err, ErrBadFrame) {
			t.Errorf("AppendFrame(%#v) = %v, want ErrBadFrame", m.Body, err)
		}
		if EncodedSize(m) != -1 {
			t.Errorf("EncodedSize(%#v) = %d, want -1", m.Body, EncodedSize(m))
		}
	}
}

// TestCodecAliasing: decoded data aliases the frame with clipped capacity,
// so appending to one entry's data cannot overwrite the next.
func TestCodecAliasing(t *testing.T) {
	m := Message{From: "a", To: "b", Body: &FetchResponse{Entries: []storage.Entry{{Data: []byte("aa")}, {Data: []byte("bb")}}}}
	f, _ := AppendFrame(nil, m)
	got, _, err := DecodeFrame(f, 0)
	if err != nil {
		t.Fatal(err)
	}
	es := got.Body.(*FetchResponse).Entries
	_ = append(es[0].Data, 'X', 'X', 'X', 'X', 'X', 'X', 'X', 'X', 'X', 'X', 'X', 'X', 'X', 'X', 'X', 'X', 'X', 'X', 'X', 'X', 'X')
	if string(es[1].Data) != "bb" {
		t.Fatalf("append to entry 0 clobbered entry 1: %q", es[1].Data)
	}
}

// TestEncodeAllocs: encoding into a reused buffer allocates nothing.
func TestEncodeAllocs(t *testing.T) {
	m := benchFetchResponse()
	buf, _ := AppendFrame(nil, m)
	allocs := testing.AllocsPerRun(20, func() {
		buf, _ = AppendFrame(buf[:0], m)
	})
	if allocs != 0 {
		t.Fatalf("AppendFrame into a reused buffer: %v allocs/op, want 0", allocs)
	}
	// Decoding allocates the three strings, the body and one entry slice,
	// never per entry.
	allocs = testing.AllocsPerRun(20, func() {
		if _, _, err := DecodeFrame(buf, 0); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 5 {
		t.Fatalf("DecodeFrame: %v allocs/op, want ≤ 5 (3 strings, body, entry slice)", allocs)
	}
}

func benchFetchResponse() Message {
	entries := make([]storage.Entry, 1024)
	for i := range entries {
		data := make([]byte, 128)
		for j := range data {
			data[j] = byte(i + j)
		}
		entries[i] = storage.Entry{Offset: uint64(1000 + i), Epoch: 3, Type: storage.EntryData, Data: data}
	}
	return Message{From: "leader-1", To: "follower-2", Body: &FetchResponse{
		FetchID: 77, LeaderID: "leader-1", Epoch: 3, HighWatermark: 1500, Entries: entries,
	}}
}

func BenchmarkEncodeFetchResponse(b *testing.B) {
	m := benchFetchResponse()
	buf, _ := AppendFrame(nil, m)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		buf, _ = AppendFrame(buf[:0], m)
	}
}

func BenchmarkDecodeFetchResponse(b *testing.B) {
	buf, _ := AppendFrame(nil, benchFetchResponse())
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := DecodeFrame(buf, 0); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeVoteRequest(b *testing.B) {
	m := Message{From: "n1", To: "n2", Body: &VoteRequest{Epoch: 5, CandidateID: "n1", LastEpoch: 4, LEO: 1000}}
	buf, _ := AppendFrame(nil, m)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		buf, _ = AppendFrame(buf[:0], m)
	}
}

func BenchmarkDecodeVoteRequest(b *testing.B) {
	buf, _ := AppendFrame(nil, Message{From: "n1", To: "n2", Body: &VoteRequest{Epoch: 5, CandidateID: "n1", LastEpoch: 4, LEO: 1000}})
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := DecodeFrame(buf, 0); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzDecodeFrame: no input panics; whatever decodes re-encodes to the
// same bytes (the encoding is canonical) and decodes to the same message.
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

// FuzzDecodeFrameBody fuzzes the fields behind the checksum: the input
// (version, kind, from, to, body) gets a correct length prefix and CRC, so
// the fuzzer explores field decoding instead of failing at the checksum.
// Same properties as FuzzDecodeFrame.
func FuzzDecodeFrameBody(f *testing.F) {
	for _, m := range sampleMessages() {
		if EncodedSize(m) > 4096 {
			continue
		}
		frame, _ := AppendFrame(nil, m)
		f.Add(frame[lenSize : len(frame)-crcSize])
	}
	r := rand.New(rand.NewPCG(5, 6))
	for range 20 {
		frame, _ := AppendFrame(nil, randMessage(r))
		f.Add(frame[lenSize : len(frame)-crcSize])
	}
	f.Fuzz(func(t *testing.T, inner []byte) {
		frame := make([]byte, lenSize, lenSize+len(inner)+crcSize)
		frame = append(frame, inner...)
		frame = append(frame, 0, 0, 0, 0)
		reseal(frame)
		m, n, err := DecodeFrame(frame, 1<<20)
		if err != nil {
			if !errors.Is(err, ErrBadFrame) && !errors.Is(err, ErrFrameTooLarge) {
				t.Fatalf("error %v wraps neither ErrBadFrame nor ErrFrameTooLarge", err)
			}
			return
		}
		if n != len(frame) {
			t.Fatalf("consumed %d of %d", n, len(frame))
		}
		again, err := AppendFrame(nil, m)
		if err != nil || !bytes.Equal(again, frame) {
			t.Fatalf("re-encoding differs (%v)", err)
		}
	})
}

// A peer that announces a large frame and then sends little must not make
// the reader allocate the whole announced size up front.
func TestReaderAllocatesAsBytesArrive(t *testing.T) {
	frame, err := AppendFrame(nil, Message{From: "a", To: "b", Body: &FetchResponse{FetchID: 1}})
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
