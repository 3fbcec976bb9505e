package transport

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
)

// The handshake opens every TCP connection. The dialer sends a hello, the
// acceptor answers with an accept or a refusal and closes on a refusal.
// After an accept the connection carries frames from the dialer to the
// acceptor only. Layout (big-endian):
//
//	magic    [4]byte "RPLG"
//	version  uint8   ProtocolVersion
//	type     uint8   hsHello, hsAccept, hsRefuseCluster or hsRefuse
//	lane     uint8   laneControl or laneData (echoed in the answer)
//	bodyLen  uint16  at most maxHandshakeBody
//	body     cluster ID, node ID, reason: each a uint16 length and bytes
//	crc      uint32  CRC-32C of every byte before it
//
// The first five bytes never change between versions, so a node can tell a
// version mismatch from garbage and answer it with a refusal.

// ProtocolVersion is the handshake protocol version. Peers with another
// version are refused with ErrWrongCluster.
const ProtocolVersion = 1

var handshakeMagic = [4]byte{'R', 'P', 'L', 'G'}

// Handshake message types. A refusal says whether the peer belongs to
// another cluster (or speaks another version): the dialer reports that as
// ErrWrongCluster.
const (
	hsHello         = 1
	hsAccept        = 2
	hsRefuseCluster = 3
	hsRefuse        = 4
)

// Lanes: a peer pair uses two connections, one for fetch traffic, one for
// everything else, so a large fetch response never queues a vote behind it.
const (
	laneControl = 0
	laneData    = 1
)

const (
	hsFixedSize      = 4 + 1 + 1 + 1 + 2
	maxHandshakeBody = 3 * (2 + maxIDLen)
	// maxIDLen bounds node and cluster IDs (and refusal reasons).
	maxIDLen = 255
)

// handshake is one hello, accept or refusal.
type handshake struct {
	Version   uint8
	Type      uint8
	Lane      uint8
	ClusterID string
	NodeID    string
	Reason    string
}

func appendHandshake(dst []byte, h handshake) []byte {
	start := len(dst)
	dst = append(dst, handshakeMagic[:]...)
	dst = append(dst, h.Version, h.Type, h.Lane)
	body := 6 + len(h.ClusterID) + len(h.NodeID) + len(h.Reason)
	dst = binary.BigEndian.AppendUint16(dst, uint16(body))
	for _, s := range []string{h.ClusterID, h.NodeID, h.Reason} {
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(s)))
		dst = append(dst, s...)
	}
	return binary.BigEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

// checkHandshakeFields validates what appendHandshake will encode.
func checkHandshakeFields(h handshake) error {
	for _, f := range []struct{ name, v string }{{"cluster ID", h.ClusterID}, {"node ID", h.NodeID}, {"reason", h.Reason}} {
		if len(f.v) > maxIDLen {
			return fmt.Errorf("replog: %s is %d bytes, limit %d", f.name, len(f.v), maxIDLen)
		}
	}
	return nil
}

// handshakeSize returns the total size announced by a fixed header, or an
// error wrapping ErrBadFrame (bad magic, or a body above the limit) or
// ErrWrongCluster (another protocol version; the header is still returned
// in h so the acceptor can answer).
func parseHandshakeHeader(b []byte) (h handshake, size int, err error) {
	if len(b) < hsFixedSize {
		return h, 0, fmt.Errorf("%w: truncated handshake (%d bytes)", ErrBadFrame, len(b))
	}
	if [4]byte(b[:4]) != handshakeMagic {
		return h, 0, fmt.Errorf("%w: bad handshake magic %q", ErrBadFrame, b[:4])
	}
	h.Version, h.Type, h.Lane = b[4], b[5], b[6]
	if h.Version != ProtocolVersion {
		return h, 0, fmt.Errorf("%w: protocol version %d, want %d", ErrWrongCluster, h.Version, ProtocolVersion)
	}
	body := int(binary.BigEndian.Uint16(b[7:]))
	if body > maxHandshakeBody {
		return h, 0, fmt.Errorf("%w: handshake body of %d bytes, limit %d", ErrBadFrame, body, maxHandshakeBody)
	}
	return h, hsFixedSize + body + crcSize, nil
}

// decodeHandshake decodes one whole handshake message. Errors wrap
// ErrBadFrame, or ErrWrongCluster for another protocol version.
func decodeHandshake(b []byte) (handshake, error) {
	h, size, err := parseHandshakeHeader(b)
	if err != nil {
		return h, err
	}
	if len(b) != size {
		return h, fmt.Errorf("%w: handshake of %d bytes, header says %d", ErrBadFrame, len(b), size)
	}
	if got, want := crc32.Checksum(b[:size-crcSize], castagnoli), binary.BigEndian.Uint32(b[size-crcSize:]); got != want {
		return h, fmt.Errorf("%w: handshake checksum %08x, message says %08x", ErrBadFrame, got, want)
	}
	switch h.Type {
	case hsHello, hsAccept, hsRefuseCluster, hsRefuse:
	default:
		return h, fmt.Errorf("%w: unknown handshake type %d", ErrBadFrame, h.Type)
	}
	if h.Lane != laneControl && h.Lane != laneData {
		return h, fmt.Errorf("%w: unknown lane %d", ErrBadFrame, h.Lane)
	}
	body := b[hsFixedSize : size-crcSize]
	var fields [3]string
	for i := range fields {
		if len(body) < 2 {
			return h, fmt.Errorf("%w: handshake field %d: truncated length", ErrBadFrame, i)
		}
		n := int(binary.BigEndian.Uint16(body))
		body = body[2:]
		if n > len(body) || n > maxIDLen {
			return h, fmt.Errorf("%w: handshake field %d: length %d, %d bytes left", ErrBadFrame, i, n, len(body))
		}
		fields[i] = string(body[:n])
		body = body[n:]
	}
	if len(body) != 0 {
		return h, fmt.Errorf("%w: handshake: %d trailing bytes", ErrBadFrame, len(body))
	}
	h.ClusterID, h.NodeID, h.Reason = fields[0], fields[1], fields[2]
	return h, nil
}

// readHandshake reads one handshake message from r. It reads at most
// hsFixedSize+maxHandshakeBody+4 bytes, whatever the peer sends.
func readHandshake(r io.Reader) (handshake, error) {
	var buf [hsFixedSize + maxHandshakeBody + crcSize]byte
	if _, err := io.ReadFull(r, buf[:hsFixedSize]); err != nil {
		return handshake{}, fmt.Errorf("reading handshake: %w", err)
	}
	h, size, err := parseHandshakeHeader(buf[:hsFixedSize])
	if err != nil {
		return h, err
	}
	if _, err := io.ReadFull(r, buf[hsFixedSize:size]); err != nil {
		return h, fmt.Errorf("reading handshake: %w", err)
	}
	return decodeHandshake(buf[:size])
}
