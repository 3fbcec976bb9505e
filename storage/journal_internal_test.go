package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/replog-io/replog/protocol"
)

// journalImage is a small journal file's contents holding records of
// the payloads, from the first offset of the ring.
func journalImage(size int, payloads ...[]byte) []byte {
	img := make([]byte, size)
	copy(img, encodeJournalHeader(1, int64(size), journalDataStart, 1))
	pos := journalDataStart
	for i, p := range payloads {
		rec := appendRecord(nil, uint64(i+1), journalLogID, p)
		copy(img[pos:], rec)
		pos += len(rec)
	}
	return img
}

func fuzzBatches() [][]protocol.Write {
	vs := []protocol.Voter{{ID: "a", DirID: "d1"}, {ID: "b", DirID: "d2"}}
	return [][]protocol.Write{
		{{Kind: protocol.WriteAppend, Entries: []protocol.Entry{
			{Offset: 5, Epoch: 2, Type: protocol.EntryData, Time: 1700000000000, Data: []byte("hello")},
			{Offset: 6, Epoch: 2, Type: protocol.EntryVoters, Data: protocol.EncodeVoterSet(vs, nil)}}},
			{Kind: protocol.WriteHWCheckpoint, Offset: 6}},
		{{Kind: protocol.WriteTruncate, Offset: 3}, {Kind: protocol.WriteQuorumState, Quorum: protocol.QuorumState{Epoch: 4, VotedFor: "b", LeaderID: "b"}}},
		{{Kind: protocol.WriteDeletePrefix, Offset: 9, Epoch: 3, Voters: []protocol.VotersAt{{Offset: 2, Voters: vs}}}},
		{{Kind: protocol.WriteDeletePrefix, Offset: 1}},
	}
}

// Every batch encodes and decodes to itself.
func TestJournalBatchRoundTrip(t *testing.T) {
	for i, ws := range fuzzBatches() {
		p, err := encodeBatch(ws)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeBatch(p)
		if err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
		again, _ := encodeBatch(got)
		if !bytes.Equal(p, again) || len(got) != len(ws) {
			t.Fatalf("batch %d: decoded %+v from %+v", i, got, ws)
		}
	}
	if _, err := encodeBatch([]protocol.Write{{Kind: 99}}); !errors.Is(err, ErrInvalidWrite) {
		t.Fatalf("unknown kind: %v", err)
	}
}

// The scan takes the chain of records from the header's start, wrapping
// to the ring's start, and stops at the first that is not the next one.
func TestScanJournalWrap(t *testing.T) {
	const size = journalDataStart + 2048
	img := make([]byte, size)
	p := bytes.Repeat([]byte{7}, 300)
	rs := int(recordSize(len(p)))
	// Records 5 and 6 at the end of the ring, 7 wrapped to its start, a
	// stale record 2 after it.
	start := size - 2*rs - 8
	copy(img, encodeJournalHeader(3, size, int64(start), 5))
	copy(img[start:], appendRecord(nil, 5, 0, p))
	copy(img[start+rs:], appendRecord(nil, 6, 0, p))
	copy(img[journalDataStart:], appendRecord(nil, 7, 0, p))
	copy(img[journalDataStart+rs:], appendRecord(nil, 2, 0, p))
	_, recs, tail, err := scanJournal(img)
	if err != nil || len(recs) != 3 || recs[2].seq != 7 || tail != int64(journalDataStart+rs) {
		t.Fatalf("%d records, tail %d, %v", len(recs), tail, err)
	}
	// The older header slot is not read.
	copy(img[journalSlotSize:], encodeJournalHeader(2, size, int64(start), 5))
	if _, recs, _, err = scanJournal(img); err != nil || len(recs) != 3 {
		t.Fatalf("with an older slot: %d records, %v", len(recs), err)
	}
	// A torn newest slot: the other counts.
	img[10] ^= 1
	if h, _, _, err := scanJournal(img); err != nil || h.counter != 2 {
		t.Fatalf("torn slot: header %+v, %v", h, err)
	}
}

// FuzzJournalDecode feeds arbitrary bytes to the journal's decoders: the
// scan of a file and the decoding of a record's payload never panic,
// answer ErrCorrupt or records whose checksums hold, and a decoded batch
// encodes back to the payload it came from.
func FuzzJournalDecode(f *testing.F) {
	var payloads [][]byte
	for _, ws := range fuzzBatches() {
		p, err := encodeBatch(ws)
		if err != nil {
			f.Fatal(err)
		}
		payloads = append(payloads, p)
		f.Add(p)
	}
	img := journalImage(journalDataStart+4096, payloads...)
	f.Add(img)
	f.Add(img[:journalDataStart+100])
	f.Fuzz(func(t *testing.T, b []byte) {
		if ws, err := decodeBatch(b); err == nil {
			again, err := encodeBatch(ws)
			if err != nil {
				t.Fatalf("decoded batch does not encode: %v", err)
			}
			if got, err := decodeBatch(again); err != nil || len(got) != len(ws) {
				t.Fatalf("re-encoded batch: %v", err)
			}
		} else if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("decode error not ErrCorrupt: %v", err)
		}
		// As a file: as given, and as the ring of a valid header.
		imgs := [][]byte{b}
		if len(b) > 0 {
			w := make([]byte, journalDataStart+len(b)+journalRecHeader)
			copy(w, encodeJournalHeader(1, int64(len(w)), journalDataStart, binary.BigEndian.Uint64(append(make([]byte, 8), b...)[len(b):])))
			copy(w[journalDataStart:], b)
			imgs = append(imgs, w)
		}
		for _, img := range imgs {
			_, recs, tail, err := scanJournal(img)
			if err != nil {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("scan error not ErrCorrupt: %v", err)
				}
				continue
			}
			if tail < journalDataStart || tail > int64(len(img)) {
				t.Fatalf("tail %d outside the file of %d bytes", tail, len(img))
			}
			for _, r := range recs {
				if _, ok := parseRecord(img[r.pos:]); !ok {
					t.Fatalf("record at %d does not parse", r.pos)
				}
			}
		}
	})
}
