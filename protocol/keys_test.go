package protocol

import (
	"errors"
	"reflect"
	"testing"
)

func TestKeyHeaderRoundTrip(t *testing.T) {
	for _, h := range []KeyHeader{
		{Key: Key{Producer: 1<<63 + 5, Seq: 300, Low: 299, ID: "order-123"}, N: 3},
		{Key: Key{ID: "x"}, N: 1},
		{Key: Key{Producer: 7, Seq: 1}, N: 1},
	} {
		got, err := DecodeKeyHeader(EncodeKeyHeader(h))
		if err != nil || got != h {
			t.Fatalf("round trip of %+v: %+v, %v", h, got, err)
		}
	}
	b := EncodeKeyHeader(KeyHeader{Key: Key{Producer: 1, Seq: 1}, N: 1})
	for _, bad := range [][]byte{nil, b[:5], append(b[:len(b):len(b)], 0), {2, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 0}} {
		if _, err := DecodeKeyHeader(bad); !errors.Is(err, ErrMalformed) {
			t.Fatalf("DecodeKeyHeader(%x) = %v, want ErrMalformed", bad, err)
		}
	}
	// N = 0 is malformed: a header always names its batch.
	if _, err := DecodeKeyHeader(EncodeKeyHeader(KeyHeader{Key: Key{Producer: 1}})); !errors.Is(err, ErrMalformed) {
		t.Fatalf("N=0: %v", err)
	}
}

func TestKeyedDataAndUserData(t *testing.T) {
	h := EncodeKeyHeader(KeyHeader{Key: Key{Producer: 9, Seq: 2}, N: 1})
	e := Entry{Type: EntryKeyed, Data: KeyedData(h, []byte("hello"))}
	if got := string(UserData(e)); got != "hello" {
		t.Fatalf("UserData = %q", got)
	}
	hh, rest, err := SplitKeyed(e.Data)
	if err != nil || string(hh) != string(h) || string(rest) != "hello" {
		t.Fatalf("SplitKeyed = %x %q %v", hh, rest, err)
	}
	if got := string(UserData(Entry{Type: EntryKeyed, Data: KeyedData(nil, []byte("a"))})); got != "a" {
		t.Fatalf("no header: %q", got)
	}
	if got := string(UserData(Entry{Type: EntryData, Data: []byte{5, 1}})); got != "\x05\x01" {
		t.Fatalf("data entries are untouched: %q", got)
	}
	if _, _, err := SplitKeyed([]byte{9, 1}); !errors.Is(err, ErrMalformed) {
		t.Fatalf("short prefix: %v", err)
	}
}

func TestStateRecordsRoundTrip(t *testing.T) {
	rs := []StateRecord{
		{Kind: StateCursor, Name: "pipeline", Next: 42},
		{Kind: StateProducer, Producer: 99, Low: 3, Time: 1700000000000, Seqs: []SeqAt{{3, 10, 1}, {5, 12, 4}}},
		{Kind: StateID, Name: "order-1", First: 7, N: 2, Time: 1700000000001},
		{Kind: StateLog, Name: "orders", Data: []byte("spec")},
		{Kind: StateLog, Name: "orders", First: 12, Data: []byte("copy")},
		{Kind: StateLog, Name: "gone"},
	}
	got, err := DecodeStateRecords(EncodeStateRecords(nil, rs...))
	if err != nil || !reflect.DeepEqual(got, rs) {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	tooLong := EncodeStateRecords(nil, StateRecord{Kind: StateLog, Name: "big", Data: make([]byte, MaxLogSpecLength+1)})
	for _, bad := range [][]byte{{9}, {byte(StateCursor), 200}, {byte(StateProducer), 1, 2}, {byte(StateLog), 1, 'a', 0, 5, 'x'}, tooLong} {
		if _, err := DecodeStateRecords(bad); !errors.Is(err, ErrMalformed) {
			t.Fatalf("DecodeStateRecords(%x) = %v", bad, err)
		}
	}
}

func TestKeyedAppendRequestCodec(t *testing.T) {
	for _, typ := range []EntryType{EntryKeyed, EntryState} {
		m := Message{From: "a", To: "b", Body: &AppendRequest{RequestID: 1, Epoch: 2, Type: typ,
			Records: [][]byte{[]byte("r"), EncodeKeyHeader(KeyHeader{Key: Key{Producer: 1, Seq: 1}, N: 1})}}}
		b, err := AppendMessage(nil, m)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeMessage(b)
		if err != nil || !reflect.DeepEqual(got, m) {
			t.Fatalf("%v: %+v, %v", typ, got, err)
		}
	}
	m := Message{From: "a", To: "b", Body: &AppendResponse{RequestID: 1, Error: AppendDuplicate, FirstOffset: 5}}
	b, _ := AppendMessage(nil, m)
	if got, err := DecodeMessage(b); err != nil || !reflect.DeepEqual(got, m) {
		t.Fatalf("duplicate answer: %+v, %v", got, err)
	}
}

// FuzzDecodeStateRecords: whatever decodes re-encodes to records that
// decode to the same (a StateLog record's spec within MaxLogSpecLength).
func FuzzDecodeStateRecords(f *testing.F) {
	f.Add(EncodeStateRecords(nil, StateRecord{Kind: StateLog, Name: "orders", Data: []byte("spec")}))
	f.Add(EncodeStateRecords(nil, StateRecord{Kind: StateLog, Name: "orders", First: 9, Data: []byte("copy")},
		StateRecord{Kind: StateCursor, Name: "c", Next: 3}, StateRecord{Kind: StateLog, Name: "gone"}))
	f.Fuzz(func(t *testing.T, b []byte) {
		rs, err := DecodeStateRecords(b)
		if err != nil {
			return
		}
		again, err := DecodeStateRecords(EncodeStateRecords(nil, rs...))
		if err != nil || !reflect.DeepEqual(again, rs) {
			t.Fatalf("%x: decoded %+v, re-encoded decodes to %+v, %v", b, rs, again, err)
		}
		for _, r := range rs {
			if r.Kind == StateLog && len(r.Data) > MaxLogSpecLength {
				t.Fatalf("a spec of %d bytes decoded", len(r.Data))
			}
		}
	})
}

// TestEntryKeyHeader (R102): a header with an entry key is format 2 and
// round-trips, alone (an entry before its batch's last: N 0) or with a
// producer and an ID; one without is format 1, byte for byte the header
// of releases before keys; EntryKeyOf reads the key from any entry of the
// batch and "" from every other entry.
func TestEntryKeyHeader(t *testing.T) {
	for _, h := range []KeyHeader{
		{Key: Key{Producer: 1<<63 + 5, Seq: 300, Low: 299, ID: "order-123", EntryKey: "user/7"}, N: 3},
		{Key: Key{EntryKey: "k"}, N: 1},
		{Key: Key{EntryKey: "only"}},
	} {
		b := EncodeKeyHeader(h)
		if b[0] != keyHeaderFormatEntry {
			t.Fatalf("%+v: format %d, want %d", h, b[0], keyHeaderFormatEntry)
		}
		got, err := DecodeKeyHeader(b)
		if err != nil || got != h {
			t.Fatalf("round trip of %+v: %+v, %v", h, got, err)
		}
	}
	// Format 1 is unchanged: pinned bytes of a header without an entry key.
	if b := EncodeKeyHeader(KeyHeader{Key: Key{Producer: 2, Seq: 3, Low: 1, ID: "i"}, N: 1}); string(b) != "\x01\x00\x00\x00\x00\x00\x00\x00\x02\x03\x01\x01\x01i" {
		t.Fatalf("format 1 header changed: %x", b)
	}
	for _, bad := range []KeyHeader{
		{Key: Key{EntryKey: "k", Producer: 1}},          // N 0 with a producer: not key-only
		{Key: Key{EntryKey: "k", ID: "i"}},              // N 0 with an ID
		{Key: Key{EntryKey: "k", Seq: 1, Low: 1}, N: 0}, // N 0 with a sequence
	} {
		if _, err := DecodeKeyHeader(EncodeKeyHeader(bad)); !errors.Is(err, ErrMalformed) {
			t.Fatalf("%+v decoded: %v", bad, err)
		}
	}
	// Format 2 with an empty entry key is never written.
	f1 := EncodeKeyHeader(KeyHeader{Key: Key{Producer: 1, Seq: 1}, N: 1})
	f2 := append([]byte{keyHeaderFormatEntry}, f1[1:]...)
	if _, err := DecodeKeyHeader(append(f2, 0)); !errors.Is(err, ErrMalformed) {
		t.Fatalf("format 2 with an empty key: %v", err)
	}

	last := Entry{Type: EntryKeyed, Data: KeyedData(EncodeKeyHeader(KeyHeader{Key: Key{Producer: 1, Seq: 1, EntryKey: "k"}, N: 2}), []byte("v2"))}
	before := Entry{Type: EntryKeyed, Data: KeyedData(AppendEntryKeyHeader(nil, "k"), []byte("v1"))}
	for _, c := range []struct {
		e         Entry
		key, data string
		part      bool // an entry before its batch's last
	}{
		{last, "k", "v2", false},
		{before, "k", "v1", true},
		{Entry{Type: EntryKeyed, Data: KeyedData(nil, []byte("x"))}, "", "x", true},
		{Entry{Type: EntryKeyed, Data: KeyedData(f1, []byte("y"))}, "", "y", false},
		{Entry{Type: EntryData, Data: []byte("z")}, "", "z", false},
	} {
		if part := c.e.Type == EntryKeyed && KeyedPart(c.e.Data); part != c.part {
			t.Fatalf("KeyedPart(%x) = %v, want %v", c.e.Data, part, c.part)
		}
		key, data := EntryKeyOf(c.e)
		if key != c.key || string(data) != c.data || string(UserData(c.e)) != c.data {
			t.Fatalf("EntryKeyOf(%x) = %q %q; want %q %q", c.e.Data, key, data, c.key, c.data)
		}
	}
}

// FuzzDecodeKeyHeader: whatever decodes re-encodes to bytes that decode
// to the same header (varints need not be minimal, so the bytes may
// differ) and holds an ID and an entry key within MaxKeyLength.
func FuzzDecodeKeyHeader(f *testing.F) {
	f.Add(EncodeKeyHeader(KeyHeader{Key: Key{Producer: 9, Seq: 2, Low: 1, ID: "id"}, N: 2}))
	f.Add(EncodeKeyHeader(KeyHeader{Key: Key{Producer: 9, Seq: 2, Low: 1, ID: "id", EntryKey: "key"}, N: 2}))
	f.Add(AppendEntryKeyHeader(nil, "key"))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := DecodeKeyHeader(b)
		if err != nil {
			return
		}
		if again, err := DecodeKeyHeader(EncodeKeyHeader(h)); err != nil || again != h {
			t.Fatalf("%x decodes to %+v, which re-encoded decodes to %+v, %v", b, h, again, err)
		}
		if len(h.ID) > MaxKeyLength || len(h.EntryKey) > MaxKeyLength {
			t.Fatalf("%x: an ID of %d or a key of %d bytes decoded", b, len(h.ID), len(h.EntryKey))
		}
	})
}
