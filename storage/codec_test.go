package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/replog-io/replog/protocol"
)

func TestEntryCodecRoundTrip(t *testing.T) {
	for _, e := range []protocol.Entry{
		{Epoch: 1, Type: protocol.EntryData},
		{Epoch: 127, Type: protocol.EntryData, Data: []byte("x")},
		{Epoch: 128, Type: protocol.EntryControl, Data: []byte("hello")},
		{Epoch: 1<<64 - 1, Type: protocol.EntryData, Data: bytes.Repeat([]byte{0xab}, 4096)},
		{Epoch: 3, Time: 1_795_000_000_123, Type: protocol.EntryData, Data: []byte("timed")},
		{Epoch: 3, Time: 1<<63 - 1, Type: protocol.EntryControl},
	} {
		v := appendEntry(nil, &e)
		if len(v) != encodedEntrySize(&e) {
			t.Fatalf("encoded %d bytes, encodedEntrySize says %d", len(v), encodedEntrySize(&e))
		}
		got, err := decodeEntry(v)
		if err != nil || got.Epoch != e.Epoch || got.Type != e.Type || got.Time != e.Time || !bytes.Equal(got.Data, e.Data) {
			t.Fatalf("decode(encode(%+v)) = %+v, %v", e, got, err)
		}
		// Every single-bit flip is detected.
		for i := range v {
			for bit := 0; bit < 8; bit++ {
				w := bytes.Clone(v)
				w[i] ^= 1 << bit
				if _, err := decodeEntry(w); !errors.Is(err, ErrCorrupt) {
					t.Fatalf("flip of bit %d of byte %d of %+v not detected: %v", bit, i, e, err)
				}
			}
		}
	}
	if got := len(appendEntry(nil, &protocol.Entry{Epoch: 5, Time: 1_795_000_000_000, Type: protocol.EntryData, Data: make([]byte, 128)})); got != 128+13 {
		t.Fatalf("a 128-byte entry of epoch 5 with a 2026 time takes %d bytes, want %d", got, 128+13)
	}
}

// appendEntryV1 is format version 1's encoder (entries stored before they
// carried a time), kept to test that such values are still read.
func appendEntryV1(dst []byte, e *protocol.Entry) []byte {
	dst = append(dst, entryFormatV1, byte(e.Type))
	dst = binary.BigEndian.AppendUint32(dst, entryCRCV1(e.Epoch, e.Type, e.Data))
	dst = binary.AppendUvarint(dst, e.Epoch)
	return append(dst, e.Data...)
}

// TestEntryFormatV1StillRead: a value written before entries carried a
// time decodes with time 0, and its checksum still protects it.
func TestEntryFormatV1StillRead(t *testing.T) {
	e := protocol.Entry{Epoch: 7, Type: protocol.EntryData, Data: []byte("old")}
	v := appendEntryV1(nil, &e)
	got, err := decodeEntry(v)
	if err != nil || got.Epoch != 7 || got.Time != 0 || string(got.Data) != "old" {
		t.Fatalf("decode(v1) = %+v, %v", got, err)
	}
	v[len(v)-1] ^= 1
	if _, err := decodeEntry(v); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("damaged v1 value: %v, want ErrCorrupt", err)
	}
}

func TestQuorumCodecRoundTrip(t *testing.T) {
	for _, q := range []protocol.QuorumState{{}, {Epoch: 3, VotedFor: "a"}, {Epoch: 1 << 40, VotedFor: "x y", LeaderID: "☃"}} {
		v := encodeQuorumState(q)
		got, err := decodeQuorumState(v)
		if err != nil || got != q {
			t.Fatalf("decode(encode(%+v)) = %+v, %v", q, got, err)
		}
		for i := range v {
			w := bytes.Clone(v)
			w[i] ^= 0x10
			if _, err := decodeQuorumState(w); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("flip of byte %d of %+v not detected: %v", i, q, err)
			}
		}
	}
}

// FuzzDecodeEntry: decodeEntry never panics, rejects with ErrCorrupt, and
// whatever it accepts re-encodes to the same bytes (the encoding is
// canonical).
func FuzzDecodeEntry(f *testing.F) {
	for _, e := range []protocol.Entry{
		{Epoch: 1, Type: protocol.EntryData},
		{Epoch: 2, Type: protocol.EntryData, Data: []byte("payload")},
		{Epoch: 300, Type: protocol.EntryControl},
		{Epoch: 1<<64 - 1, Type: protocol.EntryData, Data: bytes.Repeat([]byte{7}, 128)},
	} {
		f.Add(appendEntry(nil, &e))
		f.Add(appendEntryV1(nil, &e))
	}
	f.Add([]byte{})
	f.Add([]byte{1})
	f.Add([]byte{1, 1, 0, 0, 0, 0, 0x80})
	f.Add([]byte{2, 1, 0, 0, 0, 0, 1, 'x'})
	f.Add([]byte{1, 1, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, v []byte) {
		e, err := decodeEntry(v)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		enc := appendEntry
		if v[0] == entryFormatV1 {
			enc = appendEntryV1
		}
		if w := enc(nil, &e); !bytes.Equal(w, v) {
			t.Fatalf("accepted %x, re-encodes to %x", v, w)
		}
	})
}

// FuzzDecodeQuorumState: never panics; rejects with ErrCorrupt.
func FuzzDecodeQuorumState(f *testing.F) {
	f.Add(encodeQuorumState(protocol.QuorumState{}))
	f.Add(encodeQuorumState(protocol.QuorumState{Epoch: 9, VotedFor: "n1", LeaderID: "n2"}))
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, v []byte) {
		q, err := decodeQuorumState(v)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		if got, err := decodeQuorumState(encodeQuorumState(q)); err != nil || got != q {
			t.Fatalf("round trip of accepted %+v: %+v, %v", q, got, err)
		}
	})
}
