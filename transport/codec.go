package transport

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"

	"github.com/replog-io/replog/storage"
)

// Wire format of one frame (all integers big-endian):
//
//	length   uint32  bytes after this field (header + body + crc)
//	version  uint8   FrameVersion
//	kind     uint8   Kind of the body
//	from     string
//	to       string
//	body     the body's fields in declaration order (see append* below)
//	crc      uint32  CRC-32C (Castagnoli) of every byte before it, length included
//
// A string or byte slice is a uint32 length followed by its bytes; a slice of
// entries or records is a uint32 count followed by its elements; a bool is
// one byte, 0 or 1. An entry is offset u64, epoch u64, type u8, data bytes.
//
// Fixed-width integers keep encoding and decoding branch-free and let the
// decoder bound a count by the bytes left before allocating anything.

// FrameVersion is the version byte of every frame this package writes. A
// frame with another version is rejected with ErrBadFrame. Version 2 added
// VoteRequest.Round, VoteResponse.RequestEpoch and Round, and
// AppendRequest.Epoch.
const FrameVersion = 2

// DefaultMaxFrameSize is the frame size limit used when none is given.
const DefaultMaxFrameSize = 16 << 20

const (
	lenSize      = 4
	crcSize      = 4
	headerSize   = lenSize + 2 // length, version, kind
	minFrameSize = headerSize + 4 + 4 + crcSize
	// minEntrySize is the smallest encoding of a storage.Entry: offset,
	// epoch, type and an empty data length.
	minEntrySize = 8 + 8 + 1 + 4
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// EncodedSize returns the size in bytes of m's frame (length prefix and
// checksum included), or -1 if m has no (or a nil) body.
func EncodedSize(m Message) int {
	n := headerSize + 4 + len(m.From) + 4 + len(m.To) + crcSize
	switch b := m.Body.(type) {
	case *FetchRequest:
		if b == nil {
			return -1
		}
		n += 8 + 4 + len(b.ReplicaID) + 8 + 8 + 8 + 4 + 4
	case *FetchResponse:
		if b == nil {
			return -1
		}
		n += 8 + 4 + len(b.LeaderID) + 8 + 1 + 8 + 8 + 8 + 8 + 4
		n += len(b.Entries) * minEntrySize
		for i := range b.Entries {
			n += len(b.Entries[i].Data)
		}
	case *VoteRequest:
		if b == nil {
			return -1
		}
		n += 8 + 4 + len(b.CandidateID) + 8 + 8 + 1 + 8
	case *VoteResponse:
		if b == nil {
			return -1
		}
		n += 8 + 4 + len(b.VoterID) + 1 + 1 + 8 + 8 + 4 + len(b.LeaderID)
	case *BeginEpoch:
		if b == nil {
			return -1
		}
		n += 8 + 4 + len(b.LeaderID)
	case *AppendRequest:
		if b == nil {
			return -1
		}
		n += 8 + 8 + 4 + 4*len(b.Records)
		for _, r := range b.Records {
			n += len(r)
		}
	case *AppendResponse:
		if b == nil {
			return -1
		}
		n += 8 + 1 + 4 + len(b.LeaderID) + 8
	default:
		return -1
	}
	return n
}

// AppendFrame appends the frame encoding m to dst and returns the extended
// slice. It grows dst at most once (the size is computed first) and makes
// no other allocation, so a writer that reuses dst encodes without
// allocating. It fails only for a message without a body or a frame above
// 4 GiB (ErrFrameTooLarge); callers enforce their own, smaller limit with
// EncodedSize before encoding.
func AppendFrame(dst []byte, m Message) ([]byte, error) {
	size := EncodedSize(m)
	if size < 0 {
		return dst, fmt.Errorf("%w: message %s->%s has no body", ErrBadFrame, m.From, m.To)
	}
	if size > math.MaxUint32 {
		return dst, fmt.Errorf("%w: %d bytes", ErrFrameTooLarge, size)
	}
	start := len(dst)
	if cap(dst)-start < size {
		grown := make([]byte, start, start+size)
		copy(grown, dst)
		dst = grown
	}
	be := binary.BigEndian
	dst = be.AppendUint32(dst, uint32(size-lenSize))
	dst = append(dst, FrameVersion, byte(m.Body.Kind()))
	dst = appendString(dst, m.From)
	dst = appendString(dst, m.To)
	switch b := m.Body.(type) {
	case *FetchRequest:
		dst = be.AppendUint64(dst, b.FetchID)
		dst = appendString(dst, b.ReplicaID)
		dst = be.AppendUint64(dst, b.CurrentEpoch)
		dst = be.AppendUint64(dst, b.FetchOffset)
		dst = be.AppendUint64(dst, b.LastFetchedEpoch)
		dst = be.AppendUint32(dst, b.MaxBytes)
		dst = be.AppendUint32(dst, b.MaxWaitMs)
	case *FetchResponse:
		dst = be.AppendUint64(dst, b.FetchID)
		dst = appendString(dst, b.LeaderID)
		dst = be.AppendUint64(dst, b.Epoch)
		dst = append(dst, byte(b.Error))
		dst = be.AppendUint64(dst, b.DivergingEpoch)
		dst = be.AppendUint64(dst, b.DivergingEndOffset)
		dst = be.AppendUint64(dst, b.HighWatermark)
		dst = be.AppendUint64(dst, b.LogStartOffset)
		dst = be.AppendUint32(dst, uint32(len(b.Entries)))
		for i := range b.Entries {
			e := &b.Entries[i]
			dst = be.AppendUint64(dst, e.Offset)
			dst = be.AppendUint64(dst, e.Epoch)
			dst = append(dst, byte(e.Type))
			dst = be.AppendUint32(dst, uint32(len(e.Data)))
			dst = append(dst, e.Data...)
		}
	case *VoteRequest:
		dst = be.AppendUint64(dst, b.Epoch)
		dst = appendString(dst, b.CandidateID)
		dst = be.AppendUint64(dst, b.LastEpoch)
		dst = be.AppendUint64(dst, b.LEO)
		dst = appendBool(dst, b.PreVote)
		dst = be.AppendUint64(dst, b.Round)
	case *VoteResponse:
		dst = be.AppendUint64(dst, b.Epoch)
		dst = appendString(dst, b.VoterID)
		dst = appendBool(dst, b.Granted)
		dst = appendBool(dst, b.PreVote)
		dst = be.AppendUint64(dst, b.RequestEpoch)
		dst = be.AppendUint64(dst, b.Round)
		dst = appendString(dst, b.LeaderID)
	case *BeginEpoch:
		dst = be.AppendUint64(dst, b.Epoch)
		dst = appendString(dst, b.LeaderID)
	case *AppendRequest:
		dst = be.AppendUint64(dst, b.RequestID)
		dst = be.AppendUint64(dst, b.Epoch)
		dst = be.AppendUint32(dst, uint32(len(b.Records)))
		for _, r := range b.Records {
			dst = be.AppendUint32(dst, uint32(len(r)))
			dst = append(dst, r...)
		}
	case *AppendResponse:
		dst = be.AppendUint64(dst, b.RequestID)
		dst = append(dst, byte(b.Error))
		dst = appendString(dst, b.LeaderID)
		dst = be.AppendUint64(dst, b.FirstOffset)
	}
	dst = be.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
	return dst, nil
}

func appendString(dst []byte, s string) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(s)))
	return append(dst, s...)
}

func appendBool(dst []byte, v bool) []byte {
	if v {
		return append(dst, 1)
	}
	return append(dst, 0)
}

// DecodeFrame decodes the frame at the start of b and returns the message
// and the number of bytes it took. b must hold the whole frame; a shorter b
// is a truncated frame (ErrBadFrame). A frame larger than maxSize (0 means
// DefaultMaxFrameSize) returns ErrFrameTooLarge before anything else is
// read; every other problem returns an error wrapping ErrBadFrame that says
// what was wrong.
//
// Entry Data and AppendRequest Records of the result alias b (capacity
// clipped, so appending to them never writes into b): the caller must not
// modify b while it uses the message. Strings are copied. Decoding
// allocates the strings, the body and one entry or record slice, whose
// length is checked against the bytes left in the frame before it is
// allocated (an entry takes at least 21 bytes on the wire, a record 4), so
// a forged count cannot make it allocate beyond a small multiple of the
// frame size. It never panics.
func DecodeFrame(b []byte, maxSize int) (Message, int, error) {
	if maxSize <= 0 {
		maxSize = DefaultMaxFrameSize
	}
	if len(b) < lenSize {
		return Message{}, 0, fmt.Errorf("%w: truncated length prefix (%d bytes)", ErrBadFrame, len(b))
	}
	n := uint64(binary.BigEndian.Uint32(b)) + lenSize
	if n > uint64(maxSize) {
		return Message{}, 0, fmt.Errorf("%w: frame of %d bytes, limit %d", ErrFrameTooLarge, n, maxSize)
	}
	if n < minFrameSize {
		return Message{}, 0, fmt.Errorf("%w: frame of %d bytes is below the minimum %d", ErrBadFrame, n, minFrameSize)
	}
	if uint64(len(b)) < n {
		return Message{}, 0, fmt.Errorf("%w: truncated frame: %d of %d bytes", ErrBadFrame, len(b), n)
	}
	f := b[:n]
	body := f[:n-crcSize]
	want := binary.BigEndian.Uint32(f[n-crcSize:])
	if got := crc32.Checksum(body, castagnoli); got != want {
		return Message{}, 0, fmt.Errorf("%w: checksum %08x, frame says %08x", ErrBadFrame, got, want)
	}
	if v := body[lenSize]; v != FrameVersion {
		return Message{}, 0, fmt.Errorf("%w: frame version %d, want %d", ErrBadFrame, v, FrameVersion)
	}
	kind := Kind(body[lenSize+1])
	d := decoder{b: body, off: headerSize}
	var m Message
	m.From = d.string("from")
	m.To = d.string("to")
	switch kind {
	case KindFetchRequest:
		x := &FetchRequest{}
		x.FetchID = d.u64("fetch id")
		x.ReplicaID = d.string("replica id")
		x.CurrentEpoch = d.u64("current epoch")
		x.FetchOffset = d.u64("fetch offset")
		x.LastFetchedEpoch = d.u64("last fetched epoch")
		x.MaxBytes = d.u32("max bytes")
		x.MaxWaitMs = d.u32("max wait")
		m.Body = x
	case KindFetchResponse:
		x := &FetchResponse{}
		x.FetchID = d.u64("fetch id")
		x.LeaderID = d.string("leader id")
		x.Epoch = d.u64("epoch")
		x.Error = FetchError(d.u8("error"))
		x.DivergingEpoch = d.u64("diverging epoch")
		x.DivergingEndOffset = d.u64("diverging end offset")
		x.HighWatermark = d.u64("high watermark")
		x.LogStartOffset = d.u64("log start offset")
		if cnt := d.count("entries", minEntrySize); cnt > 0 {
			x.Entries = make([]storage.Entry, cnt)
			for i := range x.Entries {
				e := &x.Entries[i]
				e.Offset = d.u64("entry offset")
				e.Epoch = d.u64("entry epoch")
				e.Type = storage.EntryType(d.u8("entry type"))
				e.Data = d.bytes("entry data")
			}
		}
		m.Body = x
	case KindVoteRequest:
		x := &VoteRequest{}
		x.Epoch = d.u64("epoch")
		x.CandidateID = d.string("candidate id")
		x.LastEpoch = d.u64("last epoch")
		x.LEO = d.u64("leo")
		x.PreVote = d.bool("pre-vote")
		x.Round = d.u64("round")
		m.Body = x
	case KindVoteResponse:
		x := &VoteResponse{}
		x.Epoch = d.u64("epoch")
		x.VoterID = d.string("voter id")
		x.Granted = d.bool("granted")
		x.PreVote = d.bool("pre-vote")
		x.RequestEpoch = d.u64("request epoch")
		x.Round = d.u64("round")
		x.LeaderID = d.string("leader id")
		m.Body = x
	case KindBeginEpoch:
		x := &BeginEpoch{}
		x.Epoch = d.u64("epoch")
		x.LeaderID = d.string("leader id")
		m.Body = x
	case KindAppendRequest:
		x := &AppendRequest{}
		x.RequestID = d.u64("request id")
		x.Epoch = d.u64("epoch")
		if cnt := d.count("records", 4); cnt > 0 {
			x.Records = make([][]byte, cnt)
			for i := range x.Records {
				x.Records[i] = d.bytes("record")
			}
		}
		m.Body = x
	case KindAppendResponse:
		x := &AppendResponse{}
		x.RequestID = d.u64("request id")
		x.Error = AppendError(d.u8("error"))
		x.LeaderID = d.string("leader id")
		x.FirstOffset = d.u64("first offset")
		m.Body = x
	default:
		return Message{}, 0, fmt.Errorf("%w: unknown kind %d", ErrBadFrame, uint8(kind))
	}
	if d.err != nil {
		return Message{}, 0, fmt.Errorf("%w: %s: %w", ErrBadFrame, kind, d.err)
	}
	if d.off != len(body) {
		return Message{}, 0, fmt.Errorf("%w: %s: %d trailing bytes", ErrBadFrame, kind, len(body)-d.off)
	}
	return m, int(n), nil
}

// errShort is wrapped by decoder errors for fields running past the frame.
var errShort = errors.New("runs past the end of the frame")

// decoder reads fields from one checksummed frame. After the first error
// every read returns a zero value, so the decode functions read straight
// through and check d.err once.
type decoder struct {
	b   []byte
	off int
	err error
}

func (d *decoder) fail(field string, err error) {
	if d.err == nil {
		d.err = fmt.Errorf("%s (byte %d): %w", field, d.off, err)
	}
}

func (d *decoder) take(field string, n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.b)-d.off {
		d.fail(field, errShort)
		return nil
	}
	s := d.b[d.off : d.off+n : d.off+n]
	d.off += n
	return s
}

func (d *decoder) u8(field string) uint8 {
	if s := d.take(field, 1); s != nil {
		return s[0]
	}
	return 0
}

func (d *decoder) u32(field string) uint32 {
	if s := d.take(field, 4); s != nil {
		return binary.BigEndian.Uint32(s)
	}
	return 0
}

func (d *decoder) u64(field string) uint64 {
	if s := d.take(field, 8); s != nil {
		return binary.BigEndian.Uint64(s)
	}
	return 0
}

func (d *decoder) bool(field string) bool {
	if d.err != nil {
		return false
	}
	switch v := d.u8(field); v {
	case 0:
		return false
	case 1:
		return true
	default:
		d.off--
		d.fail(field, fmt.Errorf("is %d, not a bool", v))
		return false
	}
}

// length reads a uint32 length and checks it against the bytes left.
func (d *decoder) length(field string) int {
	if d.err != nil {
		return 0
	}
	if len(d.b)-d.off < 4 {
		d.fail(field, fmt.Errorf("length %w", errShort))
		return 0
	}
	n := binary.BigEndian.Uint32(d.b[d.off:])
	if left := len(d.b) - d.off - 4; uint64(n) > uint64(left) {
		d.fail(field, fmt.Errorf("length %d %w (%d bytes left)", n, errShort, left))
		return 0
	}
	d.off += 4
	return int(n)
}

func (d *decoder) string(field string) string {
	n := d.length(field)
	if n == 0 {
		return ""
	}
	return string(d.take(field, n))
}

// bytes returns the next length-prefixed byte slice, aliasing the frame;
// nil when empty.
func (d *decoder) bytes(field string) []byte {
	n := d.length(field)
	if n == 0 {
		return nil
	}
	return d.take(field, n)
}

// count reads an element count and checks that the bytes left could hold
// that many elements of at least minSize bytes each, so a forged count
// cannot make the decoder allocate more than the frame justifies.
func (d *decoder) count(field string, minSize int) int {
	if d.err != nil {
		return 0
	}
	if len(d.b)-d.off < 4 {
		d.fail(field, fmt.Errorf("count %w", errShort))
		return 0
	}
	n := binary.BigEndian.Uint32(d.b[d.off:])
	if left := len(d.b) - d.off - 4; uint64(n)*uint64(minSize) > uint64(left) {
		d.fail(field, fmt.Errorf("count %d needs at least %d bytes, %d left", n, uint64(n)*uint64(minSize), left))
		return 0
	}
	d.off += 4
	return int(n)
}

// Reader reads frames from a stream, such as a connection.
type Reader struct {
	r       io.Reader
	maxSize int
	hdr     [headerSize]byte
	scratch []byte
}

// NewReader returns a Reader of frames from r, rejecting frames larger than
// maxSize bytes (0 means DefaultMaxFrameSize). Wrap r in a bufio.Reader if
// it is unbuffered.
func NewReader(r io.Reader, maxSize int) *Reader {
	if maxSize <= 0 {
		maxSize = DefaultMaxFrameSize
	}
	return &Reader{r: r, maxSize: maxSize}
}

// scratchLimit caps the reusable buffer a Reader keeps between frames.
const scratchLimit = 64 << 10

// Read reads and decodes the next frame. It returns io.EOF at a clean end
// of stream (between frames), io.ErrUnexpectedEOF (or the stream's error)
// inside a frame, ErrFrameTooLarge for a length prefix above the limit
// (checked before allocating anything) and ErrBadFrame for a frame that
// does not decode. After an error the stream is out of step: close it.
//
// The returned message is owned by the caller: frames that carry byte
// slices (FetchResponse, AppendRequest) are read into a buffer of their
// own, which the message's slices alias; other frames are read into a
// reused buffer, since their decoded form copies everything it keeps.
func (r *Reader) Read() (Message, error) {
	// The length alone first: an oversized or short frame is rejected
	// without waiting for more bytes.
	if _, err := io.ReadFull(r.r, r.hdr[:lenSize]); err != nil {
		return Message{}, err
	}
	n := uint64(binary.BigEndian.Uint32(r.hdr[:])) + lenSize
	if n > uint64(r.maxSize) {
		return Message{}, fmt.Errorf("%w: frame of %d bytes, limit %d", ErrFrameTooLarge, n, r.maxSize)
	}
	if n < minFrameSize {
		return Message{}, fmt.Errorf("%w: frame of %d bytes is below the minimum %d", ErrBadFrame, n, minFrameSize)
	}
	if _, err := io.ReadFull(r.r, r.hdr[lenSize:]); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return Message{}, err
	}
	var buf []byte
	var err error
	switch Kind(r.hdr[headerSize-1]) {
	case KindFetchResponse, KindAppendRequest:
		buf, err = r.readBody(make([]byte, headerSize, min(n, growStep)), int(n))
	default:
		if uint64(cap(r.scratch)) < n {
			r.scratch = make([]byte, 0, min(n, growStep))
		}
		buf, err = r.readBody(r.scratch[:headerSize], int(n))
		r.scratch = buf[:0]
	}
	if err != nil {
		return Message{}, err
	}
	m, _, err := DecodeFrame(buf, r.maxSize)
	if cap(r.scratch) > scratchLimit {
		r.scratch = nil
	}
	return m, err
}

// growStep bounds how far a frame's buffer runs ahead of the bytes that
// have arrived: a peer that announces a 16 MiB frame and sends 6 bytes pins
// 64 KiB, not 16 MiB.
const growStep = 64 << 10

// readBody copies the header into buf (len(buf) == headerSize) and reads
// the rest of an n-byte frame, growing buf as bytes arrive.
func (r *Reader) readBody(buf []byte, n int) ([]byte, error) {
	copy(buf, r.hdr[:])
	for len(buf) < n {
		if len(buf) == cap(buf) {
			grown := make([]byte, len(buf), min(n, 2*cap(buf)+growStep))
			copy(grown, buf)
			buf = grown
		}
		end := min(n, cap(buf))
		if _, err := io.ReadFull(r.r, buf[len(buf):end]); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		buf = buf[:end]
	}
	return buf, nil
}

// String names the kind ("FetchRequest", ..., or "kind(N)").
func (k Kind) String() string {
	switch k {
	case KindFetchRequest:
		return "FetchRequest"
	case KindFetchResponse:
		return "FetchResponse"
	case KindVoteRequest:
		return "VoteRequest"
	case KindVoteResponse:
		return "VoteResponse"
	case KindBeginEpoch:
		return "BeginEpoch"
	case KindAppendRequest:
		return "AppendRequest"
	case KindAppendResponse:
		return "AppendResponse"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}
