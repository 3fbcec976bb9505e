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
