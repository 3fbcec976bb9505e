package storage

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/replog-io/replog/protocol"
)

// Stored entry value, format version 2 (the key is the 8-byte big-endian
// offset, so the value does not repeat it):
//
//	byte 0      format version (2)
//	byte 1      entry type
//	bytes 2..5  CRC-32C (Castagnoli), big-endian, over
//	            epoch (8 bytes big-endian) | type (1 byte) |
//	            time (8 bytes big-endian) | payload
//	uvarint     epoch (minimal encoding)
//	uvarint     time (milliseconds since the Unix epoch, minimal encoding)
//	rest        payload
//
// Version 1 (written before entries carried a time) is the same without
// the time, in the value and in the CRC; it is still read, with time 0.
// The overhead is 13 bytes for epochs below 128 and times of this century:
// entries are small and bbolt pages are written whole, so a compact value
// keeps write amplification low. The CRC covers the canonical fields rather
// than the stored bytes, so an encoding may change in a later version
// without changing checksums.

const (
	entryFormatV1 = 1
	entryFormatV2 = 2
	// entryHeaderMin is the smallest valid stored value: version, type, CRC
	// and a one-byte epoch (version 1; version 2 adds at least a byte).
	entryHeaderMin = 1 + 1 + 4 + 1
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// entryCRC is the checksum stored with an entry of format version 2.
func entryCRC(epoch uint64, typ protocol.EntryType, time uint64, payload []byte) uint32 {
	var hdr [17]byte
	binary.BigEndian.PutUint64(hdr[:8], epoch)
	hdr[8] = byte(typ)
	binary.BigEndian.PutUint64(hdr[9:], time)
	c := crc32.Update(0, castagnoli, hdr[:])
	return crc32.Update(c, castagnoli, payload)
}

// entryCRCV1 is the checksum stored with an entry of format version 1.
func entryCRCV1(epoch uint64, typ protocol.EntryType, payload []byte) uint32 {
	var hdr [9]byte
	binary.BigEndian.PutUint64(hdr[:8], epoch)
	hdr[8] = byte(typ)
	c := crc32.Update(0, castagnoli, hdr[:])
	return crc32.Update(c, castagnoli, payload)
}

// storedTime is e.Time as stored: a time before 1970 is stored as 0
// (unknown).
func storedTime(e *protocol.Entry) uint64 {
	return uint64(max(e.Time, 0))
}

// encodedEntrySize is the length of appendEntry's output for e.
func encodedEntrySize(e *protocol.Entry) int {
	return 1 + 1 + 4 + uvarintLen(e.Epoch) + uvarintLen(storedTime(e)) + len(e.Data)
}

// appendEntry appends the stored value of e (format version 2) to dst.
func appendEntry(dst []byte, e *protocol.Entry) []byte {
	t := storedTime(e)
	dst = append(dst, entryFormatV2, byte(e.Type))
	dst = binary.BigEndian.AppendUint32(dst, entryCRC(e.Epoch, e.Type, t, e.Data))
	dst = binary.AppendUvarint(dst, e.Epoch)
	dst = binary.AppendUvarint(dst, t)
	return append(dst, e.Data...)
}

// decodeEntry decodes a stored value written by appendEntry (or by format
// version 1) into an entry without its offset. The returned Data aliases
// val (copy it before val's memory goes away, e.g. when a bbolt
// transaction closes). It never panics; any malformed or checksum-failing
// input returns an error wrapping ErrCorrupt.
func decodeEntry(val []byte) (protocol.Entry, error) {
	var e protocol.Entry
	if len(val) < entryHeaderMin {
		return e, fmt.Errorf("%w: entry value of %d bytes is too short", ErrCorrupt, len(val))
	}
	version := val[0]
	if version != entryFormatV1 && version != entryFormatV2 {
		return e, fmt.Errorf("%w: unknown entry format version %d", ErrCorrupt, val[0])
	}
	typ := protocol.EntryType(val[1])
	sum := binary.BigEndian.Uint32(val[2:6])
	p := val[6:]
	epoch, n := binary.Uvarint(p)
	if n <= 0 || n != uvarintLen(epoch) {
		return e, fmt.Errorf("%w: bad epoch encoding", ErrCorrupt)
	}
	p = p[n:]
	var t uint64
	var got uint32
	if version == entryFormatV2 {
		t, n = binary.Uvarint(p)
		if n <= 0 || n != uvarintLen(t) || t > 1<<63-1 {
			return e, fmt.Errorf("%w: bad time encoding", ErrCorrupt)
		}
		p = p[n:]
		got = entryCRC(epoch, typ, t, p)
	} else {
		got = entryCRCV1(epoch, typ, p)
	}
	if got != sum {
		return e, fmt.Errorf("%w: checksum mismatch (stored %08x, computed %08x)", ErrCorrupt, sum, got)
	}
	if !typ.Known() {
		return e, fmt.Errorf("%w: unknown entry type %d", ErrCorrupt, typ)
	}
	e.Epoch, e.Type, e.Time, e.Data = epoch, typ, int64(t), p
	return e, nil
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

// Voter-set row value (bucket voters, key the 8-byte big-endian offset of
// the EntryVoters entry): the set as protocol.EncodeVoterSet encodes it
// (with its owed incarnations, R58), then
// a CRC-32C (4 bytes, big-endian) over the key and the set. The entry
// holds the same set under its own CRC; the row's is its own because the
// row is read at every open and a flipped bit in a directory ID would
// still decode.

// encodeVotersRow is the stored value of row r.
func encodeVotersRow(r protocol.VotersAt) []byte {
	b := protocol.EncodeVoterSet(r.Voters, r.Owed)
	return binary.BigEndian.AppendUint32(b, votersRowCRC(r.Offset, b))
}

func votersRowCRC(off uint64, set []byte) uint32 {
	c := crc32.Update(0, castagnoli, u64key(off))
	return crc32.Update(c, castagnoli, set)
}

// decodeVotersRow decodes the value of the row at off; every problem
// wraps ErrCorrupt and names the offset.
func decodeVotersRow(off uint64, v []byte) (protocol.VotersAt, error) {
	if len(v) < 4 {
		return protocol.VotersAt{}, fmt.Errorf("%w: voter-set row at offset %d of %d bytes", ErrCorrupt, off, len(v))
	}
	set, sum := v[:len(v)-4], binary.BigEndian.Uint32(v[len(v)-4:])
	if got := votersRowCRC(off, set); got != sum {
		return protocol.VotersAt{}, fmt.Errorf("%w: voter-set row at offset %d: checksum mismatch (stored %08x, computed %08x)", ErrCorrupt, off, sum, got)
	}
	vs, owed, err := protocol.DecodeVoterSet(set)
	if err != nil {
		return protocol.VotersAt{}, fmt.Errorf("%w: voter-set row at offset %d: %v", ErrCorrupt, off, err)
	}
	return protocol.VotersAt{Offset: off, Voters: vs, Owed: owed}, nil
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
