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
	lane       uint8
	clusterID  string
	dialerID   string
	acceptorID string
	nonceD     [nonceSize]byte
	nonceA     [nonceSize]byte
}

// authMAC is HMAC-SHA256(key, "replog-auth" 0 version lane cluster dialer
// acceptor nonceD nonceA direction), strings as uint16 length and bytes
// so that no two transcripts encode alike.
func authMAC(key []byte, t authTranscript, dir byte) [macSize]byte {
	b := make([]byte, 0, 16+3*(2+maxIDLen)+2*nonceSize)
	b = append(b, "replog-auth"...)
	b = append(b, 0, ProtocolVersion, t.lane)
	for _, s := range []string{t.clusterID, t.dialerID, t.acceptorID} {
		b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
		b = append(b, s...)
	}
	b = append(b, t.nonceD[:]...)
	b = append(b, t.nonceA[:]...)
	b = append(b, dir)
	m := hmac.New(sha256.New, key)
	m.Write(b)
	var out [macSize]byte
	m.Sum(out[:0])
	return out
}

// hsSide is one end's view of a handshake.
type hsSide struct {
	// key is deriveAuthKey(secret), or nil without a secret.
	key       []byte
	clusterID string
	nodeID    string
	lane      uint8
	// rand supplies nonces (crypto/rand.Reader; fixed in tests).
	rand io.Reader
}

func (s hsSide) send(w io.Writer, h handshake) error {
	h.Version = ProtocolVersion
	h.Lane = s.lane
	_, err := w.Write(appendHandshake(nil, h))
	return err
}

// dialHandshake runs the dialer's side on rw, expecting to reach node
// peer. Errors wrap ErrWrongCluster (refused as another cluster or
// version), ErrUnauthenticated (refused, or the acceptor failed to prove
// the secret), ErrBadFrame, or the connection's error.
func dialHandshake(rw io.ReadWriter, s hsSide, peer string) error {
	if s.key == nil {
		if err := s.send(rw, handshake{Type: hsHello, ClusterID: s.clusterID, NodeID: s.nodeID}); err != nil {
			return err
		}
		a, err := readHandshake(rw)
		if err != nil {
			return err
		}
		if err := refusalError(a); err != nil {
			return err
		}
		switch {
		case a.Type == hsChallenge:
			return fmt.Errorf("%w: the peer requires a secret, this node has none", ErrUnauthenticated)
		case a.Type != hsAccept:
			return fmt.Errorf("%w: handshake answer of type %d", ErrBadFrame, a.Type)
		case a.Lane != s.lane:
			return fmt.Errorf("%w: handshake answer for lane %d, want %d", ErrBadFrame, a.Lane, s.lane)
		case a.ClusterID != s.clusterID:
			return fmt.Errorf("%w: peer is in cluster %q, we are in %q", ErrWrongCluster, a.ClusterID, s.clusterID)
		case a.NodeID != peer:
			return fmt.Errorf("replog: dialled %s but reached %s", peer, a.NodeID)
		}
		return nil
	}

	t := authTranscript{lane: s.lane, clusterID: s.clusterID, dialerID: s.nodeID, acceptorID: peer}
	if _, err := io.ReadFull(s.rand, t.nonceD[:]); err != nil {
		return fmt.Errorf("replog: handshake nonce: %w", err)
	}
	if err := s.send(rw, handshake{Type: hsAuthHello, NodeID: s.nodeID, Nonce: t.nonceD}); err != nil {
		return err
	}
	c, err := readHandshake(rw)
	if err != nil {
		return err
	}
	if err := refusalError(c); err != nil {
		return err
	}
	if c.Type != hsChallenge || c.Lane != s.lane {
		// A plain accept here is an acceptor without the secret.
		return fmt.Errorf("%w: expected a challenge for lane %d, got type %d for lane %d", ErrUnauthenticated, s.lane, c.Type, c.Lane)
	}
	t.nonceA = c.Nonce
	if err := s.send(rw, handshake{Type: hsProof, MAC: authMAC(s.key, t, dirDialer)}); err != nil {
		return err
	}
	a, err := readHandshake(rw)
	if err != nil {
		if errors.Is(err, ErrBadFrame) || errors.Is(err, ErrWrongCluster) {
			return err
		}
		return fmt.Errorf("%w: connection ended after our proof (wrong secret, cluster ID or node?): %w", ErrUnauthenticated, err)
	}
	if err := refusalError(a); err != nil {
		return err
	}
	if a.Type != hsAuthAccept || a.Lane != s.lane {
		return fmt.Errorf("%w: expected the acceptor's proof, got type %d for lane %d", ErrUnauthenticated, a.Type, a.Lane)
	}
	if want := authMAC(s.key, t, dirAcceptor); !hmac.Equal(a.MAC[:], want[:]) {
		return fmt.Errorf("%w: the peer's proof is wrong (it does not hold the secret, or is not %s of this cluster)", ErrUnauthenticated, peer)
	}
	return nil
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
// (or authHello) of an accepted peer. Before accepting, once the peer has
// proven the secret (without one: named this cluster), it checks the node
// ID and calls check, if set. It answers every refusable failure with a
// bare refusal and returns why: errors wrap ErrBadFrame (malformed: no
// answer), ErrWrongCluster, ErrUnauthenticated, ErrPeerNotVerified (check
// refused), or the connection's error.
func acceptHandshake(rw io.ReadWriter, s hsSide, check func(nodeID string) error) (handshake, error) {
	h, err := readHandshake(rw)
	refuse := func(typ uint8) {
		lane := s.lane
		if h.Lane == laneData {
			lane = laneData
		}
		_, _ = rw.Write(appendHandshake(nil, handshake{Version: ProtocolVersion, Type: typ, Lane: lane}))
	}
	if err != nil {
		if errors.Is(err, ErrWrongCluster) {
			refuse(hsRefuseCluster)
		}
		return h, err
	}
	s.lane = h.Lane
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
		return h, s.send(rw, handshake{Type: hsAccept, ClusterID: s.clusterID, NodeID: s.nodeID})
	}

	switch h.Type {
	case hsAuthHello:
	case hsHello:
		refuse(hsRefuse)
		return h, fmt.Errorf("%w: peer %q sent a plain hello, this node requires the secret", ErrUnauthenticated, h.NodeID)
	default:
		return h, fmt.Errorf("%w: handshake of type %d, want authHello", ErrBadFrame, h.Type)
	}
	t := authTranscript{lane: h.Lane, clusterID: s.clusterID, dialerID: h.NodeID, acceptorID: s.nodeID, nonceD: h.Nonce}
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
	if want := authMAC(s.key, t, dirDialer); !hmac.Equal(p.MAC[:], want[:]) {
		refuse(hsRefuse)
		return h, fmt.Errorf("%w: peer claiming %q failed the proof (wrong secret or cluster ID, or it meant another node)", ErrUnauthenticated, h.NodeID)
	}
	if err := admit(); err != nil {
		refuse(hsRefuse)
		return h, err
	}
	return h, s.send(rw, handshake{Type: hsAuthAccept, MAC: authMAC(s.key, t, dirAcceptor)})
}
