package transport

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// MinSecretSize is the shortest TCPConfig.Secret accepted. A transcript
// of the handshake (nonces and MACs) lets an eavesdropper or an impostor
// guess the secret offline, so it must not be guessable: use 32 random
// bytes.
const MinSecretSize = 16

// authKeyInfo labels the key derived from the secret for the handshake,
// so the same secret can key other things (gossip) under other labels
// without the keys being related.
const authKeyInfo = "replog transport handshake v2"

// deriveAuthKey returns the HMAC key for the handshake.
func deriveAuthKey(secret []byte) []byte {
	k, err := hkdf.Key(sha256.New, secret, nil, authKeyInfo, sha256.Size)
	if err != nil {
		// Only a key length above 255*32 bytes fails.
		panic(err)
	}
	return k
}

// Directions: each side's MAC says whose proof it is, so the acceptor's
// proof can never be played back as a dialer's (reflection).
const (
	dirDialer   = 'D'
	dirAcceptor = 'A'
)

// authTranscript is what both MACs bind.
type authTranscript struct {
	// version is the handshake's (2 or 3); wire (the dialer's range) and
	// chosen (the acceptor's choice, in its MAC only) are bound from
	// version 3 on.
	version    uint8
	wire       versionRange
	chosen     uint8
	lane       uint8
	clusterID  string
	dialerID   string
	acceptorID string
	nonceD     [nonceSize]byte
	nonceA     [nonceSize]byte
}

// authMAC is HMAC-SHA256(key, "replog-auth" 0 version lane cluster dialer
// acceptor nonceD nonceA direction), strings as uint16 length and bytes
// so that no two transcripts encode alike; from version 3 on followed by
// the dialer's wire min and max, and in the acceptor's MAC the wire
// version chosen.
func authMAC(key []byte, t authTranscript, dir byte) [macSize]byte {
	b := make([]byte, 0, 16+3*(2+maxIDLen)+2*nonceSize+3)
	b = append(b, "replog-auth"...)
	b = append(b, 0, t.version, t.lane)
	for _, s := range []string{t.clusterID, t.dialerID, t.acceptorID} {
		b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
		b = append(b, s...)
	}
	b = append(b, t.nonceD[:]...)
	b = append(b, t.nonceA[:]...)
	b = append(b, dir)
	if t.version >= 3 {
		b = append(b, t.wire.min, t.wire.max)
		if dir == dirAcceptor {
			b = append(b, t.chosen)
		}
	}
	m := hmac.New(sha256.New, key)
	m.Write(b)
	var out [macSize]byte
	m.Sum(out[:0])
	return out
}

// hsSide is one end's view of a handshake.
type hsSide struct {
	// key is deriveAuthKey(secret), or nil without a secret: the key this
	// node proves with. nextKey, if set, is a second key it accepts a
	// dialer's proof under (TCPConfig.NextSecret), answering under the
	// key that dialer used.
	key, nextKey []byte
	clusterID    string
	nodeID       string
	lane         uint8
	// version is the handshake version to dial with (0: ProtocolVersion;
	// the acceptor answers in the dialer's).
	version uint8
	// wire is the range of wire versions this node speaks (zero:
	// localWire).
	wire versionRange
	// rand supplies nonces (crypto/rand.Reader; fixed in tests).
	rand io.Reader
}

// defaults fills version and wire.
func (s hsSide) defaults() hsSide {
	if s.version == 0 {
		s.version = ProtocolVersion
	}
	if s.wire == (versionRange{}) {
		s.wire = localWire
	}
	return s
}

func (s hsSide) send(w io.Writer, h handshake) error {
	h.Version = s.version
	h.Lane = s.lane
	_, err := w.Write(appendHandshake(nil, h))
	return err
}

// errOlderHandshake: the acceptor refused our handshake version in an
// older one it speaks (a node of an earlier release): dial again in that
// version.
var errOlderHandshake = errors.New("replog: the peer speaks an older handshake version")

// answerCheck screens an answer to one of the dialer's messages: a
// refusal becomes the dialer's error (errOlderHandshake too when it came
// in version 2 to our version 3); an answer in another version than ours
// is malformed.
func (s hsSide) answerCheck(a handshake) error {
	if err := refusalError(a); err != nil {
		if a.Type == hsRefuseCluster && a.Version < s.version && a.Version == minProtocolVersion {
			return fmt.Errorf("%w: %w (version %d)", err, errOlderHandshake, a.Version)
		}
		return err
	}
	if a.Version != s.version {
		return fmt.Errorf("%w: handshake answer in version %d, we spoke %d", ErrBadFrame, a.Version, s.version)
	}
	return nil
}

// chosenWire checks the acceptor's choice of wire version (version 3) or
// returns the one version 2 implies.
func (s hsSide) chosenWire(a handshake) (uint8, error) {
	if s.version < 3 {
		return legacyWireVersion, nil
	}
	if a.Chosen < s.wire.min || a.Chosen > s.wire.max {
		return 0, fmt.Errorf("%w: the acceptor chose wire version %d, we speak %d..%d", ErrBadFrame, a.Chosen, s.wire.min, s.wire.max)
	}
	return a.Chosen, nil
}

// dialHandshake runs the dialer's side on rw, expecting to reach node
// peer, and returns the wire version negotiated (the one every frame on
// the connection must be encoded in). Errors wrap ErrWrongCluster
// (refused as another cluster or version; also errOlderHandshake when the
// peer refused version 3 in version 2: dial again with version 2),
// ErrUnauthenticated (refused, or the acceptor failed to prove the
// secret), ErrBadFrame, or the connection's error.
func dialHandshake(rw io.ReadWriter, s hsSide, peer string) (uint8, error) {
	s = s.defaults()
	if s.version < 3 && (legacyWireVersion < s.wire.min || legacyWireVersion > s.wire.max) {
		return 0, fmt.Errorf("%w: handshake version %d means wire version %d, this node speaks %d..%d", ErrWrongCluster, s.version, legacyWireVersion, s.wire.min, s.wire.max)
	}
	if s.key == nil {
		if err := s.send(rw, handshake{Type: hsHello, ClusterID: s.clusterID, NodeID: s.nodeID, Wire: s.wire}); err != nil {
			return 0, err
		}
		a, err := readHandshake(rw)
		if err != nil {
			return 0, err
		}
		if err := s.answerCheck(a); err != nil {
			return 0, err
		}
		switch {
		case a.Type == hsChallenge:
			return 0, fmt.Errorf("%w: the peer requires a secret, this node has none", ErrUnauthenticated)
		case a.Type != hsAccept:
			return 0, fmt.Errorf("%w: handshake answer of type %d", ErrBadFrame, a.Type)
		case a.Lane != s.lane:
			return 0, fmt.Errorf("%w: handshake answer for lane %d, want %d", ErrBadFrame, a.Lane, s.lane)
		case a.ClusterID != s.clusterID:
			return 0, fmt.Errorf("%w: peer is in cluster %q, we are in %q", ErrWrongCluster, a.ClusterID, s.clusterID)
		case a.NodeID != peer:
			return 0, fmt.Errorf("replog: dialled %s but reached %s", peer, a.NodeID)
		}
		return s.chosenWire(a)
	}

	t := authTranscript{version: s.version, wire: s.wire, lane: s.lane, clusterID: s.clusterID, dialerID: s.nodeID, acceptorID: peer}
	if _, err := io.ReadFull(s.rand, t.nonceD[:]); err != nil {
		return 0, fmt.Errorf("replog: handshake nonce: %w", err)
	}
	if err := s.send(rw, handshake{Type: hsAuthHello, NodeID: s.nodeID, Nonce: t.nonceD, Wire: s.wire}); err != nil {
		return 0, err
	}
	c, err := readHandshake(rw)
	if err != nil {
		return 0, err
	}
	if err := s.answerCheck(c); err != nil {
		return 0, err
	}
	if c.Type != hsChallenge || c.Lane != s.lane {
		// A plain accept here is an acceptor without the secret.
		return 0, fmt.Errorf("%w: expected a challenge for lane %d, got type %d for lane %d", ErrUnauthenticated, s.lane, c.Type, c.Lane)
	}
	t.nonceA = c.Nonce
	if err := s.send(rw, handshake{Type: hsProof, MAC: authMAC(s.key, t, dirDialer)}); err != nil {
		return 0, err
	}
	a, err := readHandshake(rw)
	if err != nil {
		if errors.Is(err, ErrBadFrame) || errors.Is(err, ErrWrongCluster) {
			return 0, err
		}
		return 0, fmt.Errorf("%w: connection ended after our proof (wrong secret, cluster ID or node?): %w", ErrUnauthenticated, err)
	}
	if err := s.answerCheck(a); err != nil {
		return 0, err
	}
	if a.Type != hsAuthAccept || a.Lane != s.lane {
		return 0, fmt.Errorf("%w: expected the acceptor's proof, got type %d for lane %d", ErrUnauthenticated, a.Type, a.Lane)
	}
	t.chosen = a.Chosen
	if want := authMAC(s.key, t, dirAcceptor); !hmac.Equal(a.MAC[:], want[:]) {
		return 0, fmt.Errorf("%w: the peer's proof is wrong (it does not hold the secret, or is not %s of this cluster)", ErrUnauthenticated, peer)
	}
	return s.chosenWire(a)
}

// refusalError maps a refusal to the dialer's error; nil for any other
// message.
func refusalError(h handshake) error {
	switch h.Type {
	case hsRefuseCluster:
		return fmt.Errorf("%w: refused (another cluster ID or protocol version)", ErrWrongCluster)
	case hsRefuse:
		return fmt.Errorf("%w: refused (wrong or missing secret, wrong cluster ID, wrong node, or node ID not allowed)", ErrUnauthenticated)
	}
	return nil
}

// acceptHandshake runs the acceptor's side on rw and returns the hello
// (or authHello) of an accepted peer, with Chosen set to the wire version
// negotiated (the highest both speak; the one a version-2 hello implies).
// It answers in the dialer's handshake version. Before accepting, once
// the peer has proven the secret (without one: named this cluster), it
// checks the node ID, the wire versions and calls check, if set. It
// answers every refusable failure with a bare refusal and returns why:
// errors wrap ErrBadFrame (malformed: no answer), ErrWrongCluster
// (another cluster, handshake version or no common wire version),
// ErrUnauthenticated, ErrPeerNotVerified (check refused), or the
// connection's error.
func acceptHandshake(rw io.ReadWriter, s hsSide, check func(nodeID string) error) (handshake, error) {
	s = s.defaults()
	h, err := readHandshake(rw)
	refuse := func(typ uint8) {
		lane := s.lane
		if h.Lane == laneData {
			lane = laneData
		}
		v := uint8(ProtocolVersion)
		if h.Version >= minProtocolVersion && h.Version <= ProtocolVersion {
			v = h.Version
		}
		_, _ = rw.Write(appendHandshake(nil, handshake{Version: v, Type: typ, Lane: lane}))
	}
	if err != nil {
		if errors.Is(err, ErrWrongCluster) {
			refuse(hsRefuseCluster)
		}
		return h, err
	}
	s.lane = h.Lane
	s.version = h.Version
	peerWire := h.Wire
	if h.Version < 3 {
		peerWire = versionRange{legacyWireVersion, legacyWireVersion}
	}
	chosen, common := negotiate(s.wire, peerWire)
	noCommon := func() error {
		return fmt.Errorf("%w: peer %q speaks wire versions %d..%d, this node %d..%d", ErrWrongCluster, h.NodeID, peerWire.min, peerWire.max, s.wire.min, s.wire.max)
	}
	admit := func() error {
		switch {
		case h.NodeID == "" || h.NodeID == s.nodeID:
			return fmt.Errorf("%w: peer announced node ID %q", ErrPeerNotVerified, h.NodeID)
		case check != nil:
			if err := check(h.NodeID); err != nil {
				return fmt.Errorf("%w: peer %q: %w", ErrPeerNotVerified, h.NodeID, err)
			}
		}
		return nil
	}

	if s.key == nil {
		switch {
		case h.Type == hsAuthHello:
			refuse(hsRefuse)
			return h, fmt.Errorf("%w: peer %q offers a secret, this node has none", ErrUnauthenticated, h.NodeID)
		case h.Type != hsHello:
			return h, fmt.Errorf("%w: handshake of type %d, want hello", ErrBadFrame, h.Type)
		case h.ClusterID != s.clusterID:
			refuse(hsRefuseCluster)
			return h, fmt.Errorf("%w: peer %q is in cluster %q, we are in %q", ErrWrongCluster, h.NodeID, h.ClusterID, s.clusterID)
		}
		if err := admit(); err != nil {
			refuse(hsRefuse)
			return h, err
		}
		if !common {
			refuse(hsRefuseCluster)
			return h, noCommon()
		}
		h.Chosen = chosen
		return h, s.send(rw, handshake{Type: hsAccept, ClusterID: s.clusterID, NodeID: s.nodeID, Chosen: chosen})
	}

	switch h.Type {
	case hsAuthHello:
	case hsHello:
		refuse(hsRefuse)
		return h, fmt.Errorf("%w: peer %q sent a plain hello, this node requires the secret", ErrUnauthenticated, h.NodeID)
	default:
		return h, fmt.Errorf("%w: handshake of type %d, want authHello", ErrBadFrame, h.Type)
	}
	t := authTranscript{version: h.Version, wire: h.Wire, lane: h.Lane, clusterID: s.clusterID, dialerID: h.NodeID, acceptorID: s.nodeID, nonceD: h.Nonce}
	if _, err := io.ReadFull(s.rand, t.nonceA[:]); err != nil {
		return h, fmt.Errorf("replog: handshake nonce: %w", err)
	}
	if err := s.send(rw, handshake{Type: hsChallenge, Nonce: t.nonceA}); err != nil {
		return h, err
	}
	p, err := readHandshake(rw)
	if err != nil {
		if errors.Is(err, ErrWrongCluster) || errors.Is(err, ErrBadFrame) {
			refuse(hsRefuse)
		}
		return h, err
	}
	if p.Type != hsProof || p.Lane != h.Lane {
		refuse(hsRefuse)
		return h, fmt.Errorf("%w: handshake of type %d for lane %d, want proof for lane %d", ErrBadFrame, p.Type, p.Lane, h.Lane)
	}
	// The dialer proves with its current secret; during a rotation that is
	// either of ours (see TCPConfig.NextSecret), and we answer under the
	// one it used, the only one it checks.
	var key []byte
	for _, k := range [][]byte{s.key, s.nextKey} {
		if want := authMAC(k, t, dirDialer); k != nil && hmac.Equal(p.MAC[:], want[:]) {
			key = k
			break
		}
	}
	if key == nil {
		refuse(hsRefuse)
		return h, fmt.Errorf("%w: peer claiming %q failed the proof (wrong secret or cluster ID, or it meant another node)", ErrUnauthenticated, h.NodeID)
	}
	if err := admit(); err != nil {
		refuse(hsRefuse)
		return h, err
	}
	if !common {
		refuse(hsRefuseCluster)
		return h, noCommon()
	}
	h.Chosen, t.chosen = chosen, chosen
	return h, s.send(rw, handshake{Type: hsAuthAccept, MAC: authMAC(key, t, dirAcceptor), Chosen: chosen})
}
