package protocol

import (
	"encoding/binary"
	"fmt"
)

// Keyed appends (docs/protocol.md R61–R66, exactly once). A keyed proposal is
// one batch carrying a Key: the producer that made it and its sequence
// number (Kafka's idempotent producer), and optionally a caller-supplied ID
// (JetStream's message ID). The key header rides on the batch's last entry;
// the leader and every replica derive their table of producers, IDs and
// cursors from these entries alone.

const (
	// EntryKeyed is a data entry of a keyed batch: readers see it as data.
	// Its Data is uvarint(len(h)) ‖ h ‖ the record, where h is the batch's
	// encoded key header (EncodeKeyHeader) on the batch's last entry and
	// empty on the others (SplitKeyed separates them).
	EntryKeyed EntryType = 4
	// EntryState is a control entry (readers never see it) holding keyed
	// state records (EncodeStateRecords): a cursor commit (with its key
	// header, as an EntryKeyed entry has one) or the leader's copies of
	// live keys above the log start (without). Data has EntryKeyed's
	// prefix.
	EntryState EntryType = 5
)

// MaxKeyLength bounds a caller ID and a cursor name, in bytes.
const MaxKeyLength = 256

// Key identifies a keyed proposal.
type Key struct {
	// Producer is the producer's ID (0: none, the proposal is keyed by ID
	// only). Seq is its sequence number for this proposal; retries carry
	// the same Seq.
	Producer uint64
	Seq      uint64
	// Low is the producer's lowest sequence number still unanswered (RIFL's
	// first incomplete sequence number): it will never retry a lower one,
	// so the leader may forget those.
	Low uint64
	// ID is the caller-supplied ID ("" if none), deduplicated within a
	// window (R64).
	ID string
	// EntryKey is the key every entry of the batch carries ("" if none,
	// at most MaxKeyLength bytes; docs/protocol.md R102): what compaction
	// keeps the newest entry of. Unlike ID it deduplicates nothing. It is
	// written only at FeatureLevelKeys and above, in key header format 2.
	EntryKey string
}

// IsZero reports whether k carries neither a producer, an ID nor an
// entry key.
func (k Key) IsZero() bool { return k.Producer == 0 && k.ID == "" && k.EntryKey == "" }

// KeyHeader is a Key as stored on the last entry of its batch, with the
// number of entries of the batch (the batch's first offset is the entry's
// offset minus N-1).
type KeyHeader struct {
	Key
	N uint64
}

// Key header formats. Format 1 is the header of a batch without an entry
// key, byte for byte what every release since keyed appends writes. Format
// 2 (FeatureLevelKeys, R102) appends the entry key; it is also the header
// of a keyed batch's entries before its last, with N 0: those carry their
// entry key and nothing else.
const (
	keyHeaderFormat      = 1
	keyHeaderFormatEntry = 2
)

// MaxKeyHeaderLength bounds the length of an encoded key header.
const MaxKeyHeaderLength = 1 + 8 + 5*binary.MaxVarintLen64 + 2*MaxKeyLength

// MaxEntryKeyOverhead bounds what an entry key of n bytes adds to each
// entry of a keyed batch: its length and bytes in the last entry's header,
// or the whole entry-key-only header of an entry before it (with that
// header's length in the entry's prefix).
func MaxEntryKeyOverhead(n int) int { return 1 + 8 + 4 + 2*binary.MaxVarintLen64 + n }

// EncodeKeyHeader encodes h (the caller keeps len(h.ID) and
// len(h.EntryKey) ≤ MaxKeyLength).
func EncodeKeyHeader(h KeyHeader) []byte {
	return AppendKeyHeader(make([]byte, 0, 1+8+4*binary.MaxVarintLen64+len(h.ID)+len(h.EntryKey)), h)
}

// AppendKeyHeader appends the encoding of h to b (EncodeKeyHeader's): a
// caller may encode into a buffer of MaxKeyHeaderLength on its stack. A
// header without an entry key is format 1, one with format 2.
func AppendKeyHeader(b []byte, h KeyHeader) []byte {
	format := byte(keyHeaderFormat)
	if h.EntryKey != "" {
		format = keyHeaderFormatEntry
	}
	b = append(b, format)
	b = binary.BigEndian.AppendUint64(b, h.Producer)
	b = binary.AppendUvarint(b, h.Seq)
	b = binary.AppendUvarint(b, h.Low)
	b = binary.AppendUvarint(b, h.N)
	b = binary.AppendUvarint(b, uint64(len(h.ID)))
	b = append(b, h.ID...)
	if format == keyHeaderFormatEntry {
		b = binary.AppendUvarint(b, uint64(len(h.EntryKey)))
		b = append(b, h.EntryKey...)
	}
	return b
}

// AppendEntryKeyHeader appends the header of a keyed batch's entry before
// its last that carries entry key k (non-empty): format 2 with N 0 and
// nothing else.
func AppendEntryKeyHeader(b []byte, k string) []byte {
	return AppendKeyHeader(b, KeyHeader{Key: Key{EntryKey: k}})
}

// DecodeKeyHeader decodes an encoded key header; problems wrap
// ErrMalformed. A header with N 0 (an entry-key-only header, format 2 with
// a non-empty entry key and no producer, sequence or ID) carries only
// EntryKey: it is not the last entry of its batch.
func DecodeKeyHeader(b []byte) (KeyHeader, error) {
	var h KeyHeader
	if len(b) < 9 || (b[0] != keyHeaderFormat && b[0] != keyHeaderFormatEntry) {
		return h, fmt.Errorf("%w: key header of %d bytes", ErrMalformed, len(b))
	}
	h.Producer = binary.BigEndian.Uint64(b[1:9])
	r := uvarintReader{b: b[9:]}
	h.Seq, h.Low, h.N = r.next(), r.next(), r.next()
	h.ID = r.str()
	if b[0] == keyHeaderFormatEntry {
		if h.EntryKey = r.str(); h.EntryKey == "" {
			r.err = ErrMalformed // format 2 exists for its entry key
		}
	}
	keyOnly := h.N == 0 && h.Producer == 0 && h.Seq == 0 && h.Low == 0 && h.ID == "" && h.EntryKey != ""
	if r.err != nil || len(r.b) != 0 || h.N == 0 && !keyOnly {
		return KeyHeader{}, fmt.Errorf("%w: key header", ErrMalformed)
	}
	return h, nil
}

// KeyedPart reports whether data, an EntryKeyed entry's, is that of an
// entry before its batch's last: its prefix holds no header, or only an
// entry key (R102). A malformed prefix is not a part.
func KeyedPart(data []byte) bool {
	if len(data) > 0 && data[0] == 0 {
		return true
	}
	hb, _, err := SplitKeyed(data)
	if err != nil || len(hb) == 0 || hb[0] != keyHeaderFormatEntry {
		return false
	}
	h, err := DecodeKeyHeader(hb)
	return err == nil && h.N == 0
}

// EntryKeyOf returns the entry key of e ("" if none: every entry that is
// not EntryKeyed, and every one written without WithKey or before
// FeatureLevelKeys) and what a reader sees of its Data (UserData).
func EntryKeyOf(e Entry) (key string, data []byte) {
	if e.Type != EntryKeyed {
		return "", e.Data
	}
	hb, rest, err := SplitKeyed(e.Data)
	if err != nil {
		return "", e.Data
	}
	if len(hb) > 0 && hb[0] == keyHeaderFormatEntry {
		if h, err := DecodeKeyHeader(hb); err == nil {
			key = h.EntryKey
		}
	}
	return key, rest
}

// KeyedData returns the Data of an EntryKeyed or EntryState entry: the
// prefix holding header h (nil for none), then rest.
func KeyedData(h []byte, rest []byte) []byte {
	b := make([]byte, 0, binary.MaxVarintLen64+len(h)+len(rest))
	b = binary.AppendUvarint(b, uint64(len(h)))
	b = append(b, h...)
	return append(b, rest...)
}

// SplitKeyed splits the Data of an EntryKeyed or EntryState entry into
// its encoded key header (empty if none) and the rest, aliasing data.
func SplitKeyed(data []byte) (header, rest []byte, err error) {
	n, k := binary.Uvarint(data)
	if k <= 0 || n > uint64(len(data)-k) {
		return nil, nil, fmt.Errorf("%w: keyed entry prefix", ErrMalformed)
	}
	return data[k : k+int(n)], data[k+int(n):], nil
}

// UserData returns what a reader sees of an entry's Data: an EntryKeyed
// entry without its prefix (and data unchanged for any other type; a
// malformed prefix, which the leader never writes, is returned whole).
func UserData(e Entry) []byte {
	if e.Type != EntryKeyed {
		return e.Data
	}
	_, rest, err := SplitKeyed(e.Data)
	if err != nil {
		return e.Data
	}
	return rest
}

// StateKind names a keyed state record.
type StateKind uint8

// Keyed state record kinds. Values are part of the stored format.
const (
	StateCursor   StateKind = 1 // a cursor's position
	StateProducer StateKind = 2 // a copy of a producer's state
	StateID       StateKind = 3 // a copy of a caller ID's record
	// StateLog is a named log of the catalog (docs/protocol.md R80): Name
	// is the log's name, Data its spec (opaque to the core; empty: the
	// log is deleted), First, in a leader's copy (R81), the offset of the
	// entry that created the log (0 in a proposal: its own entry does).
	StateLog StateKind = 4
)

// MaxLogSpecLength bounds a StateLog record's spec, in bytes.
const MaxLogSpecLength = 4 << 10

// SeqAt is where a producer's sequence number was appended: the batch
// [First, First+N).
type SeqAt struct {
	Seq, First, N uint64
}

// StateRecord is one keyed state record of an EntryState entry.
type StateRecord struct {
	Kind StateKind
	// Name is the cursor name (StateCursor), the caller ID (StateID) or
	// the log name (StateLog).
	Name string
	// Next is a cursor's position: the next offset to read.
	Next uint64
	// Producer, Low and Seqs are a producer's state (StateProducer).
	Producer uint64
	Low      uint64
	Seqs     []SeqAt
	// First and N are an ID's batch (StateID); First is also a copied
	// log's creating offset (StateLog).
	First, N uint64
	// Data is a log's spec (StateLog only; empty: a deletion). A decoded
	// record's Data aliases the decoded bytes.
	Data []byte
	// Time is the producer's last activity or the ID's entry time, in
	// milliseconds since the Unix epoch: a copy keeps the original's, so
	// copying never postpones an expiry.
	Time int64
}

// EncodeStateRecords appends the encoding of rs to b.
func EncodeStateRecords(b []byte, rs ...StateRecord) []byte {
	for _, r := range rs {
		b = append(b, byte(r.Kind))
		switch r.Kind {
		case StateCursor:
			b = appendUvarintString(b, r.Name)
			b = binary.AppendUvarint(b, r.Next)
		case StateProducer:
			b = binary.BigEndian.AppendUint64(b, r.Producer)
			b = binary.AppendUvarint(b, r.Low)
			b = binary.AppendUvarint(b, uint64(r.Time))
			b = binary.AppendUvarint(b, uint64(len(r.Seqs)))
			for _, s := range r.Seqs {
				b = binary.AppendUvarint(b, s.Seq)
				b = binary.AppendUvarint(b, s.First)
				b = binary.AppendUvarint(b, s.N)
			}
		case StateID:
			b = appendUvarintString(b, r.Name)
			b = binary.AppendUvarint(b, r.First)
			b = binary.AppendUvarint(b, r.N)
			b = binary.AppendUvarint(b, uint64(r.Time))
		case StateLog:
			b = appendUvarintString(b, r.Name)
			b = binary.AppendUvarint(b, r.First)
			b = binary.AppendUvarint(b, uint64(len(r.Data)))
			b = append(b, r.Data...)
		}
	}
	return b
}

// DecodeStateRecords decodes the records of an EntryState entry (after
// its prefix); problems wrap ErrMalformed.
func DecodeStateRecords(b []byte) ([]StateRecord, error) {
	var rs []StateRecord
	r := uvarintReader{b: b}
	for len(r.b) > 0 && r.err == nil {
		k := StateKind(r.b[0])
		r.b = r.b[1:]
		rec := StateRecord{Kind: k}
		switch k {
		case StateCursor:
			rec.Name = r.str()
			rec.Next = r.next()
		case StateProducer:
			if len(r.b) < 8 {
				r.err = ErrMalformed
				break
			}
			rec.Producer = binary.BigEndian.Uint64(r.b)
			r.b = r.b[8:]
			rec.Low = r.next()
			rec.Time = int64(r.next())
			n := r.next()
			if n > uint64(len(r.b)/3) {
				r.err = ErrMalformed
				break
			}
			rec.Seqs = make([]SeqAt, 0, n)
			for range n {
				rec.Seqs = append(rec.Seqs, SeqAt{Seq: r.next(), First: r.next(), N: r.next()})
			}
		case StateID:
			rec.Name = r.str()
			rec.First, rec.N = r.next(), r.next()
			rec.Time = int64(r.next())
		case StateLog:
			rec.Name = r.str()
			rec.First = r.next()
			rec.Data = r.bytes(MaxLogSpecLength)
		default:
			r.err = fmt.Errorf("unknown state record kind %d", k)
		}
		rs = append(rs, rec)
	}
	if r.err != nil {
		return nil, fmt.Errorf("%w: state records: %w", ErrMalformed, r.err)
	}
	return rs, nil
}

func appendUvarintString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

type uvarintReader struct {
	b   []byte
	err error
}

func (r *uvarintReader) next() uint64 {
	if r.err != nil {
		return 0
	}
	v, k := binary.Uvarint(r.b)
	if k <= 0 {
		r.err = ErrMalformed
		return 0
	}
	r.b = r.b[k:]
	return v
}

// bytes reads a length-prefixed run of at most max bytes, aliasing r.b
// (nil for an empty one).
func (r *uvarintReader) bytes(max int) []byte {
	n := r.next()
	if r.err != nil {
		return nil
	}
	if n > uint64(max) || n > uint64(len(r.b)) {
		r.err = ErrMalformed
		return nil
	}
	if n == 0 {
		return nil
	}
	b := r.b[:n:n]
	r.b = r.b[n:]
	return b
}

func (r *uvarintReader) str() string {
	n := r.next()
	if r.err != nil {
		return ""
	}
	if n > MaxKeyLength || n > uint64(len(r.b)) {
		r.err = ErrMalformed
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}
