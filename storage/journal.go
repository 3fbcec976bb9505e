package storage

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"runtime/debug"
)

// The commit journal (format 2, DirOptions.Journal): one preallocated file
// per node, written as a ring of checksummed records, each one group
// commit of one log (tagged with the log's ID so that several logs can
// share the file and its fsync). See docs/storage.md section 10.
//
// Layout: two header slots of journalSlotSize bytes at offsets 0 and
// journalSlotSize (a header write can tear only the slot it writes: the
// valid slot with the higher counter counts), then the ring of records
// from journalDataStart to the end of the file. A header says where the
// oldest record not yet in the bbolt segments starts and its sequence
// number, and holds the file's key: 32 random bytes drawn when the file
// is created, the same in both slots for the file's life. A record, at an
// 8-byte aligned offset:
//
//	0  magic "RLJR"     4  payload length (u32)
//	8  sequence (u64)   16 log ID (u32)
//	20 CRC-32C of the payload (u32)
//	24 HMAC-SHA256 under the file's key of bytes 0..24, its first 8 bytes
//	32 payload, then zero padding to 8 bytes
//
// The MAC is what makes a record: the payloads hold clients' data, and a
// checksum anyone can compute would let an appended value carry a fake
// record header (a later sequence number that fails Open as damage, or
// the next one, replayed). Without the key no byte sequence a client
// writes passes as a record header. Sequence numbers grow by one per
// record over the file's whole life, so a record is live only if its MAC
// and payload checksum hold and its sequence is the one expected: what
// an earlier lap of the ring left is never taken for a record. Records follow each other; a record that does not fit before
// the end of the file goes to journalDataStart instead (the reader tries
// the next offset, then journalDataStart).
const (
	// JournalFileName is the commit journal of a format 2 data directory.
	JournalFileName = "replog.journal"
	journalTmpName  = JournalFileName + ".tmp"

	journalSlotSize   = 4096
	journalDataStart  = 2 * journalSlotSize
	journalRecHeader  = 32
	journalHeaderLen  = 76
	journalKeyLen     = 32
	journalMACLen     = 8
	journalVersion    = 1
	journalRecMagic   = 0x524c4a52 // "RLJR"
	journalHdrMagic   = 0x524c4a48 // "RLJH"
	minJournalBytes   = 64 << 10
	journalMaxPayload = 1<<31 - 1
)

// journalHook, when set by a test, is called at the stages of the
// journal's work ("append": a record written, not yet synced; "cut": a
// checkpoint committed to the segments, the header not yet moved), so a
// test can kill the process there.
var journalHook func(stage string)

// journalRecord is one record read back from a journal.
type journalRecord struct {
	seq     uint64
	logID   uint32
	pos     int64 // offset of the record
	size    int64 // its bytes in the file, header and padding included
	payload []byte
}

func align8(n int64) int64 { return (n + 7) &^ 7 }

// recordSize is the bytes a record of n payload bytes takes.
func recordSize(n int) int64 { return journalRecHeader + align8(int64(n)) }

// journalKey is a journal file's record MAC key.
type journalKey [journalKeyLen]byte

// newJournalKey draws a new file's key.
func newJournalKey() (k journalKey, err error) {
	_, err = rand.Read(k[:])
	return k, err
}

// recordMAC is the MAC of a record header's first 24 bytes under key.
func recordMAC(key *journalKey, hdr []byte) []byte {
	m := hmac.New(sha256.New, key[:])
	m.Write(hdr[:24])
	return m.Sum(nil)[:journalMACLen]
}

// encodeJournalHeader is a header slot's contents: magic, version,
// counter, size, start, startSeq, key (bytes 40..72), CRC-32C of bytes
// 0..72.
func encodeJournalHeader(counter uint64, size, start int64, startSeq uint64, key *journalKey) []byte {
	b := make([]byte, journalHeaderLen)
	binary.BigEndian.PutUint32(b[0:], journalHdrMagic)
	binary.BigEndian.PutUint32(b[4:], journalVersion)
	binary.BigEndian.PutUint64(b[8:], counter)
	binary.BigEndian.PutUint64(b[16:], uint64(size))
	binary.BigEndian.PutUint64(b[24:], uint64(start))
	binary.BigEndian.PutUint64(b[32:], startSeq)
	copy(b[40:], key[:])
	binary.BigEndian.PutUint32(b[72:], crc32.Checksum(b[:72], castagnoli))
	return b
}

type journalHeader struct {
	counter, startSeq uint64
	size, start       int64
	key               journalKey
}

func decodeJournalHeader(b []byte) (journalHeader, error) {
	var h journalHeader
	if len(b) < journalHeaderLen {
		return h, errors.New("short header")
	}
	if binary.BigEndian.Uint32(b[0:]) != journalHdrMagic {
		return h, errors.New("no header magic")
	}
	if got, want := crc32.Checksum(b[:72], castagnoli), binary.BigEndian.Uint32(b[72:]); got != want {
		return h, fmt.Errorf("header checksum mismatch (stored %08x, computed %08x)", want, got)
	}
	if v := binary.BigEndian.Uint32(b[4:]); v != journalVersion {
		return h, fmt.Errorf("journal version %d, this build reads %d", v, journalVersion)
	}
	h.counter = binary.BigEndian.Uint64(b[8:])
	h.size = int64(binary.BigEndian.Uint64(b[16:]))
	h.start = int64(binary.BigEndian.Uint64(b[24:]))
	h.startSeq = binary.BigEndian.Uint64(b[32:])
	copy(h.key[:], b[40:72])
	if h.start < journalDataStart || h.start > h.size || h.start%8 != 0 {
		return h, fmt.Errorf("start offset %d outside the ring", h.start)
	}
	return h, nil
}

// appendRecord appends the record (seq, logID, payload) to dst, its
// header MACed under key.
func appendRecord(dst []byte, key *journalKey, seq uint64, logID uint32, payload []byte) []byte {
	var h [journalRecHeader]byte
	binary.BigEndian.PutUint32(h[0:], journalRecMagic)
	binary.BigEndian.PutUint32(h[4:], uint32(len(payload)))
	binary.BigEndian.PutUint64(h[8:], seq)
	binary.BigEndian.PutUint32(h[16:], logID)
	binary.BigEndian.PutUint32(h[20:], crc32.Checksum(payload, castagnoli))
	copy(h[24:], recordMAC(key, h[:]))
	dst = append(dst, h[:]...)
	dst = append(dst, payload...)
	for pad := align8(int64(len(payload))) - int64(len(payload)); pad > 0; pad-- {
		dst = append(dst, 0)
	}
	return dst
}

// parseRecord reads the record at b[0:], if there is a whole one whose
// MAC under key and payload checksum hold: anything else (a torn write,
// stale or client bytes) is not a record. It never panics.
func parseRecord(b []byte, key *journalKey) (r journalRecord, ok bool) {
	if len(b) < journalRecHeader || binary.BigEndian.Uint32(b[0:]) != journalRecMagic {
		return r, false
	}
	if !hmac.Equal(recordMAC(key, b), b[24:24+journalMACLen]) {
		return r, false
	}
	n := int64(binary.BigEndian.Uint32(b[4:]))
	if journalRecHeader+n > int64(len(b)) {
		return r, false
	}
	payload := b[journalRecHeader : journalRecHeader+n]
	if crc32.Checksum(payload, castagnoli) != binary.BigEndian.Uint32(b[20:]) {
		return r, false
	}
	return journalRecord{
		seq: binary.BigEndian.Uint64(b[8:]), logID: binary.BigEndian.Uint32(b[16:]),
		size: recordSize(int(n)), payload: payload,
	}, true
}

// scanJournal reads the live records of a journal file's contents img (a
// whole file): from the header's start, each record the one with the next
// sequence number, at the next offset or at journalDataStart. It returns
// them and the offset after the last (where the next record goes). The
// first offset where the chain ends is the tail if nothing after it holds
// a record of a later sequence number (a write that did not complete
// before a crash: cut, never replayed); if something does, the record
// there is damage (ErrCorrupt naming the offset). Only bytes whose MAC
// holds under the header's key count as records, so what clients wrote
// into payloads is never one. It never panics.
func scanJournal(img []byte) (h journalHeader, recs []journalRecord, tail int64, err error) {
	if len(img) < journalDataStart+journalRecHeader {
		return h, nil, 0, fmt.Errorf("%w: %d bytes, too short for a journal", ErrCorrupt, len(img))
	}
	h0, err0 := decodeJournalHeader(img[:journalSlotSize])
	h1, err1 := decodeJournalHeader(img[journalSlotSize:journalDataStart])
	switch {
	case err0 != nil && err1 != nil:
		return h, nil, 0, fmt.Errorf("%w: no valid header (slot 0: %v; slot 1: %v)", ErrCorrupt, err0, err1)
	case err1 != nil || (err0 == nil && h0.counter > h1.counter):
		h = h0
	default:
		h = h1
	}
	if h.size != int64(len(img)) {
		return h, nil, 0, fmt.Errorf("%w: the header says %d bytes, the file has %d", ErrCorrupt, h.size, len(img))
	}
	pos, seq := h.start, h.startSeq
	at := func(p int64) (journalRecord, bool) {
		if p < journalDataStart || p >= int64(len(img)) {
			return journalRecord{}, false
		}
		r, ok := parseRecord(img[p:], &h.key)
		if !ok || r.seq != seq {
			return r, false
		}
		r.pos = p
		return r, true
	}
	var live int64
	for live < int64(len(img)) {
		r, ok := at(pos)
		if !ok && pos != journalDataStart {
			r, ok = at(journalDataStart)
		}
		if !ok {
			break
		}
		recs = append(recs, r)
		live += r.size
		pos, seq = r.pos+r.size, seq+1
	}
	// Nothing later may be intact: a record of a later sequence number
	// means the chain broke at pos by damage, not by a crash mid-write
	// (each record is synced before the next is written).
	for p := int64(journalDataStart); p+journalRecHeader <= int64(len(img)); p += 8 {
		if binary.BigEndian.Uint32(img[p:]) != journalRecMagic {
			continue
		}
		if r, ok := parseRecord(img[p:], &h.key); ok && r.seq > seq {
			return h, nil, 0, fmt.Errorf("%w: damaged record at offset %d (sequence %d): the record at offset %d (sequence %d) after it is intact",
				ErrCorrupt, pos, seq, p, r.seq)
		}
	}
	return h, recs, pos, nil
}

// scanJournalProtected is scanJournal with a fault of the mapping (the
// file shrunk under it) turned into ErrCorrupt.
func scanJournalProtected(img []byte) (h journalHeader, recs []journalRecord, tail int64, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			h, recs, tail, err = journalHeader{}, nil, 0, fmt.Errorf("%w: reading the journal: %v", ErrCorrupt, r)
		}
	}()
	return scanJournal(img)
}
