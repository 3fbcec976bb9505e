package replog

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"math"
	"net"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/replog-io/replog/membership"
	"github.com/replog-io/replog/replica"
	"github.com/replog-io/replog/transport"
)

// Options configures a Log. The zero value plus Dir is a working
// single-node log. Open never modifies the caller's Options.
type Options struct {
	// Dir is the node's data directory: its bbolt file (replog.db) and
	// identity file (replog.identity, which records ClusterID and NodeID
	// when the directory is created; Open refuses a directory of another
	// cluster or node). Created if missing. Required.
	Dir string
	// NodeID names this node; unique in the cluster. Default "node1".
	NodeID string
	// ClusterID must match on every node; connections from another cluster
	// are refused. Default "replog".
	ClusterID string
	// Voters lists the voter node IDs (fixed). A node not in the list is an
	// observer. Default: just NodeID (a single-node cluster).
	Voters []string

	// RPCAddr is the TCP address the replication transport listens on.
	// Default "127.0.0.1:0" (any free port) when the cluster has more than
	// one node; unused for a single voter with no peers.
	RPCAddr string
	// AdvertiseRPCAddr is the address other nodes dial. Default: the bound
	// RPCAddr.
	AdvertiseRPCAddr string
	// Peers maps node IDs to RPC addresses statically. Addresses learned by
	// gossip are used for IDs not listed here.
	Peers map[string]string
	// TLS, if set, secures the transport. It is used both to serve (set
	// Certificates, and ClientCAs with ClientAuth for mutual TLS) and to
	// dial (RootCAs). Nil means plain TCP.
	TLS *tls.Config
	// TLSVerifyNodeID, with mutual TLS, refuses a peer whose certificate
	// does not name the node ID it claims (as a DNS name or common name).
	// Without it any certificate the CA signed may speak for any node ID.
	TLSVerifyNodeID bool

	// Secret is the cluster secret, the same on every node: at least
	// MinSecretLen (16) bytes, ideally 32 random bytes. With it every
	// transport connection starts with a mutual challenge-response
	// handshake (HMAC-SHA256 over fresh nonces from both sides), so a peer
	// without the secret can neither fetch, vote nor append, and learns
	// nothing about the cluster. Unless GossipKey is set, it also keys
	// gossip encryption (see GossipKey). It authenticates; it does not
	// encrypt the replication traffic (use TLS for that).
	//
	// A networked node (more than one voter, or Peers, GossipAddr, Join
	// or RPCAddr set) must have Secret or mutual TLS (TLS with ClientAuth
	// tls.RequireAndVerifyClientCert), or set Insecure; Open refuses it
	// otherwise. Open copies the slice.
	Secret []byte
	// Insecure lets a networked node run with neither Secret nor mutual
	// TLS: then anyone who can reach its ports can read, forge or erase
	// the log. For tests and trusted single-host setups. Setting both
	// Insecure and Secret is refused as contradictory. Default false.
	Insecure bool

	// GossipAddr is the memberlist bind address ("host:port"). Empty
	// disables gossip (use Peers). Default "".
	GossipAddr string
	// Join lists gossip addresses of existing members to join at Open.
	Join []string
	// GossipKey, if set, encrypts and authenticates gossip (AES; 16, 24
	// or 32 bytes): a host without the key can neither join nor inject
	// metadata. Default: when Secret is set, a 32-byte key derived from it
	// (HMAC-SHA256(Secret, "replog gossip key v1")), so that gossip is
	// encrypted whenever the transport is authenticated by a secret; with
	// neither, gossip is plain (memberlist does not use TLS), so a cluster
	// secured by mutual TLS alone must set GossipKey (or Secret, or
	// Insecure) to use gossip.
	GossipKey []byte
	// GossipLabel, if set, is memberlist's label: gossip from nodes with
	// another label is refused. Default: ClusterID.
	GossipLabel string

	// GossipTuning sets memberlist's failure-detection timings. Zero
	// fields take membership.LAN()'s values; tests on loopback use
	// membership.FastForTests().
	GossipTuning membership.Tuning

	// FetchMaxWait is how long the leader parks an empty fetch (Kafka's
	// replica.fetch.wait.max.ms). Default 500ms.
	FetchMaxWait time.Duration
	// FetchTimeout: a voter that has not fetched successfully for this
	// long starts an election; a leader without fetches from a majority for
	// this long resigns. Default 2s. Must be at least
	// 2*(FetchMaxWait+ElectionTimeout): a follower retries a fetch after
	// FetchMaxWait+ElectionTimeout without an answer, and the retry may be
	// parked for FetchMaxWait too, so only then does one lost fetch or
	// answer not cost leader contact (and set off an election).
	FetchTimeout time.Duration
	// ElectionTimeout is the base of randomised election timeouts.
	// Default 500ms.
	ElectionTimeout time.Duration
	// FetchMaxBytes bounds one fetch response's entry bytes. Default 1 MiB.
	FetchMaxBytes int
	// MaxRecordSize bounds one appended record. Default 1 MiB.
	MaxRecordSize int

	// NoSync disables fsync. Acknowledged appends can then be lost on a
	// machine crash (not on a process crash). For tests only.
	NoSync bool
	// Logger receives logs; components get Named sub-loggers. Default: a
	// null logger.
	Logger hclog.Logger
}

// Defaults for Options fields left zero.
const (
	DefaultNodeID    = "node1"
	DefaultClusterID = "replog"
	DefaultRPCAddr   = "127.0.0.1:0"
	// The protocol's timings and sizes are the core's defaults.
	DefaultFetchMaxWait    = replica.DefaultFetchMaxWait
	DefaultFetchTimeout    = replica.DefaultFetchTimeout
	DefaultElectionTimeout = replica.DefaultElectionTimeout
	DefaultFetchMaxBytes   = replica.DefaultFetchMaxBytes
	DefaultMaxRecordSize   = replica.DefaultMaxRecordSize
)

// MinSecretLen is the shortest Options.Secret Validate accepts (16 bytes,
// the transport's minimum).
const MinSecretLen = transport.MinSecretSize

// gossipKeyLabel is the HMAC message that derives the default gossip key
// from Options.Secret: a key of its own, so that gossip's key (which
// memberlist holds in memory and uses for AES) is not the transport's.
const gossipKeyLabel = "replog gossip key v1"

// deriveGossipKey returns the 32-byte memberlist key for secret.
func deriveGossipKey(secret []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(gossipKeyLabel))
	return m.Sum(nil)
}

// maxConfiguredSize bounds FetchMaxBytes and MaxRecordSize so that one
// fetch response always fits the transport's 16 MiB frame limit.
const maxConfiguredSize = 8 << 20

// withDefaults returns a copy of o with zero fields set to their defaults.
// Slices and maps are copied so that later changes by the caller do not
// reach the Log.
func (o Options) withDefaults() Options {
	if o.NodeID == "" {
		o.NodeID = DefaultNodeID
	}
	if o.ClusterID == "" {
		o.ClusterID = DefaultClusterID
	}
	if len(o.Voters) == 0 {
		o.Voters = []string{o.NodeID}
	} else {
		o.Voters = append([]string(nil), o.Voters...)
	}
	if o.Peers != nil {
		peers := make(map[string]string, len(o.Peers))
		for k, v := range o.Peers {
			peers[k] = v
		}
		o.Peers = peers
	}
	o.Join = append([]string(nil), o.Join...)
	o.GossipKey = append([]byte(nil), o.GossipKey...)
	o.Secret = append([]byte(nil), o.Secret...)
	if len(o.GossipKey) == 0 && len(o.Secret) > 0 {
		o.GossipKey = deriveGossipKey(o.Secret)
	}
	if o.GossipLabel == "" {
		o.GossipLabel = o.ClusterID
	}
	if o.RPCAddr == "" && o.needsTransport() {
		o.RPCAddr = DefaultRPCAddr
	}
	if o.FetchMaxWait == 0 {
		o.FetchMaxWait = DefaultFetchMaxWait
	}
	if o.FetchTimeout == 0 {
		o.FetchTimeout = DefaultFetchTimeout
	}
	if o.ElectionTimeout == 0 {
		o.ElectionTimeout = DefaultElectionTimeout
	}
	if o.FetchMaxBytes == 0 {
		o.FetchMaxBytes = DefaultFetchMaxBytes
	}
	if o.MaxRecordSize == 0 {
		o.MaxRecordSize = DefaultMaxRecordSize
	}
	return o
}

// needsTransport reports whether the node talks to other nodes: it does
// unless it is the only voter and nothing names a peer or gossip.
func (o Options) needsTransport() bool {
	single := len(o.Voters) == 0 || (len(o.Voters) == 1 && o.Voters[0] == o.NodeID)
	return !single || len(o.Peers) > 0 || o.GossipAddr != "" || len(o.Join) > 0 || o.RPCAddr != ""
}

// Validate reports the first invalid field, as an error wrapping
// ErrInvalidOptions that names it. It checks the options as Open would use
// them, that is after defaults are applied; it does not modify o.
func (o Options) Validate() error {
	d := o.withDefaults()
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: %s %s", ErrInvalidOptions, field, fmt.Sprintf(format, args...))
	}
	if d.Dir == "" {
		return bad("Dir", "is required")
	}
	if err := validID(d.NodeID); err != nil {
		return bad("NodeID", "%q: %v", d.NodeID, err)
	}
	if err := validID(d.ClusterID); err != nil {
		return bad("ClusterID", "%q: %v", d.ClusterID, err)
	}
	seen := make(map[string]bool, len(d.Voters))
	for _, v := range d.Voters {
		if err := validID(v); err != nil {
			return bad("Voters", "entry %q: %v", v, err)
		}
		if seen[v] {
			return bad("Voters", "lists %q twice", v)
		}
		seen[v] = true
	}
	for id, addr := range d.Peers {
		if err := validID(id); err != nil {
			return bad("Peers", "key %q: %v", id, err)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return bad("Peers", "address of %q (%q): %v", id, addr, err)
		}
	}
	for _, a := range []struct{ field, addr string }{
		{"RPCAddr", d.RPCAddr}, {"AdvertiseRPCAddr", d.AdvertiseRPCAddr}, {"GossipAddr", d.GossipAddr},
	} {
		if a.addr == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(a.addr); err != nil {
			return bad(a.field, "%q: %v", a.addr, err)
		}
	}
	if d.GossipAddr == "" {
		// Without gossip, every other voter must be listed in Peers, or
		// the node can never reach a majority.
		for _, v := range d.Voters {
			if _, ok := d.Peers[v]; v != d.NodeID && !ok {
				return bad("Peers", "has no address for voter %q and GossipAddr is empty: the node could never reach it", v)
			}
		}
	} else if d.AdvertiseRPCAddr == "" {
		// Gossip advertises the RPC address; a wildcard one is useless to
		// the other nodes.
		if host, _, _ := net.SplitHostPort(d.RPCAddr); host == "" || net.ParseIP(host) != nil && net.ParseIP(host).IsUnspecified() {
			return bad("AdvertiseRPCAddr", "is required when RPCAddr (%q) has no specific host and gossip is on", d.RPCAddr)
		}
	}
	if d.TLSVerifyNodeID && (d.TLS == nil || d.TLS.ClientAuth < tls.VerifyClientCertIfGiven) {
		return bad("TLSVerifyNodeID", "needs TLS with verified client certificates (ClientAuth RequireAndVerifyClientCert)")
	}
	if d.TLS != nil && len(d.TLS.Certificates) == 0 && d.TLS.GetCertificate == nil {
		return bad("TLS", "has no certificate (set Certificates): nodes present it both to serve and to dial")
	}
	if err := d.validateAuth(); err != nil {
		return err
	}
	if len(d.Join) > 0 && d.GossipAddr == "" {
		return bad("Join", "needs GossipAddr (gossip is off without it)")
	}
	switch len(d.GossipKey) {
	case 0, 16, 24, 32:
	default:
		return bad("GossipKey", "must be 16, 24 or 32 bytes, not %d", len(d.GossipKey))
	}
	if d.FetchMaxWait < 0 {
		return bad("FetchMaxWait", "must be positive, not %v", d.FetchMaxWait)
	}
	if d.FetchMaxWait > time.Duration(math.MaxUint32)*time.Millisecond {
		return bad("FetchMaxWait", "%v is too long", d.FetchMaxWait)
	}
	if d.ElectionTimeout <= 0 {
		return bad("ElectionTimeout", "must be positive, not %v", d.ElectionTimeout)
	}
	if min := replica.MinFetchTimeout(d.FetchMaxWait, d.ElectionTimeout); d.FetchTimeout < min {
		return bad("FetchTimeout", "(%v) must be at least 2*(FetchMaxWait + ElectionTimeout) = 2*(%v + %v) = %v, so that one lost fetch does not cost leader contact",
			d.FetchTimeout, d.FetchMaxWait, d.ElectionTimeout, min)
	}
	if d.FetchMaxBytes <= 0 || d.FetchMaxBytes > maxConfiguredSize {
		return bad("FetchMaxBytes", "must be in (0, %d], not %d", maxConfiguredSize, d.FetchMaxBytes)
	}
	if d.MaxRecordSize <= 0 || d.MaxRecordSize > maxConfiguredSize {
		return bad("MaxRecordSize", "must be in (0, %d], not %d", maxConfiguredSize, d.MaxRecordSize)
	}
	return nil
}

// validateAuth checks Secret and Insecure on defaulted options: a node
// that listens (see needsTransport) must authenticate its peers, by Secret
// or mutual TLS, unless the caller opted out with Insecure.
func (d Options) validateAuth() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: %s %s", ErrInvalidOptions, field, fmt.Sprintf(format, args...))
	}
	if len(d.Secret) > 0 && len(d.Secret) < MinSecretLen {
		return bad("Secret", "is %d bytes; it must be at least %d (32 random bytes recommended)", len(d.Secret), MinSecretLen)
	}
	if len(d.Secret) > 0 && d.Insecure {
		return bad("Insecure", "is set together with Secret: choose one (Insecure turns authentication off)")
	}
	if d.Insecure || !d.needsTransport() {
		return nil
	}
	mutualTLS := d.TLS != nil && d.TLS.ClientAuth == tls.RequireAndVerifyClientCert
	if len(d.Secret) == 0 && !mutualTLS {
		return bad("Secret", "is not set on a networked node (more voters than itself, or Peers, GossipAddr, Join or RPCAddr set) "+
			"and TLS is not mutual: anyone who reaches its ports could read, forge or erase the log. "+
			"Set Secret (at least %d bytes, the same on every node), or TLS with ClientAuth tls.RequireAndVerifyClientCert, "+
			"or Insecure to run unauthenticated", MinSecretLen)
	}
	if d.GossipAddr != "" && len(d.GossipKey) == 0 {
		// Only mutual TLS is left, and memberlist does not speak TLS.
		return bad("GossipKey", "is not set and there is no Secret to derive it from: gossip would be unauthenticated "+
			"(memberlist does not use TLS); set GossipKey or Secret, or Insecure")
	}
	return nil
}

// validID accepts node and cluster IDs: 1 to 64 bytes of letters, digits,
// '-', '_' and '.'. The limit keeps gossip metadata under memberlist's 512
// bytes.
func validID(s string) error {
	if s == "" {
		return errors.New("is empty")
	}
	if len(s) > 64 {
		return errors.New("is longer than 64 bytes")
	}
	for _, c := range s {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.'
		if !ok {
			return fmt.Errorf("has %q (allowed: letters, digits, '-', '_', '.')", c)
		}
	}
	return nil
}
