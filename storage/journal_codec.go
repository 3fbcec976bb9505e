package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"

	"github.com/replog-io/replog/protocol"
)

// A journal record's payload is one Apply's writes, in order: version byte
// (1), uvarint count, then per write a kind byte and its fields:
//
//	1 append:        uvarint count, per entry uvarint offset, uvarint
//	                 length + the entry value as the segments store it
//	                 (codec.go: type, CRC-32C, epoch, time, payload)
//	2 truncate:      uvarint offset
//	3 delete prefix: uvarint offset, uvarint epoch, byte 0 (no voter rows)
//	                 or 1 then uvarint count, per row uvarint offset,
//	                 uvarint length + protocol.EncodeVoterSet
//	4 quorum state:  uvarint length + the stored quorum state (codec.go)
//	5 HW checkpoint: uvarint offset
//
// The kinds are the journal's own numbers, not protocol.WriteKind's.
const journalBatchVersion = 1

const (
	jkAppend       = 1
	jkTruncate     = 2
	jkDeletePrefix = 3
	jkQuorum       = 4
	jkHW           = 5
)

// encodeBatch encodes ws as a record payload; a write of a kind it does
// not know is ErrInvalidWrite.
func encodeBatch(ws []protocol.Write) ([]byte, error) {
	b, err := encodeRecordBatch(ws)
	if err != nil {
		return nil, err
	}
	return b.rec[journalRecHeader : journalRecHeader+b.n], nil
}

// encodedBatch is a batch encoded once for all its uses: rec is a record
// buffer (journalRecHeader bytes of room for the header, then the payload
// of n bytes with checksum crc, then zero padding), writes are the
// batch's writes with every entry's Data aliasing rec (so the store keeps
// no slice of its caller's), and vals[i] the stored values of writes[i]'s
// entries (aliasing rec: what a checkpoint puts into the segments
// without encoding them again).
type encodedBatch struct {
	rec    []byte
	n      int
	crc    uint32
	writes []protocol.Write
	vals   [][][]byte
}

// encodeRecordBatch encodes ws (see encodedBatch); a write of a kind it
// does not know is ErrInvalidWrite.
func encodeRecordBatch(ws []protocol.Write) (encodedBatch, error) {
	size := journalRecHeader + 16
	entries := 0
	for i := range ws {
		size += 24
		for j := range ws[i].Entries {
			size += 20 + encodedEntrySize(&ws[i].Entries[j])
		}
		entries += len(ws[i].Entries)
		for _, r := range ws[i].Voters {
			size += 24 + 8*len(r.Voters) + 8*len(r.Owed)
			for _, v := range r.Voters {
				size += len(v.ID) + len(v.DirID)
			}
			for _, v := range r.Owed {
				size += len(v.ID) + len(v.DirID)
			}
		}
	}
	b := make([]byte, journalRecHeader, size+8)
	b = append(b, journalBatchVersion)
	b = binary.AppendUvarint(b, uint64(len(ws)))
	// Where each entry's stored value starts and ends in b: the slices
	// are made once b no longer grows.
	spans := make([][2]int, 0, entries)
	for i := range ws {
		w := &ws[i]
		switch w.Kind {
		case protocol.WriteAppend:
			b = append(b, jkAppend)
			b = binary.AppendUvarint(b, uint64(len(w.Entries)))
			for j := range w.Entries {
				e := &w.Entries[j]
				b = binary.AppendUvarint(b, e.Offset)
				b = binary.AppendUvarint(b, uint64(encodedEntrySize(e)))
				start := len(b)
				b = appendEntry(b, e)
				spans = append(spans, [2]int{start, len(b)})
			}
		case protocol.WriteTruncate:
			b = append(b, jkTruncate)
			b = binary.AppendUvarint(b, w.Offset)
		case protocol.WriteDeletePrefix:
			b = append(b, jkDeletePrefix)
			b = binary.AppendUvarint(b, w.Offset)
			b = binary.AppendUvarint(b, w.Epoch)
			if w.Voters == nil {
				b = append(b, 0)
				break
			}
			b = append(b, 1)
			b = binary.AppendUvarint(b, uint64(len(w.Voters)))
			for _, r := range w.Voters {
				set := protocol.EncodeVoterSet(r.Voters, r.Owed)
				b = binary.AppendUvarint(b, r.Offset)
				b = binary.AppendUvarint(b, uint64(len(set)))
				b = append(b, set...)
			}
		case protocol.WriteQuorumState:
			q := encodeQuorumState(w.Quorum)
			b = append(b, jkQuorum)
			b = binary.AppendUvarint(b, uint64(len(q)))
			b = append(b, q...)
		case protocol.WriteHWCheckpoint:
			b = append(b, jkHW)
			b = binary.AppendUvarint(b, w.Offset)
		default:
			return encodedBatch{}, writeErr(ws, i, fmt.Errorf("%w: %v", ErrInvalidWrite, w.Kind))
		}
	}
	n := len(b) - journalRecHeader
	rs := int(recordSize(n))
	if cap(b) < rs {
		b = append(b, make([]byte, rs-len(b))...)
	}
	b = b[:rs] // the padding: zero capacity
	out := encodedBatch{rec: b, n: n, crc: crc32.Checksum(b[journalRecHeader:journalRecHeader+n], castagnoli),
		writes: make([]protocol.Write, len(ws)), vals: make([][][]byte, len(ws))}
	k := 0
	for i := range ws {
		w := ws[i]
		if w.Kind == protocol.WriteAppend {
			es := make([]protocol.Entry, len(w.Entries))
			vs := make([][]byte, len(w.Entries))
			for j := range w.Entries {
				e := w.Entries[j]
				sp := spans[k]
				k++
				v := b[sp[0]:sp[1]:sp[1]]
				e.Data = v[len(v)-len(e.Data):]
				e.Time = int64(storedTime(&e))
				es[j], vs[j] = e, v
			}
			w.Entries, out.vals[i] = es, vs
		}
		if w.Voters != nil {
			vr := make([]protocol.VotersAt, len(w.Voters))
			for j, r := range w.Voters {
				vr[j] = protocol.VotersAt{Offset: r.Offset, Voters: slices.Clone(r.Voters), Owed: slices.Clone(r.Owed)}
			}
			w.Voters = vr
		}
		out.writes[i] = w
	}
	return out, nil
}

// batchReader reads a payload; the first error sticks.
type batchReader struct {
	p   []byte
	err error
}

func (r *batchReader) fail(what string) {
	if r.err == nil {
		r.err = errors.New(what)
	}
}

func (r *batchReader) uvarint(what string) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.p)
	if n <= 0 {
		r.fail(what)
		return 0
	}
	r.p = r.p[n:]
	return v
}

func (r *batchReader) byte(what string) byte {
	if r.err != nil || len(r.p) == 0 {
		r.fail(what)
		return 0
	}
	c := r.p[0]
	r.p = r.p[1:]
	return c
}

// bytes reads a uvarint length and that many bytes (aliasing the payload).
func (r *batchReader) bytes(what string) []byte {
	n := r.uvarint(what)
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.p)) {
		r.fail(what)
		return nil
	}
	b := r.p[:n:n]
	r.p = r.p[n:]
	return b
}

// count reads a uvarint count of items of at least min bytes each, no
// more than the payload can hold.
func (r *batchReader) count(what string, min int) int {
	n := r.uvarint(what)
	if r.err == nil && n > uint64(len(r.p)/min) {
		r.fail(what)
		return 0
	}
	return int(n)
}

// decodeBatch decodes a record payload into writes; entries' Data alias p.
// Any malformed input is an error wrapping ErrCorrupt; it never panics.
func decodeBatch(p []byte) ([]protocol.Write, error) {
	r := &batchReader{p: p}
	if v := r.byte("version"); r.err == nil && v != journalBatchVersion {
		return nil, fmt.Errorf("%w: journal batch version %d, this build reads %d", ErrCorrupt, v, journalBatchVersion)
	}
	n := r.count("write count", 2)
	ws := make([]protocol.Write, 0, n)
	for i := 0; i < n && r.err == nil; i++ {
		var w protocol.Write
		switch k := r.byte("write kind"); k {
		case jkAppend:
			w.Kind = protocol.WriteAppend
			ne := r.count("entry count", 2)
			w.Entries = make([]protocol.Entry, 0, ne)
			for j := 0; j < ne && r.err == nil; j++ {
				off := r.uvarint("entry offset")
				v := r.bytes("entry value")
				if r.err != nil {
					break
				}
				e, err := decodeEntry(v)
				if err != nil {
					return nil, fmt.Errorf("journal write %d, entry at offset %d: %w", i+1, off, err)
				}
				e.Offset = off
				w.Entries = append(w.Entries, e)
			}
		case jkTruncate:
			w.Kind, w.Offset = protocol.WriteTruncate, r.uvarint("truncation offset")
		case jkDeletePrefix:
			w.Kind = protocol.WriteDeletePrefix
			w.Offset = r.uvarint("deletion offset")
			w.Epoch = r.uvarint("deletion epoch")
			switch r.byte("voter rows flag") {
			case 0:
			case 1:
				nr := r.count("voter row count", 2)
				w.Voters = make([]protocol.VotersAt, 0, nr)
				for j := 0; j < nr && r.err == nil; j++ {
					off := r.uvarint("voter row offset")
					set := r.bytes("voter set")
					if r.err != nil {
						break
					}
					vs, owed, err := protocol.DecodeVoterSet(set)
					if err != nil {
						return nil, fmt.Errorf("%w: journal write %d: voter row at offset %d: %v", ErrCorrupt, i+1, off, err)
					}
					w.Voters = append(w.Voters, protocol.VotersAt{Offset: off, Voters: vs, Owed: owed})
				}
			default:
				r.fail("voter rows flag")
			}
		case jkQuorum:
			w.Kind = protocol.WriteQuorumState
			q := r.bytes("quorum state")
			if r.err != nil {
				break
			}
			qs, err := decodeQuorumState(q)
			if err != nil {
				return nil, fmt.Errorf("journal write %d: %w", i+1, err)
			}
			w.Quorum = qs
		case jkHW:
			w.Kind, w.Offset = protocol.WriteHWCheckpoint, r.uvarint("HW checkpoint")
		default:
			if r.err == nil {
				return nil, fmt.Errorf("%w: journal write %d of unknown kind %d", ErrCorrupt, i+1, k)
			}
		}
		ws = append(ws, w)
	}
	if r.err == nil && len(r.p) != 0 {
		r.fail(fmt.Sprintf("%d trailing bytes", len(r.p)))
	}
	if r.err != nil {
		return nil, fmt.Errorf("%w: journal batch: bad %v", ErrCorrupt, r.err)
	}
	return ws, nil
}
