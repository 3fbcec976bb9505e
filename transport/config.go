package transport

import (
	"crypto/tls"
	"fmt"
	"net"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/replog-io/replog/protocol"
)

// Defaults of TCPConfig's fields (see each field's doc).
const (
	// DefaultPartialFrameBudget bounds the bytes of partly received frames
	// held for all inbound connections together.
	DefaultPartialFrameBudget = 64 << 20
	// DefaultIdleTimeout: an inbound connection silent this long is
	// closed. Dialers send a keepalive after a quarter of it.
	DefaultIdleTimeout = 2 * time.Minute
	// DefaultMaxInboundConns caps inbound connections (two per peer in a
	// healthy cluster, plus connections still in their handshake).
	DefaultMaxInboundConns = 512
	// DefaultMaxInboundConnsPerIP caps inbound connections from one IP
	// address.
	DefaultMaxInboundConnsPerIP = 64
	// DefaultRefusalLogInterval: at most one log line per reason per
	// interval about refused or misbehaving inbound connections.
	DefaultRefusalLogInterval = 10 * time.Second
	// DefaultDialTimeout bounds one TCP connect (and TLS handshake).
	DefaultDialTimeout = 5 * time.Second
	// DefaultHandshakeTimeout bounds the replog handshake.
	DefaultHandshakeTimeout = 10 * time.Second
	// DefaultWriteTimeout bounds a write to a peer that stopped reading.
	DefaultWriteTimeout = 10 * time.Second
	// DefaultBackoffMin and DefaultBackoffMax bound the backoff between
	// failed connects to one peer.
	DefaultBackoffMin = 50 * time.Millisecond
	DefaultBackoffMax = 2 * time.Second
	// DefaultQueueSize is the capacity of each per-peer outbound queue.
	DefaultQueueSize = 256
	// DefaultReceiveQueueSize is the capacity of the Receive channel.
	DefaultReceiveQueueSize = 4096
	// DefaultReceiveTimeout bounds the wait for room in a full Receive
	// channel.
	DefaultReceiveTimeout = time.Second
)

// Frame payload: how many bytes of entries or records a frame can carry.
// Byte budgets elsewhere (fetch responses, forwarded batches, record and
// batch size limits) count an entry or record as len(Data) +
// protocol.EntryOverhead; on the wire an entry costs len(Data) + 21 and a
// record len(Data) + 4, both at most that. So a FetchResponse or
// AppendRequest whose entries or records cost at most MaxFrameSize -
// FrameOverhead by that count always fits a frame of MaxFrameSize.
const (
	// fetchResponseFixed is a FetchResponse's encoding besides its
	// entries, with LeaderID at its longest (protocol.EncodedSize's
	// layout, restated here; TestFrameOverheadBoundsEncodedSize holds the
	// two together). Its LogStartVoters count and LogStartEpoch are here
	// too, and the quiescent flag (protocol.QuiescenceVersion); the rows
	// come only with answers that carry no entries (out of range,
	// diverging).
	fetchResponseFixed = 8 + 4 + maxIDLen + 8 + 1 + 8 + 8 + 8 + 8 + 4 + 4 + 8 + 1
	// appendRequestFixed is an AppendRequest's encoding besides its
	// records.
	appendRequestFixed = 8 + 8 + 4

	// FrameOverhead is the most bytes a frame carrying entries
	// (FetchResponse) or records (AppendRequest) spends beyond them, with
	// node IDs (255 bytes) and the log's name (protocol.MaxLogNameLength)
	// at their longest: length, version, kind, From, To, Log, the body's
	// other fields and the checksum.
	FrameOverhead = lenSize + protocol.MinSize + 2*maxIDLen + 4 + protocol.MaxLogNameLength + max(fetchResponseFixed, appendRequestFixed) + crcSize

	// DefaultMaxPayload is the most entry or record bytes (counted as
	// len(Data) + protocol.EntryOverhead each) that one frame of
	// DefaultMaxFrameSize carries: the ceiling of every byte budget whose
	// messages cross the transport (fetch responses, forwarded batches).
	DefaultMaxPayload = DefaultMaxFrameSize - FrameOverhead
)

// The claim above (an entry's and a record's wire overhead are within
// protocol.EntryOverhead) is checked at compile time in protocol/codec.go,
// where both numbers live.

// MaxPayload returns the most entry or record bytes (counted as len(Data)
// + protocol.EntryOverhead each) that one frame of maxFrameSize bytes
// carries; 0 means DefaultMaxFrameSize.
func MaxPayload(maxFrameSize int) int {
	if maxFrameSize == 0 {
		maxFrameSize = DefaultMaxFrameSize
	}
	return maxFrameSize - FrameOverhead
}

// ConfigError is the error TCPConfig.Validate returns: which field is bad
// and why. It wraps ErrInvalidConfig.
type ConfigError struct {
	// Field is the bad field's name in TCPConfig.
	Field string
	// Reason says what is wrong with it.
	Reason string
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("%v: TCPConfig.%s %s", ErrInvalidConfig, e.Field, e.Reason)
}

// Unwrap returns ErrInvalidConfig.
func (e *ConfigError) Unwrap() error { return ErrInvalidConfig }

// TCPConfig configures a TCP transport. Zero values take the defaults named
// on each field; negative numbers are invalid.
type TCPConfig struct {
	// NodeID is this node's ID, sent in every handshake. Required, at most
	// 255 bytes.
	NodeID string
	// ClusterID names the cluster; peers with another cluster ID are
	// refused (ErrWrongCluster without a Secret; with one, the cluster ID
	// is part of the proof and a peer of another cluster fails it:
	// ErrUnauthenticated). At most 255 bytes; "" is a valid ID.
	ClusterID string
	// ListenAddr is the "host:port" to listen on; port 0 picks a free port
	// (see Addr). Required unless Listener is set; with Listener it must
	// be empty or Listener's address.
	ListenAddr string
	// Listener, if set, is served instead of listening on ListenAddr: a
	// caller that must know the address before the transport starts (to
	// hand it to other nodes) binds it itself, with no window in which
	// another process could take the port. It is wrapped in TLS when TLS
	// is set. The transport owns it from NewTCP on: Close closes it, and
	// so does NewTCP when it fails. Default nil.
	Listener net.Listener
	// Resolver maps node IDs to addresses. It is called by Send (to answer
	// ErrUnknownPeer) and before every (re)connect. Required.
	Resolver Resolver
	// Secret, if not empty, authenticates every connection: dialer and
	// acceptor each prove they hold it (challenge-response with fresh
	// nonces, HMAC-SHA256 under a key derived from it; see handshake.go)
	// before anything else is exchanged. A peer without it is refused and
	// learns nothing about the cluster; a dialer refused, or reaching a
	// node that cannot prove the secret, reports ErrUnauthenticated. Every
	// node of a cluster needs the same Secret. At least MinSecretSize
	// bytes; use 32 random bytes. The secret authenticates connections;
	// it neither encrypts nor integrity-protects the stream after the
	// handshake (use TLS as well on a network you do not trust).
	Secret []byte
	// NextSecret, if set, is a second secret this node accepts: a dialer
	// that proves either Secret or NextSecret is let in, and answered
	// under the one it used. The node itself always proves Secret. That
	// rotates the secret without an outage, in rolling restarts: every
	// node to (Secret old, NextSecret new); then every node to (new, old);
	// then every node to (new) alone. Any two nodes in adjacent steps hold
	// a secret the other accepts. At least MinSecretSize bytes, and only
	// with Secret. Default none.
	NextSecret []byte
	// TLS, if set, secures every connection: the listener uses it as a
	// server config (set Certificates, and ClientAuth/ClientCAs for mutual
	// TLS), the dialer as a client config (set RootCAs, and Certificates
	// for mutual TLS). When ServerName is empty the dialer uses the host of
	// the resolved address. nil means plain TCP.
	TLS *tls.Config
	// VerifyPeer, if set, is called on the accepting side for every inbound
	// connection once the peer has named itself (with a Secret: once it
	// has proven the secret), with the TLS state (nil without TLS). An
	// error refuses the connection. With mutual TLS it ties the
	// certificate to the node ID (see VerifyCertNamesNode), so that one
	// node's certificate cannot speak for another node.
	VerifyPeer func(nodeID string, cs *tls.ConnectionState) error
	// MaxFrameSize bounds every frame sent or received, in bytes. Default
	// DefaultMaxFrameSize (16 MiB). An outbound message above it is dropped
	// and logged; an inbound one closes the connection. MaxPayload says how
	// many entry bytes a frame of this size carries. At least
	// 2*FrameOverhead.
	MaxFrameSize int
	// PartialFrameBudget bounds the bytes of frame buffers held for frames
	// being received, over all inbound connections together (each buffer
	// is charged as it grows, and released once its message is delivered
	// or dropped). When a connection needs more than is left, the inbound
	// connections whose current frames arrive slowest (fewest bytes per
	// second since the frame began) are cut until it fits: the process
	// never holds more, however many peers send large frames slowly.
	// Default DefaultPartialFrameBudget (64 MiB); at least MaxFrameSize.
	PartialFrameBudget int
	// IdleTimeout closes an inbound connection that has sent no byte for
	// this long after its handshake (at least 3/4 of it; the deadline is
	// refreshed lazily). Dialers send a keepalive on a connection they
	// have not written to for IdleTimeout/4, so a healthy but quiet peer
	// (an idle control connection in a stable cluster) is never cut; set
	// the same IdleTimeout on every node. The handshake itself is bounded
	// by HandshakeTimeout. Default DefaultIdleTimeout (2 minutes).
	IdleTimeout time.Duration
	// MaxInboundConns caps inbound connections (handshaking or
	// established); a connection above the cap is closed at once, without
	// a byte sent. Default DefaultMaxInboundConns (512).
	MaxInboundConns int
	// MaxInboundConnsPerIP caps inbound connections from one remote IP
	// address, the same way. Default DefaultMaxInboundConnsPerIP (64).
	// Per node ID, an established connection is replaced by a newer one on
	// the same lane (at most two per peer), so a peer that restarts is
	// never locked out by its own dead connections.
	MaxInboundConnsPerIP int
	// RefusalLogInterval rate-limits the Warn lines about refused or
	// misbehaving inbound connections: at most one per reason per
	// interval, carrying the count of lines suppressed since the last
	// one, so a flood of bad connections cannot flood the log. Default
	// DefaultRefusalLogInterval (10s).
	RefusalLogInterval time.Duration
	// DialTimeout bounds one TCP connect (and TLS handshake). Default
	// DefaultDialTimeout (5s).
	DialTimeout time.Duration
	// HandshakeTimeout bounds the replog handshake on both sides (on the
	// acceptor, from accept to the end of the handshake, TLS included).
	// Default DefaultHandshakeTimeout (10s).
	HandshakeTimeout time.Duration
	// WriteTimeout bounds a write to a peer that stopped reading; the
	// connection is then closed and redialled. Default DefaultWriteTimeout
	// (10s).
	WriteTimeout time.Duration
	// BackoffMin and BackoffMax bound the exponential backoff between
	// failed connects to one peer (doubling, jittered to [d/2, d]).
	// Defaults DefaultBackoffMin (50ms) and DefaultBackoffMax (2s); a
	// BackoffMax below BackoffMin is raised to it.
	BackoffMin time.Duration
	BackoffMax time.Duration
	// QueueSize is the capacity of each per-peer outbound queue (there are
	// two per peer: fetch traffic and the rest). Send drops a message whose
	// queue is full. Default DefaultQueueSize (256).
	QueueSize int
	// ReceiveQueueSize is the capacity of the Receive channel. Default
	// DefaultReceiveQueueSize (4096).
	ReceiveQueueSize int
	// ReceiveTimeout is how long a connection's reader waits for room in a
	// full Receive channel before it drops the message (logged at Warn).
	// Waiting pushes back on the sender through TCP instead of dropping at
	// the first burst; the bound keeps a stalled consumer from stalling
	// peers forever. Default DefaultReceiveTimeout (1s).
	ReceiveTimeout time.Duration
	// HeartbeatInterval turns on the node's contact clock and heartbeats
	// (docs/protocol.md R98): a peer whose connection negotiated
	// protocol.QuiescenceVersion and that was sent nothing for this long
	// gets a heartbeat. The root sets it to FetchMaxWait. 0 (the default):
	// no heartbeats, and Contact reports nothing.
	HeartbeatInterval time.Duration
	// ContactTimeout is how long a peer may send nothing before Silent
	// reports it (R99). The root sets it to FetchTimeout. Used only with
	// HeartbeatInterval; 0 then: 5 times HeartbeatInterval.
	ContactTimeout time.Duration
	// Logger receives the transport's logs (Named "transport"). Default
	// hclog.NewNullLogger().
	Logger hclog.Logger
}

// EnsureDefaults sets every zero field of c to its default (named on
// each field). NewTCP calls it on its own copy of the config.
func (c *TCPConfig) EnsureDefaults() {
	setDur := func(d *time.Duration, def time.Duration) {
		if *d == 0 {
			*d = def
		}
	}
	setInt := func(n *int, def int) {
		if *n == 0 {
			*n = def
		}
	}
	setInt(&c.MaxFrameSize, DefaultMaxFrameSize)
	setInt(&c.PartialFrameBudget, DefaultPartialFrameBudget)
	setInt(&c.MaxInboundConns, DefaultMaxInboundConns)
	setInt(&c.MaxInboundConnsPerIP, DefaultMaxInboundConnsPerIP)
	setInt(&c.QueueSize, DefaultQueueSize)
	setInt(&c.ReceiveQueueSize, DefaultReceiveQueueSize)
	setDur(&c.IdleTimeout, DefaultIdleTimeout)
	setDur(&c.RefusalLogInterval, DefaultRefusalLogInterval)
	setDur(&c.DialTimeout, DefaultDialTimeout)
	setDur(&c.HandshakeTimeout, DefaultHandshakeTimeout)
	setDur(&c.WriteTimeout, DefaultWriteTimeout)
	setDur(&c.BackoffMin, DefaultBackoffMin)
	setDur(&c.BackoffMax, DefaultBackoffMax)
	if c.BackoffMax < c.BackoffMin {
		c.BackoffMax = c.BackoffMin
	}
	setDur(&c.ReceiveTimeout, DefaultReceiveTimeout)
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
}

// Validate reports the first invalid field of c (zero fields stand for
// their defaults), as a *ConfigError (wrapping ErrInvalidConfig) that
// names it. It does not modify c. NewTCP calls it.
func (c TCPConfig) Validate() error {
	bad := func(field, format string, args ...any) error {
		return &ConfigError{Field: field, Reason: fmt.Sprintf(format, args...)}
	}
	switch {
	case c.NodeID == "":
		return bad("NodeID", "is required")
	case len(c.NodeID) > maxIDLen:
		return bad("NodeID", "is %d bytes, limit %d", len(c.NodeID), maxIDLen)
	case len(c.ClusterID) > maxIDLen:
		return bad("ClusterID", "is %d bytes, limit %d", len(c.ClusterID), maxIDLen)
	case c.ListenAddr == "" && c.Listener == nil:
		return bad("ListenAddr", "is required (or Listener)")
	case c.Listener != nil && c.ListenAddr != "" && c.ListenAddr != c.Listener.Addr().String():
		return bad("ListenAddr", "%q is not Listener's address (%s): set one or the other", c.ListenAddr, c.Listener.Addr())
	case c.Resolver == nil:
		return bad("Resolver", "is required")
	case len(c.Secret) > 0 && len(c.Secret) < MinSecretSize:
		return bad("Secret", "is %d bytes, at least %d required (use 32 random bytes)", len(c.Secret), MinSecretSize)
	case len(c.NextSecret) > 0 && len(c.Secret) == 0:
		return bad("NextSecret", "is set without Secret (the node proves Secret; NextSecret is only accepted besides it)")
	case len(c.NextSecret) > 0 && len(c.NextSecret) < MinSecretSize:
		return bad("NextSecret", "is %d bytes, at least %d required (use 32 random bytes)", len(c.NextSecret), MinSecretSize)
	}
	if _, _, err := net.SplitHostPort(c.ListenAddr); err != nil && c.Listener == nil {
		return bad("ListenAddr", "%q is not host:port: %v", c.ListenAddr, err)
	}
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"MaxFrameSize", int64(c.MaxFrameSize)},
		{"PartialFrameBudget", int64(c.PartialFrameBudget)},
		{"IdleTimeout", int64(c.IdleTimeout)},
		{"MaxInboundConns", int64(c.MaxInboundConns)},
		{"MaxInboundConnsPerIP", int64(c.MaxInboundConnsPerIP)},
		{"RefusalLogInterval", int64(c.RefusalLogInterval)},
		{"DialTimeout", int64(c.DialTimeout)},
		{"HandshakeTimeout", int64(c.HandshakeTimeout)},
		{"WriteTimeout", int64(c.WriteTimeout)},
		{"BackoffMin", int64(c.BackoffMin)},
		{"BackoffMax", int64(c.BackoffMax)},
		{"QueueSize", int64(c.QueueSize)},
		{"ReceiveQueueSize", int64(c.ReceiveQueueSize)},
		{"ReceiveTimeout", int64(c.ReceiveTimeout)},
	} {
		if f.v < 0 {
			return bad(f.name, "is negative (%d)", f.v)
		}
	}
	c.EnsureDefaults() // c is a copy
	if c.MaxFrameSize < 2*FrameOverhead {
		return bad("MaxFrameSize", "(%d) is below %d: a frame must hold a message's fixed fields with room for entries", c.MaxFrameSize, 2*FrameOverhead)
	}
	if c.PartialFrameBudget < c.MaxFrameSize {
		return bad("PartialFrameBudget", "(%d) is below MaxFrameSize (%d): a frame of the maximum size could never be received", c.PartialFrameBudget, c.MaxFrameSize)
	}
	return nil
}
