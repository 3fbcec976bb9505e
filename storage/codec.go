package storage

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/replog-io/replog/protocol"
)

// Stored entry value, format version 1 (the key is the 8-byte big-endian
// offset, so the value does not repeat it):
//
//	byte 0      format version (1)
//	byte 1      entry type
//	bytes 2..5  CRC-32C (Castagnoli), big-endian, over
//	            epoch (8 bytes big-endian) | type (1 byte) | payload
//	uvarint     epoch (minimal encoding)
//	rest        payload
//
// The overhead is 7 bytes for epochs below 128: entries are small and bbolt
// pages are written whole, so a compact value keeps write amplification low.
// The CRC covers the canonical fields rather than the stored bytes, so the
// epoch encoding may change in a later version without changing checksums.

const (
	entryFormatV1 = 1
	// entryHeaderMin is the smallest valid stored value: version, type, CRC
	// and a one-byte epoch.
	entryHeaderMin = 1 + 1 + 4 + 1
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// entryCRC is the checksum stored with an entry.
func entryCRC(epoch uint64, typ protocol.EntryType, payload []byte) uint32 {
	var hdr [9]byte
	binary.BigEndian.PutUint64(hdr[:8], epoch)
	hdr[8] = byte(typ)
	c := crc32.Update(0, castagnoli, hdr[:])
	return crc32.Update(c, castagnoli, payload)
}

// encodedEntrySize is the length of appendEntry's output for e.
func encodedEntrySize(e *protocol.Entry) int {
	return 1 + 1 + 4 + uvarintLen(e.Epoch) + len(e.Data)
}

// appendEntry appends the stored value of e to dst.
func appendEntry(dst []byte, e *protocol.Entry) []byte {
	dst = append(dst, entryFormatV1, byte(e.Type))
	dst = binary.BigEndian.AppendUint32(dst, entryCRC(e.Epoch, e.Type, e.Data))
	dst = binary.AppendUvarint(dst, e.Epoch)
	return append(dst, e.Data...)
}

// decodeEntry decodes a stored value written by appendEntry. The returned
// Data aliases val (copy it before val's memory goes away, e.g. when a bbolt
// transaction closes). It never panics; any malformed or checksum-failing
// input returns an error wrapping ErrCorrupt.
func decodeEntry(val []byte) (epoch uint64, typ protocol.EntryType, data []byte, err error) {
	if len(val) < entryHeaderMin {
		return 0, 0, nil, fmt.Errorf("%w: entry value of %d bytes is too short", ErrCorrupt, len(val))
	}
	if val[0] != entryFormatV1 {
		return 0, 0, nil, fmt.Errorf("%w: unknown entry format version %d", ErrCorrupt, val[0])
	}
	typ = protocol.EntryType(val[1])
	sum := binary.BigEndian.Uint32(val[2:6])
	epoch, n := binary.Uvarint(val[6:])
	if n <= 0 || n != uvarintLen(epoch) {
		return 0, 0, nil, fmt.Errorf("%w: bad epoch encoding", ErrCorrupt)
	}
	data = val[6+n:]
	if got := entryCRC(epoch, typ, data); got != sum {
		return 0, 0, nil, fmt.Errorf("%w: checksum mismatch (stored %08x, computed %08x)", ErrCorrupt, sum, got)
	}
	if typ != protocol.EntryData && typ != protocol.EntryControl {
		return 0, 0, nil, fmt.Errorf("%w: unknown entry type %d", ErrCorrupt, typ)
	}
	return epoch, typ, data, nil
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// u64key is the 8-byte big-endian form used for offsets and epochs as keys
// (big-endian so that bbolt's byte order is numeric order).
func u64key(v uint64) []byte {
	var k [8]byte
	binary.BigEndian.PutUint64(k[:], v)
	return k[:]
}

// quorum state value, version 1: version byte, uvarint epoch, uvarint
// length + VotedFor, uvarint length + LeaderID, CRC-32C (4 bytes) over all
// preceding bytes.

func encodeQuorumState(s protocol.QuorumState) []byte {
	b := make([]byte, 0, 1+10+10+len(s.VotedFor)+10+len(s.LeaderID)+4)
	b = append(b, 1)
	b = binary.AppendUvarint(b, s.Epoch)
	b = binary.AppendUvarint(b, uint64(len(s.VotedFor)))
	b = append(b, s.VotedFor...)
	b = binary.AppendUvarint(b, uint64(len(s.LeaderID)))
	b = append(b, s.LeaderID...)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func decodeQuorumState(v []byte) (protocol.QuorumState, error) {
	var s protocol.QuorumState
	if len(v) < 1+3+4 {
		return s, fmt.Errorf("%w: quorum state of %d bytes is too short", ErrCorrupt, len(v))
	}
	body, sum := v[:len(v)-4], binary.BigEndian.Uint32(v[len(v)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return s, fmt.Errorf("%w: quorum state checksum mismatch", ErrCorrupt)
	}
	if body[0] != 1 {
		return s, fmt.Errorf("%w: unknown quorum state version %d", ErrCorrupt, body[0])
	}
	p := body[1:]
	var n int
	if s.Epoch, n = binary.Uvarint(p); n <= 0 {
		return s, fmt.Errorf("%w: quorum state epoch", ErrCorrupt)
	}
	p = p[n:]
	str := func() (string, bool) {
		l, n := binary.Uvarint(p)
		if n <= 0 || l > uint64(len(p)-n) {
			return "", false
		}
		out := string(p[n : n+int(l)])
		p = p[n+int(l):]
		return out, true
	}
	var ok bool
	if s.VotedFor, ok = str(); !ok {
		return s, fmt.Errorf("%w: quorum state voted-for", ErrCorrupt)
	}
	if s.LeaderID, ok = str(); !ok {
		return s, fmt.Errorf("%w: quorum state leader", ErrCorrupt)
	}
	if len(p) != 0 {
		return s, fmt.Errorf("%w: quorum state has %d trailing bytes", ErrCorrupt, len(p))
	}
	return s, nil
}
