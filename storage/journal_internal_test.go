package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"slices"
	"testing"

	"github.com/replog-io/replog/protocol"
)

// testJournalKey is the key of the journal images the tests build.
var testJournalKey = journalKey{1, 2, 3, 4, 5, 6, 7, 8}

// journalImage is a small journal file's contents holding records of
// the payloads, from the first offset of the ring.
func journalImage(size int, payloads ...[]byte) []byte {
	img := make([]byte, size)
	copy(img, encodeJournalHeader(1, int64(size), journalDataStart, 1, &testJournalKey))
	pos := journalDataStart
	for i, p := range payloads {
		rec := appendRecord(nil, &testJournalKey, uint64(i+1), journalLogID, p)
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
	copy(img, encodeJournalHeader(3, size, int64(start), 5, &testJournalKey))
	copy(img[start:], appendRecord(nil, &testJournalKey, 5, 0, p))
	copy(img[start+rs:], appendRecord(nil, &testJournalKey, 6, 0, p))
	copy(img[journalDataStart:], appendRecord(nil, &testJournalKey, 7, 0, p))
	copy(img[journalDataStart+rs:], appendRecord(nil, &testJournalKey, 2, 0, p))
	_, recs, tail, err := scanJournal(img)
	if err != nil || len(recs) != 3 || recs[2].seq != 7 || tail != int64(journalDataStart+rs) {
		t.Fatalf("%d records, tail %d, %v", len(recs), tail, err)
	}
	// The older header slot is not read.
	copy(img[journalSlotSize:], encodeJournalHeader(2, size, int64(start), 5, &testJournalKey))
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
	multi := []*journalReq{}
	for i, p := range payloads {
		multi = append(multi, &journalReq{logID: uint32(i * 7), rec: append(make([]byte, journalRecHeader), p...), n: len(p)})
	}
	f.Add(appendMultiPayload(nil, multi))
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
		// As a record of several logs' batches: what it decodes to
		// encodes and decodes again to the same.
		if ids, parts, err := decodeMultiPayload(b); err == nil {
			reqs := make([]*journalReq, len(ids))
			for i := range ids {
				reqs[i] = &journalReq{logID: ids[i], rec: append(make([]byte, journalRecHeader), parts[i]...), n: len(parts[i])}
			}
			again := appendMultiPayload(nil, reqs)
			ids2, parts2, err := decodeMultiPayload(again)
			if err != nil || len(again) != multiPayloadSize(reqs) || !slices.Equal(ids, ids2) || len(parts2) != len(parts) {
				t.Fatalf("multi-batch payload %x re-encodes to %x (%v)", b, again, err)
			}
			for i := range parts {
				if string(parts[i]) != string(parts2[i]) {
					t.Fatalf("multi-batch payload %x: part %d re-encodes to %x", b, i, parts2[i])
				}
			}
		} else if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("multi-batch decode error not ErrCorrupt: %v", err)
		}
		// As a file: as given, and as the ring of a valid header.
		imgs := [][]byte{b}
		if len(b) > 0 {
			w := make([]byte, journalDataStart+len(b)+journalRecHeader)
			copy(w, encodeJournalHeader(1, int64(len(w)), journalDataStart, binary.BigEndian.Uint64(append(make([]byte, 8), b...)[len(b):]), &testJournalKey))
			copy(w[journalDataStart:], b)
			imgs = append(imgs, w)
		}
		for _, img := range imgs {
			h, recs, tail, err := scanJournal(img)
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
				if _, ok := parseRecord(img[r.pos:], &h.key); !ok {
					t.Fatalf("record at %d does not parse", r.pos)
				}
			}
		}
	})
}

// forgedRecordHeader is a record header for seq with an empty payload as
// a client without the file's key could write it: its payload checksum
// right, its MAC field the CRC-32C an unkeyed format would check.
func forgedRecordHeader(seq uint64) []byte {
	h := make([]byte, journalRecHeader)
	binary.BigEndian.PutUint32(h[0:], journalRecMagic)
	binary.BigEndian.PutUint64(h[8:], seq)
	binary.BigEndian.PutUint32(h[20:], crc32.Checksum(nil, castagnoli))
	binary.BigEndian.PutUint32(h[24:], crc32.Checksum(h[:24], castagnoli))
	return h
}

// A client's data that holds record headers (at every alignment, with a
// sequence number far past the chain's end and with the next ones) is
// never taken for records: the directory reopens after a kill (the entry
// replayed from the journal) and after a clean Close, and the entry reads
// back whole.
func TestJournalForgedRecordInPayload(t *testing.T) {
	dir := t.TempDir()
	id := Identity{ClusterID: "c", NodeID: "n"}
	opts := DirOptions{Journal: true, JournalBytes: 1 << 20}
	var data []byte
	for _, seq := range []uint64{1 << 62, 2, 3, 4} {
		for shift := 0; shift < 8; shift++ {
			data = append(data, 0)
			data = append(data, forgedRecordHeader(seq)...)
		}
	}
	want := protocol.Entry{Offset: 0, Epoch: 1, Type: protocol.EntryData, Data: data}
	s, _, err := OpenDir(dir, id, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Apply([]protocol.Write{{Kind: protocol.WriteAppend, Entries: []protocol.Entry{want}}}); err != nil {
		t.Fatal(err)
	}
	check := func(how string) {
		t.Helper()
		got, err := s.Entries(0, 10, 1<<20)
		if err != nil || len(got) != 1 || got[0].Offset != 0 || got[0].Epoch != 1 || !bytes.Equal(got[0].Data, data) {
			t.Fatalf("%s: read back %d entries, %v", how, len(got), err)
		}
	}
	check("before the kill")
	if err := s.Abandon(); err != nil { // the record stays in the journal
		t.Fatal(err)
	}
	if s, _, err = OpenDir(dir, id, opts); err != nil {
		t.Fatalf("reopen after a kill: %v", err)
	}
	check("replayed")
	if err := s.Close(); err != nil { // checkpointed, the journal cut
		t.Fatal(err)
	}
	if s, _, err = OpenDir(dir, id, opts); err != nil {
		t.Fatalf("reopen after a clean Close: %v", err)
	}
	check("after a clean Close")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// At the chain's end the scan takes only records whose MAC holds under
// the file's key: a header MACed under another key (or forged without
// one), with the next sequence number or a later one, is neither replayed
// nor damage; under the file's key the same record is replayed, and a
// later one after a break is damage.
func TestScanJournalKeyedRecords(t *testing.T) {
	const size = journalDataStart + 4096
	p := bytes.Repeat([]byte{7}, 100)
	other := journalKey{9}
	for _, c := range []struct {
		name    string
		key     *journalKey
		seq     uint64
		gap     int64 // bytes between the chain's end and the record
		recs    int
		corrupt bool
	}{
		{"forged next", nil, 3, 0, 2, false},
		{"forged later", nil, 1 << 62, 64, 2, false},
		{"other key next", &other, 3, 0, 2, false},
		{"other key later", &other, 9, 64, 2, false},
		{"file key next", &testJournalKey, 3, 0, 3, false},
		{"file key later", &testJournalKey, 9, 64, 0, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			img := journalImage(size, p, p)
			end := journalDataStart + 2*recordSize(len(p))
			rec := forgedRecordHeader(c.seq)
			if c.key != nil {
				rec = appendRecord(nil, c.key, c.seq, 0, nil)
			}
			copy(img[end+c.gap:], rec)
			_, recs, _, err := scanJournal(img)
			if c.corrupt != errors.Is(err, ErrCorrupt) || len(recs) != c.recs {
				t.Fatalf("%d records, %v; want %d records, corrupt %v", len(recs), err, c.recs, c.corrupt)
			}
		})
	}
}
