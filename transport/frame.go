package transport

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"math"

	"github.com/replog-io/replog/protocol"
)

// Wire format of one frame (all integers big-endian):
//
//	length   uint32  bytes after this field (message + crc)
//	message  protocol.AppendMessage's encoding: version, kind, from, to, body
//	crc      uint32  CRC-32C (Castagnoli) of every byte before it, length included
//
// The message's version and kind bytes follow the length, so a reader
// learns the kind from the first headerSize bytes (see Reader).

// DefaultMaxFrameSize is the frame size limit used when none is given.
const DefaultMaxFrameSize = 16 << 20

const (
	lenSize      = 4
	crcSize      = 4
	headerSize   = lenSize + protocol.HeaderSize // length, version, kind
	minFrameSize = lenSize + protocol.MinSize + crcSize
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// EncodedSize returns the size in bytes of m's frame (length prefix and
// checksum included), or -1 if m has no (or a nil) body.
func EncodedSize(m protocol.Message) int {
	return EncodedSizeAt(m, protocol.Version)
}

// EncodedSizeAt is EncodedSize with the message in wire version v
// (protocol.EncodedSizeAt): what AppendFrameAt appends for v.
func EncodedSizeAt(m protocol.Message, v uint8) int {
	n := protocol.EncodedSizeAt(m, v)
	if n < 0 {
		return -1
	}
	return lenSize + n + crcSize
}

// AppendFrame appends the frame carrying m to dst and returns the extended
// slice. It grows dst at most once (the size is computed first) and makes
// no other allocation, so a writer that reuses dst encodes without
// allocating. It fails only for a message without a body (ErrBadFrame) or a
// frame above 4 GiB (ErrFrameTooLarge); callers enforce their own, smaller
// limit with EncodedSize before encoding.
func AppendFrame(dst []byte, m protocol.Message) ([]byte, error) {
	return AppendFrameAt(dst, m, protocol.Version)
}

// AppendFrameAt is AppendFrame with the message encoded in wire version v
// (protocol.AppendMessageAt): what a connection negotiated in its
// handshake. A version this node does not speak is refused (ErrBadFrame
// wrapping protocol.ErrVersion), and so is a message of a named log below
// protocol.LogNameVersion (ErrBadFrame wrapping protocol.ErrLogNameVersion)
// or one whose Log is not a valid name (protocol.ErrInvalidLogName); dst
// is then unchanged.
func AppendFrameAt(dst []byte, m protocol.Message, v uint8) ([]byte, error) {
	if v < protocol.MinVersion || v > protocol.Version {
		return dst, fmt.Errorf("%w: %w: %d", ErrBadFrame, protocol.ErrVersion, v)
	}
	size := EncodedSizeAt(m, v)
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
	dst = binary.BigEndian.AppendUint32(dst, uint32(size-lenSize))
	dst, err := protocol.AppendMessageAt(dst, m, v)
	if err != nil { // a Log that v cannot carry, or an invalid one
		return dst[:start], fmt.Errorf("%w: %w", ErrBadFrame, err)
	}
	return binary.BigEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli)), nil
}

// DecodeFrame decodes the frame at the start of b and returns the message
// and the number of bytes it took. b must hold the whole frame; a shorter b
// is a truncated frame (ErrBadFrame). A frame larger than maxSize (0 means
// DefaultMaxFrameSize) returns ErrFrameTooLarge before anything else is
// read; every other problem returns an error wrapping ErrBadFrame that says
// what was wrong (a message that does not decode also wraps
// protocol.ErrMalformed).
//
// The message is decoded by protocol.DecodeMessage: entry Data and
// AppendRequest Records of the result alias b, so the caller must not
// modify b while it uses the message; it never panics.
func DecodeFrame(b []byte, maxSize int) (protocol.Message, int, error) {
	if maxSize <= 0 {
		maxSize = DefaultMaxFrameSize
	}
	if len(b) < lenSize {
		return protocol.Message{}, 0, fmt.Errorf("%w: truncated length prefix (%d bytes)", ErrBadFrame, len(b))
	}
	n := uint64(binary.BigEndian.Uint32(b)) + lenSize
	if n > uint64(maxSize) {
		return protocol.Message{}, 0, fmt.Errorf("%w: frame of %d bytes, limit %d", ErrFrameTooLarge, n, maxSize)
	}
	if n < minFrameSize {
		return protocol.Message{}, 0, fmt.Errorf("%w: frame of %d bytes is below the minimum %d", ErrBadFrame, n, minFrameSize)
	}
	if uint64(len(b)) < n {
		return protocol.Message{}, 0, fmt.Errorf("%w: truncated frame: %d of %d bytes", ErrBadFrame, len(b), n)
	}
	f := b[:n]
	sealed := f[:n-crcSize]
	want := binary.BigEndian.Uint32(f[n-crcSize:])
	if got := crc32.Checksum(sealed, castagnoli); got != want {
		return protocol.Message{}, 0, fmt.Errorf("%w: checksum %08x, frame says %08x", ErrBadFrame, got, want)
	}
	m, err := protocol.DecodeMessage(sealed[lenSize:])
	if err != nil {
		return protocol.Message{}, 0, fmt.Errorf("%w: %w", ErrBadFrame, err)
	}
	return m, int(n), nil
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
// does not decode. After an error the stream is out of step: close it;
// but for a frame that wraps protocol.ErrUnknownMessage (a kind or wire
// version of a newer peer), which was read whole, so the caller may skip
// it and read on.
//
// The returned message is owned by the caller: frames that carry byte
// slices (FetchResponse, AppendRequest) are read into a buffer of their
// own, which the message's slices alias; other frames are read into a
// reused buffer, since their decoded form copies everything it keeps.
func (r *Reader) Read() (protocol.Message, error) {
	// The length alone first: an oversized or short frame is rejected
	// without waiting for more bytes.
	if _, err := io.ReadFull(r.r, r.hdr[:lenSize]); err != nil {
		return protocol.Message{}, err
	}
	n := uint64(binary.BigEndian.Uint32(r.hdr[:])) + lenSize
	if n > uint64(r.maxSize) {
		return protocol.Message{}, fmt.Errorf("%w: frame of %d bytes, limit %d", ErrFrameTooLarge, n, r.maxSize)
	}
	if n < minFrameSize {
		return protocol.Message{}, fmt.Errorf("%w: frame of %d bytes is below the minimum %d", ErrBadFrame, n, minFrameSize)
	}
	if _, err := io.ReadFull(r.r, r.hdr[lenSize:]); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return protocol.Message{}, err
	}
	var buf []byte
	var err error
	if protocol.KindOf(r.hdr[lenSize:]).AliasesInput() {
		buf, err = r.readBody(make([]byte, headerSize, min(n, growStep)), int(n))
	} else {
		if uint64(cap(r.scratch)) < n {
			r.scratch = make([]byte, 0, min(n, growStep))
		}
		buf, err = r.readBody(r.scratch[:headerSize], int(n))
		r.scratch = buf[:0]
	}
	if err != nil {
		return protocol.Message{}, err
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
