package membership

import (
	"encoding/binary"
	"fmt"

	"github.com/hashicorp/memberlist"
)

// metaVersion is the first byte of every encoded nodeMeta. A node refuses
// (ignores) members whose metadata carries another version: the format has
// no optional fields, so a new version means a new decoder.
const metaVersion = 1

// MaxMetaSize is memberlist's limit on a node's metadata (memberlist.MetaMaxSize).
// Metadata above it is refused by this package with ErrMetaTooLarge, at New or
// SetLeader, rather than left to memberlist (which panics on it).
const MaxMetaSize = memberlist.MetaMaxSize

// metaFlagVoter marks a voter. Other flag bits are reserved and must be 0.
const metaFlagVoter = 1 << 0

// nodeMeta is what a node advertises about itself in memberlist's node
// metadata.
//
// Encoding (version 1), all integers unsigned varints:
//
//	version byte (1)
//	flags byte   (bit 0: voter; other bits must be 0)
//	epoch        uvarint (leader epoch this node knows; 0 if none)
//	nodeID       uvarint length + bytes
//	clusterID    uvarint length + bytes
//	rpcAddr      uvarint length + bytes
//	leaderID     uvarint length + bytes ("" if no leader known)
//
// Nothing may follow the last field.
type nodeMeta struct {
	NodeID    string
	ClusterID string
	RPCAddr   string
	Voter     bool
	LeaderID  string
	Epoch     uint64
}

// encode returns m's encoding, or ErrMetaTooLarge if it exceeds MaxMetaSize.
func (m nodeMeta) encode() ([]byte, error) {
	n := 2 + uvarintLen(m.Epoch)
	for _, s := range [...]string{m.NodeID, m.ClusterID, m.RPCAddr, m.LeaderID} {
		n += uvarintLen(uint64(len(s))) + len(s)
	}
	if n > MaxMetaSize {
		return nil, fmt.Errorf("%w: %d bytes, limit %d (shorten NodeID, ClusterID, RPCAddr or the leader ID)",
			ErrMetaTooLarge, n, MaxMetaSize)
	}
	b := make([]byte, 0, n)
	b = append(b, metaVersion)
	var flags byte
	if m.Voter {
		flags |= metaFlagVoter
	}
	b = append(b, flags)
	b = binary.AppendUvarint(b, m.Epoch)
	for _, s := range [...]string{m.NodeID, m.ClusterID, m.RPCAddr, m.LeaderID} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	return b, nil
}

// decodeMeta decodes b. It returns an error wrapping ErrBadMeta for any
// malformed input (never panics) and does not keep a reference to b.
func decodeMeta(b []byte) (nodeMeta, error) {
	var m nodeMeta
	if len(b) > MaxMetaSize {
		return m, fmt.Errorf("%w: %d bytes, limit %d", ErrBadMeta, len(b), MaxMetaSize)
	}
	if len(b) < 2 {
		return m, fmt.Errorf("%w: %d bytes, too short", ErrBadMeta, len(b))
	}
	if b[0] != metaVersion {
		return m, fmt.Errorf("%w: version %d, want %d", ErrBadMeta, b[0], metaVersion)
	}
	if b[1]&^metaFlagVoter != 0 {
		return m, fmt.Errorf("%w: unknown flags %#x", ErrBadMeta, b[1])
	}
	m.Voter = b[1]&metaFlagVoter != 0
	rest := b[2:]
	epoch, n := binary.Uvarint(rest)
	if n <= 0 {
		return nodeMeta{}, fmt.Errorf("%w: bad epoch", ErrBadMeta)
	}
	m.Epoch = epoch
	rest = rest[n:]
	fields := [...]struct {
		name string
		dst  *string
	}{{"node ID", &m.NodeID}, {"cluster ID", &m.ClusterID}, {"RPC address", &m.RPCAddr}, {"leader ID", &m.LeaderID}}
	for _, f := range fields {
		l, n := binary.Uvarint(rest)
		if n <= 0 || l > uint64(len(rest)-n) {
			return nodeMeta{}, fmt.Errorf("%w: bad %s length", ErrBadMeta, f.name)
		}
		rest = rest[n:]
		*f.dst = string(rest[:l])
		rest = rest[l:]
	}
	if len(rest) != 0 {
		return nodeMeta{}, fmt.Errorf("%w: %d trailing bytes", ErrBadMeta, len(rest))
	}
	if m.NodeID == "" || m.ClusterID == "" {
		return nodeMeta{}, fmt.Errorf("%w: empty node or cluster ID", ErrBadMeta)
	}
	return m, nil
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}
