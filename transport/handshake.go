package transport

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/replog-io/replog/protocol"
)

// The handshake opens every TCP connection (inside TLS when TLS is on).
// Every handshake message has the same envelope (big-endian):
//
//	magic    [4]byte "RPLG"
//	version  uint8   ProtocolVersion
//	type     uint8   one of the hs* types below
//	lane     uint8   laneControl or laneData (echoed in every answer)
//	bodyLen  uint16  at most maxHandshakeBody
//	body     depends on type (a string is a uint16 length and bytes)
//	crc      uint32  CRC-32C of every byte before it
//
// Bodies by type:
//
//	hello          cluster ID, node ID (the dialer's), [v3] wire min, max
//	accept         cluster ID, node ID (the acceptor's), [v3] wire chosen
//	refuseCluster  empty: another cluster ID, or another version
//	refuse         empty: anything else
//	authHello      node ID (the dialer's), nonce [32]byte, [v3] wire min, max
//	challenge      nonce [32]byte
//	proof          mac [32]byte
//	authAccept     mac [32]byte, [v3] wire chosen
//
// Without a secret (TCPConfig.Secret empty: insecure mode, or mutual TLS
// doing the authentication) the dialer sends hello and the acceptor
// answers accept or a refusal. With a secret both sides prove knowledge of
// it (see auth.go):
//
//	dialer   -> authHello(node ID, nonceD)
//	acceptor -> challenge(nonceA)            or refuse
//	dialer   -> proof(MAC("dialer"))
//	acceptor -> authAccept(MAC("acceptor"))  or refuse
//
// where each MAC is HMAC-SHA256, keyed by a key derived from the secret,
// over the version, the lane, the cluster ID, both node IDs, both nonces
// and the direction. The cluster ID is never sent; the acceptor sends
// nothing but a fresh nonce before the dialer's proof has checked out.
// A node with a secret accepts nothing else, as dialer or acceptor, so
// there is no downgrade.
//
// What the exchange does not hide or prevent: the dialer's node ID
// travels in the clear (the acceptor needs it to check the proof), so an
// impostor at a peer's address learns which node dialled it, and a
// recorded transcript allows offline guessing of a weak secret (hence
// MinSecretSize). It authenticates the ends of a connection, not the
// bytes after the handshake: an attacker on the network path could relay
// a genuine handshake and inject frames afterwards. TLS (as well as the
// secret) closes that gap.
//
// Refusals carry no body in any mode: they tell a stranger nothing about
// the cluster (no cluster ID, no node ID, no reason). The acceptor logs
// the reason; the dialer reports refuseCluster as ErrWrongCluster and
// refuse as ErrUnauthenticated. The acceptor closes after a refusal.
//
// After the handshake the connection carries frames (codec.go) from the
// dialer to the acceptor only, and keepalives: a length word of zero
// (no frame is that short), which the dialer writes on an otherwise idle
// connection so the acceptor's idle deadline never cuts a healthy peer.
//
// The first five bytes never change between versions, so a node can tell a
// version mismatch from garbage and answer it with a refusal (in its own
// version, which the dialer reports).
//
// Version 2 made refusals bare, added the authenticated exchange and
// keepalives; version 1 nodes and version 2 nodes refuse each other as
// being of another version.
//
// Version 3 (this one) negotiates the wire version (protocol.Version, the
// first byte of every frame) per connection: hello and authHello end with
// the dialer's range of wire versions (min uint8, max uint8), accept and
// authAccept with the one chosen (uint8): the highest both speak. Both
// MACs bind the dialer's range, the acceptor's also the choice, so a
// party on the path cannot alter either. A version-2 peer checks the
// version byte strictly and ignores nothing, so there is no room in a
// version-2 message for a range; a version-3 node speaks version 2 too:
//
//   - as acceptor, it answers a version-2 hello in version 2, exactly as
//     a version-2 node would, and the wire version is 6 (all a version-2
//     node speaks);
//   - as dialer, it sends version 3 first; a version-2 node refuses it as
//     another version, in version 2 (refuseCluster), and the dialer then
//     dials again at once and speaks version 2. So the first connection to
//     an older node costs one refused connection (logged on the old node
//     as "wrong cluster or version"); every later format change can roll
//     the same way, since a refusal says the refuser's version.
//
// What the fallback does not prevent: a party on the path can forge the
// version-2 refusal and so hold two version-3 nodes at version 2 (wire
// version 6). That is harmless while every wire version it could force is
// one this node is willing to speak; a version with a security property
// the older ones lack would have to raise the range's minimum.

// ProtocolVersion is the handshake protocol version this node dials with.
// It also accepts minProtocolVersion; peers with any other version are
// refused with ErrWrongCluster.
const ProtocolVersion = 3

// minProtocolVersion is the oldest handshake version this node speaks:
// version 2, which carries no wire range and means wire version
// legacyWireVersion.
const minProtocolVersion = 2

// legacyWireVersion is the wire version a version-2 handshake implies.
const legacyWireVersion = 6

// versionRange is a range of wire versions (protocol.Version values) a
// node speaks, min and max included.
type versionRange struct{ min, max uint8 }

// localWire is the range of wire versions this build speaks.
var localWire = versionRange{protocol.MinVersion, protocol.Version}

// valid reports whether r is not empty.
func (r versionRange) valid() bool { return r.min <= r.max }

// negotiate returns the highest wire version both a and b speak, or false
// if they share none (or either range is empty).
func negotiate(a, b versionRange) (uint8, bool) {
	if !a.valid() || !b.valid() {
		return 0, false
	}
	lo, hi := max(a.min, b.min), min(a.max, b.max)
	if lo > hi {
		return 0, false
	}
	return hi, true
}

var handshakeMagic = [4]byte{'R', 'P', 'L', 'G'}

// Handshake message types.
const (
	hsHello         = 1
	hsAccept        = 2
	hsRefuseCluster = 3
	hsRefuse        = 4
	hsAuthHello     = 5
	hsChallenge     = 6
	hsProof         = 7
	hsAuthAccept    = 8
)

// Lanes: a peer pair uses two connections, one for fetch traffic, one for
// everything else, so a large fetch response never queues a vote behind it.
const (
	laneControl = 0
	laneData    = 1
)

const (
	hsFixedSize = 4 + 1 + 1 + 1 + 2
	// maxHandshakeBody: a hello's two IDs and its range (version 3).
	maxHandshakeBody = 2*(2+maxIDLen) + 2
	// maxIDLen bounds node and cluster IDs.
	maxIDLen = 255
	// nonceSize and macSize: 256-bit nonces and HMAC-SHA256 tags.
	nonceSize = 32
	macSize   = 32
)

// handshake is one handshake message. Which fields travel depends on Type
// (see the layout above); the others must be zero to encode.
type handshake struct {
	Version   uint8
	Type      uint8
	Lane      uint8
	ClusterID string
	NodeID    string
	Nonce     [nonceSize]byte
	MAC       [macSize]byte
	// Wire is the dialer's range of wire versions (hello, authHello) and
	// Chosen the acceptor's choice (accept, authAccept): version 3 only.
	Wire   versionRange
	Chosen uint8
}

func appendHandshake(dst []byte, h handshake) []byte {
	start := len(dst)
	dst = append(dst, handshakeMagic[:]...)
	dst = append(dst, h.Version, h.Type, h.Lane)
	lenAt := len(dst)
	dst = append(dst, 0, 0)
	v3 := h.Version >= 3
	switch h.Type {
	case hsHello, hsAccept:
		dst = appendHSString(dst, h.ClusterID)
		dst = appendHSString(dst, h.NodeID)
	case hsAuthHello:
		dst = appendHSString(dst, h.NodeID)
		dst = append(dst, h.Nonce[:]...)
	case hsChallenge:
		dst = append(dst, h.Nonce[:]...)
	case hsProof, hsAuthAccept:
		dst = append(dst, h.MAC[:]...)
	}
	if v3 {
		switch h.Type {
		case hsHello, hsAuthHello:
			dst = append(dst, h.Wire.min, h.Wire.max)
		case hsAccept, hsAuthAccept:
			dst = append(dst, h.Chosen)
		}
	}
	binary.BigEndian.PutUint16(dst[lenAt:], uint16(len(dst)-lenAt-2))
	return binary.BigEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

func appendHSString(dst []byte, s string) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(s)))
	return append(dst, s...)
}

// checkHandshakeFields validates what appendHandshake will encode.
func checkHandshakeFields(h handshake) error {
	for _, f := range []struct{ name, v string }{{"cluster ID", h.ClusterID}, {"node ID", h.NodeID}} {
		if len(f.v) > maxIDLen {
			return fmt.Errorf("replog: %s is %d bytes, limit %d", f.name, len(f.v), maxIDLen)
		}
	}
	return nil
}

// parseHandshakeHeader returns the total size announced by a fixed header,
// or an error wrapping ErrBadFrame (bad magic, or a body above the limit)
// or ErrWrongCluster (another protocol version; the header is still
// returned in h so the acceptor can answer).
func parseHandshakeHeader(b []byte) (h handshake, size int, err error) {
	if len(b) < hsFixedSize {
		return h, 0, fmt.Errorf("%w: truncated handshake (%d bytes)", ErrBadFrame, len(b))
	}
	if [4]byte(b[:4]) != handshakeMagic {
		return h, 0, fmt.Errorf("%w: bad handshake magic %q", ErrBadFrame, b[:4])
	}
	h.Version, h.Type, h.Lane = b[4], b[5], b[6]
	if h.Version < minProtocolVersion || h.Version > ProtocolVersion {
		return h, 0, fmt.Errorf("%w: protocol version %d, want %d..%d", ErrWrongCluster, h.Version, minProtocolVersion, ProtocolVersion)
	}
	body := int(binary.BigEndian.Uint16(b[7:]))
	if body > maxHandshakeBody {
		return h, 0, fmt.Errorf("%w: handshake body of %d bytes, limit %d", ErrBadFrame, body, maxHandshakeBody)
	}
	return h, hsFixedSize + body + crcSize, nil
}

// decodeHandshake decodes one whole handshake message. Errors wrap
// ErrBadFrame, or ErrWrongCluster for another protocol version. The
// encoding is canonical: what decodes re-encodes to the same bytes.
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
	if h.Lane != laneControl && h.Lane != laneData {
		return h, fmt.Errorf("%w: unknown lane %d", ErrBadFrame, h.Lane)
	}
	d := hsDecoder{b: b[hsFixedSize : size-crcSize]}
	switch h.Type {
	case hsHello, hsAccept:
		h.ClusterID = d.string("cluster ID")
		h.NodeID = d.string("node ID")
	case hsRefuseCluster, hsRefuse:
	case hsAuthHello:
		h.NodeID = d.string("node ID")
		d.fixed("nonce", h.Nonce[:])
	case hsChallenge:
		d.fixed("nonce", h.Nonce[:])
	case hsProof, hsAuthAccept:
		d.fixed("mac", h.MAC[:])
	default:
		return h, fmt.Errorf("%w: unknown handshake type %d", ErrBadFrame, h.Type)
	}
	if h.Version >= 3 {
		switch h.Type {
		case hsHello, hsAuthHello:
			h.Wire.min = d.u8("wire min")
			h.Wire.max = d.u8("wire max")
		case hsAccept, hsAuthAccept:
			h.Chosen = d.u8("wire version")
		}
	}
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%w: handshake: %d trailing bytes", ErrBadFrame, len(d.b))
	}
	return h, d.err
}

// hsDecoder reads handshake body fields, remembering the first error.
type hsDecoder struct {
	b   []byte
	err error
}

func (d *hsDecoder) string(field string) string {
	if d.err != nil {
		return ""
	}
	if len(d.b) < 2 {
		d.err = fmt.Errorf("%w: handshake %s: truncated length", ErrBadFrame, field)
		return ""
	}
	n := int(binary.BigEndian.Uint16(d.b))
	if n > len(d.b)-2 || n > maxIDLen {
		d.err = fmt.Errorf("%w: handshake %s: length %d, %d bytes left", ErrBadFrame, field, n, len(d.b)-2)
		return ""
	}
	s := string(d.b[2 : 2+n])
	d.b = d.b[2+n:]
	return s
}

func (d *hsDecoder) u8(field string) uint8 {
	var b [1]byte
	d.fixed(field, b[:])
	return b[0]
}

func (d *hsDecoder) fixed(field string, dst []byte) {
	if d.err != nil {
		return
	}
	if len(d.b) < len(dst) {
		d.err = fmt.Errorf("%w: handshake %s: %d bytes, want %d", ErrBadFrame, field, len(d.b), len(dst))
		return
	}
	copy(dst, d.b)
	d.b = d.b[len(dst):]
}

// readHandshake reads one handshake message from r. It reads at most
// hsFixedSize+maxHandshakeBody+crcSize bytes, whatever the peer sends, and
// never more than the message (r need not be buffered).
// errEmptyConn: the connection ended before its first byte (a hang-up
// probe or a port check, not a failed handshake).
var errEmptyConn = fmt.Errorf("connection closed before its first byte: %w", io.EOF)

func readHandshake(r io.Reader) (handshake, error) {
	var buf [hsFixedSize + maxHandshakeBody + crcSize]byte
	if _, err := io.ReadFull(r, buf[:hsFixedSize]); err != nil {
		if errors.Is(err, io.EOF) {
			return handshake{}, fmt.Errorf("reading handshake: %w", errEmptyConn)
		}
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
