package replog

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/replog-io/replog/membership"
	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/replica"
	"github.com/replog-io/replog/storage"
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
	// Voters is the bootstrap voter set: the voters of a brand-new cluster
	// (docs/design.md R57). Its first election needs every one of them up
	// and granting (before voter directories are recorded, nobody can
	// tell a wiped voter from its old self); the first leader records them
	// in the log. Afterwards the log is the truth: AddVoter and
	// RemoveVoter change the voters, Status.Voters reports them, and this
	// list is not read again (keep it the same on every node, and for a
	// node that joins later it only needs to name the nodes to fetch from
	// at first). A node not among the voters in force is an observer.
	// A node whose directory is empty bootstraps nothing while any node it
	// knows of (Peers, the members Join found, members that join later)
	// has not answered, or answers that a cluster exists (R60): a wiped
	// node joins its cluster instead of starting another.
	// Default: just NodeID (a single-node cluster).
	Voters []string
	// ManualVoterChanges turns off the automatic replacement of a voter
	// whose data directory was wiped (R58). By default (false) such a
	// node, which comes back with a new directory ID and fetches as an
	// observer, is made a voter again by the leader once it has caught up:
	// the leader removes the old incarnation and adds the new one, one
	// change at a time. With true it stays an observer until an operator
	// calls RemoveVoter and then AddVoter.
	ManualVoterChanges bool

	// RPCAddr is the TCP address the replication transport listens on.
	// Default "127.0.0.1:0" (any free port) when the cluster has more than
	// one node; unused for a single voter with no peers.
	RPCAddr string
	// AdvertiseRPCAddr is the address other nodes dial. Default: the bound
	// RPCAddr.
	AdvertiseRPCAddr string
	// Peers maps node IDs to RPC addresses statically. Addresses learned by
	// gossip are used for IDs not listed here. A node with an empty
	// directory asks each of them before it bootstraps (R60, see Voters).
	// Default: none.
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
	// The members the join finds are asked by a node with an empty
	// directory before it bootstraps (R60, see Voters): name the cluster's
	// nodes, so that a node that lost its disk finds its cluster.
	// Default: none.
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
	// another label is refused. Default: ClusterID (membership.Config's
	// default Label).
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
	// CloseTransferTimeout bounds how long Close on the leader waits for
	// it to hand its leadership over (TransferLeadership to the most
	// caught-up voter) before it closes, so that a rolling restart costs
	// no election timeout. Default DefaultCloseTransferTimeout (1s);
	// negative: Close does not transfer.
	CloseTransferTimeout time.Duration
	// FetchMaxBytes bounds one fetch response's entry bytes (each entry
	// counted as len(Data) + protocol.EntryOverhead). Default
	// DefaultFetchMaxBytes (1 MiB). At most transport.DefaultMaxPayload
	// (16 MiB less transport.FrameOverhead), so that a response always
	// fits one transport frame.
	FetchMaxBytes int
	// MaxRecordSize bounds one appended record. Default
	// DefaultMaxRecordSize (1 MiB). At most transport.DefaultMaxPayload -
	// protocol.EntryOverhead, so that a fetch response carrying one such
	// record (a response always carries its first entry whole) fits one
	// transport frame.
	MaxRecordSize int

	// DedupWindow: an append WithID whose ID was appended within this
	// window is not appended again; it returns the original's offset and
	// ErrDuplicate (docs/design.md R64; NATS JetStream's duplicate window).
	// Default DefaultDedupWindow (2 minutes). An exactly-once consumer must
	// redo an input within it.
	DedupWindow time.Duration
	// ProducerIdleTimeout is how long the leader remembers a Log's
	// producer after its last append (R66; Kafka's
	// producer.id.expiration.ms): an append still retrying after that long
	// without another append of its Log landing may be stored twice.
	// Default DefaultProducerIdleTimeout (24 hours).
	ProducerIdleTimeout time.Duration
	// DisableIdempotence turns off the producer key of appends (R63): they
	// then end with ErrUnknownOutcome when the leader changes, and a retry
	// may store an entry twice. WithID still deduplicates. Default false.
	DisableIdempotence bool

	// RetentionBytes, when positive, keeps the log to about this many bytes
	// on disk: while this node leads, the oldest whole segment files go
	// while the segments together hold more (Kafka's retention.bytes). A
	// node keeps up to one segment more than the bound, plus the active
	// one. Default 0: keep everything (the only safe default for a
	// library).
	RetentionBytes int64
	// RetentionAge, when positive, deletes whole segment files whose newest
	// entry the leader appended longer ago than this (Kafka's
	// retention.ms; Entry.Time). The active segment is never deleted: with
	// a slow log, lower SegmentBytes. Default 0: off.
	RetentionAge time.Duration
	// SegmentBytes is the size at which the store seals its active segment
	// file and starts a new one (storage.DirOptions.SegmentBytes);
	// retention frees disk in whole segments. Default
	// storage.DefaultSegmentBytes (64 MiB).
	SegmentBytes int64

	// NoSync disables fsync (storage.DirOptions.NoSync). Acknowledged
	// appends can then be lost on a machine crash (not on a process
	// crash). For tests only. Default false.
	NoSync bool
	// Logger receives logs; components get Named sub-loggers. Default: a
	// null logger. SlogLogger adapts a *slog.Logger.
	Logger hclog.Logger
}

// Defaults for Options fields left zero. Each is defined once: the
// protocol's timings and sizes by the core (replica), the root's own here.
const (
	DefaultNodeID    = "node1"
	DefaultClusterID = "replog"
	DefaultRPCAddr   = "127.0.0.1:0"
	// The protocol's timings and sizes are the core's defaults (defined
	// in replica, applied by Options.EnsureDefaults).
	DefaultFetchMaxWait    = replica.DefaultFetchMaxWait
	DefaultFetchTimeout    = replica.DefaultFetchTimeout
	DefaultElectionTimeout = replica.DefaultElectionTimeout
	DefaultFetchMaxBytes   = replica.DefaultFetchMaxBytes
	DefaultMaxRecordSize   = replica.DefaultMaxRecordSize
	// Exactly once (R64, R66): the core's too.
	DefaultDedupWindow         = replica.DefaultDedupWindow
	DefaultProducerIdleTimeout = replica.DefaultProducerIdleTimeout
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

// maxConfiguredSize bounds FetchMaxBytes, and MaxRecordSize +
// protocol.EntryOverhead, and an AppendBatch (see maxBatchBytes): what one
// transport frame carries. The root never sets TCPConfig.MaxFrameSize, so
// the frame is transport.DefaultMaxFrameSize (components' test checks it).
const maxConfiguredSize = transport.DefaultMaxPayload

// maxRecordSize is the largest MaxRecordSize: a fetch response's first
// entry is always sent whole, and it must fit a frame too.
const maxRecordSize = maxConfiguredSize - protocol.EntryOverhead

// EnsureDefaults sets o's zero fields to their defaults (named on each
// field), and derives GossipKey from Secret when it is not set. Defaults
// of what a component owns (GossipLabel, GossipTuning, the transport's
// limits) are left for the component's own EnsureDefaults, which Open
// applies to the configurations it derives from o. Open works on a copy:
// it never modifies the caller's Options.
func (o *Options) EnsureDefaults() {
	if o.NodeID == "" {
		o.NodeID = DefaultNodeID
	}
	if o.ClusterID == "" {
		o.ClusterID = DefaultClusterID
	}
	if len(o.Voters) == 0 {
		o.Voters = []string{o.NodeID}
	}
	if len(o.GossipKey) == 0 && len(o.Secret) > 0 {
		o.GossipKey = deriveGossipKey(o.Secret)
	}
	if o.RPCAddr == "" && o.needsTransport() {
		o.RPCAddr = DefaultRPCAddr
	}
	if o.CloseTransferTimeout == 0 {
		o.CloseTransferTimeout = DefaultCloseTransferTimeout
	}
	// The core's timings and sizes take the core's defaults
	// (replica.Config.EnsureDefaults), written back because the root uses
	// them too (MaxRecordSize in AppendBatch, the ceilings in Validate).
	rc := replica.Config{
		ID:              o.NodeID,
		FetchTimeout:    o.FetchTimeout,
		ElectionTimeout: o.ElectionTimeout,
		FetchMaxWait:    o.FetchMaxWait,
		FetchMaxBytes:   o.FetchMaxBytes,
		MaxRecordSize:   o.MaxRecordSize,

		DedupWindow:         o.DedupWindow,
		ProducerIdleTimeout: o.ProducerIdleTimeout,
	}
	rc.EnsureDefaults()
	o.DedupWindow, o.ProducerIdleTimeout = rc.DedupWindow, rc.ProducerIdleTimeout
	o.FetchTimeout, o.ElectionTimeout, o.FetchMaxWait = rc.FetchTimeout, rc.ElectionTimeout, rc.FetchMaxWait
	o.FetchMaxBytes, o.MaxRecordSize = rc.FetchMaxBytes, rc.MaxRecordSize
}

// withDefaults returns a copy of o with its defaults applied
// (EnsureDefaults) and its own copies of every slice and map, so that
// later changes by the caller do not reach the Log.
func (o Options) withDefaults() Options {
	o.Voters = append([]string(nil), o.Voters...)
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
	o.EnsureDefaults()
	return o
}

// components are the configurations of the node's parts, derived from
// Options by Options.components.
type components struct {
	replica    replica.Config
	transport  transport.TCPConfig
	membership membership.Config
	store      storage.DirOptions
	identity   storage.Identity
}

// components derives every part's configuration from o (defaults applied:
// see withDefaults): the one place that says which Options field feeds
// which component field. Each configuration then has its own defaults
// applied (their EnsureDefaults; replica.New applies the core's). Left for
// Open to fill, because they exist only at run time: the transport's
// Resolver, the replica's Rand, and, when AdvertiseRPCAddr is empty,
// membership's RPCAddr (the transport's bound address; RPCAddr until
// then). logger is the node's logger (nil: a null logger).
func (o Options) components(logger hclog.Logger) components {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	var verifyPeer func(string, *tls.ConnectionState) error
	if o.TLSVerifyNodeID {
		verifyPeer = transport.VerifyCertNamesNode
	}
	rpcAddr := o.AdvertiseRPCAddr
	if rpcAddr == "" {
		rpcAddr = o.RPCAddr
	}
	c := components{
		replica: replica.Config{
			ID:              o.NodeID,
			Voters:          o.Voters,
			FetchTimeout:    o.FetchTimeout,
			ElectionTimeout: o.ElectionTimeout,
			FetchMaxWait:    o.FetchMaxWait,
			FetchMaxBytes:   o.FetchMaxBytes,
			MaxRecordSize:   o.MaxRecordSize,
			MaxForwardBytes: maxConfiguredSize,
			Logger:          logger,

			DedupWindow:         o.DedupWindow,
			ProducerIdleTimeout: o.ProducerIdleTimeout,

			ManualVoterChanges: o.ManualVoterChanges,
		},
		transport: transport.TCPConfig{
			NodeID:     o.NodeID,
			ClusterID:  o.ClusterID,
			ListenAddr: o.RPCAddr,
			Secret:     o.Secret,
			TLS:        o.TLS,
			VerifyPeer: verifyPeer,
			Logger:     logger,
		},
		membership: membership.Config{
			NodeID:    o.NodeID,
			ClusterID: o.ClusterID,
			BindAddr:  o.GossipAddr,
			RPCAddr:   rpcAddr,
			Voter:     slices.Contains(o.Voters, o.NodeID),
			Join:      o.Join,
			SecretKey: o.GossipKey,
			Label:     o.GossipLabel,
			Tuning:    o.GossipTuning,
			Logger:    logger,
		},
		store:    storage.DirOptions{NoSync: o.NoSync, SegmentBytes: o.SegmentBytes, Logger: logger.Named("storage")},
		identity: storage.Identity{ClusterID: o.ClusterID, NodeID: o.NodeID},
	}
	c.transport.EnsureDefaults()
	c.membership.EnsureDefaults()
	c.store.EnsureDefaults()
	return c
}

// feeds maps a component's field to the Options field it is derived from
// (see components), to name the Options field in Validate's errors.
func (o Options) feeds(component, field string) string {
	var m map[string]string
	switch component {
	case "replica":
		m = map[string]string{"ID": "NodeID", "Voters": "Voters", "FetchTimeout": "FetchTimeout", "ElectionTimeout": "ElectionTimeout",
			"FetchMaxWait": "FetchMaxWait", "FetchMaxBytes": "FetchMaxBytes", "MaxRecordSize": "MaxRecordSize",
			"DedupWindow": "DedupWindow", "ProducerIdleTimeout": "ProducerIdleTimeout"}
	case "transport":
		m = map[string]string{"NodeID": "NodeID", "ClusterID": "ClusterID", "ListenAddr": "RPCAddr", "Secret": "Secret", "TLS": "TLS"}
	case "membership":
		rpc := "RPCAddr"
		if o.AdvertiseRPCAddr != "" {
			rpc = "AdvertiseRPCAddr"
		}
		m = map[string]string{"NodeID": "NodeID", "ClusterID": "ClusterID", "BindAddr": "GossipAddr", "RPCAddr": rpc,
			"Join": "Join", "SecretKey": "GossipKey", "Label": "GossipLabel", "Tuning": "GossipTuning"}
	}
	parts := strings.Split(field, "/")
	for i, p := range parts {
		head, rest := p, ""
		if j := strings.IndexAny(p, ".["); j >= 0 {
			head, rest = p[:j], p[j:]
		}
		if f, ok := m[head]; ok {
			parts[i] = f + rest
		} else {
			return "" // not fed by Options
		}
	}
	return strings.Join(parts, "/")
}

// optionsError is an Options.Validate error that comes from a component's
// Validate: it wraps ErrInvalidOptions and the component's error.
type optionsError struct {
	msg   string
	cause error
}

func (e *optionsError) Error() string   { return e.msg }
func (e *optionsError) Unwrap() []error { return []error{ErrInvalidOptions, e.cause} }

// componentError restates a component's Validate error in Options' terms:
// the Options field that feeds the bad field, then the component's field
// in parentheses.
func (o Options) componentError(component, typ, field, reason string, cause error) error {
	of := o.feeds(component, field)
	if of == "" {
		// A field Options does not feed: a bug in components.
		of = "(derived configuration)"
	}
	return &optionsError{
		msg:   fmt.Sprintf("%v: %s %s (%s.%s.%s)", ErrInvalidOptions, of, reason, component, typ, field),
		cause: cause,
	}
}

// validateComponents checks the configurations derived from d (defaults
// applied) with their own Validate. The parts a node does not start are
// checked too, with stand-ins for the fields only a started part has (a
// listen address, a gossip address, the run-time Resolver), so that for
// example a short Secret or a bad GossipKey is refused whatever else is
// set.
func (d Options) validateComponents() error {
	c := d.components(nil)
	if err := c.replica.Validate(); err != nil {
		var ce *replica.ConfigError
		if errors.As(err, &ce) {
			return d.componentError("replica", "Config", ce.Field, ce.Reason, err)
		}
		return fmt.Errorf("%w: replica: %w", ErrInvalidOptions, err)
	}
	tc := c.transport
	if tc.ListenAddr == "" {
		tc.ListenAddr = DefaultRPCAddr
	}
	tc.Resolver = func(string) (string, bool) { return "", false }
	if err := tc.Validate(); err != nil {
		var ce *transport.ConfigError
		if errors.As(err, &ce) {
			return d.componentError("transport", "TCPConfig", ce.Field, ce.Reason, err)
		}
		return fmt.Errorf("%w: transport: %w", ErrInvalidOptions, err)
	}
	mc := c.membership
	if mc.BindAddr == "" {
		mc.BindAddr = DefaultRPCAddr
	}
	if mc.RPCAddr == "" {
		mc.RPCAddr = DefaultRPCAddr
	}
	if err := mc.Validate(); err != nil {
		var ce *membership.ConfigError
		if errors.As(err, &ce) {
			return d.componentError("membership", "Config", ce.Field, ce.Reason, err)
		}
		return fmt.Errorf("%w: membership: %w", ErrInvalidOptions, err)
	}
	if err := c.store.Validate(); err != nil {
		return fmt.Errorf("%w: storage: %w", ErrInvalidOptions, err)
	}
	return nil
}

// needsTransport reports whether the node talks to other nodes: it does
// unless it is the only voter and nothing names a peer or gossip.
func (o Options) needsTransport() bool {
	single := len(o.Voters) == 0 || (len(o.Voters) == 1 && o.Voters[0] == o.NodeID)
	return !single || len(o.Peers) > 0 || o.GossipAddr != "" || len(o.Join) > 0 || o.RPCAddr != ""
}

// Validate reports the first invalid field, as an error wrapping
// ErrInvalidOptions that names it. It checks the options as Open would use
// them, that is after defaults are applied; it does not modify o. What a
// component owns is checked by the component's Validate on the
// configuration Open derives (see components): the error then names the
// Options field first and the component's field in parentheses
// ("GossipKey 20 bytes, want 16, 24 or 32 (membership.Config.SecretKey)")
// and wraps the component's error too (a *transport.ConfigError or a
// *membership.ConfigError).
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
	if len(d.Join) > 0 && d.GossipAddr == "" {
		return bad("Join", "needs GossipAddr (gossip is off without it)")
	}
	if d.TLSVerifyNodeID && (d.TLS == nil || d.TLS.ClientAuth < tls.VerifyClientCertIfGiven) {
		return bad("TLSVerifyNodeID", "needs TLS with verified client certificates (ClientAuth RequireAndVerifyClientCert)")
	}
	if d.TLS != nil && len(d.TLS.Certificates) == 0 && d.TLS.GetCertificate == nil {
		return bad("TLS", "has no certificate (set Certificates): nodes present it both to serve and to dial")
	}
	if d.RetentionBytes < 0 {
		return bad("RetentionBytes", "is negative (%d); 0 keeps everything", d.RetentionBytes)
	}
	if d.RetentionAge < 0 {
		return bad("RetentionAge", "is negative (%v); 0 keeps everything", d.RetentionAge)
	}
	if d.SegmentBytes < 0 {
		return bad("SegmentBytes", "is negative (%d); 0 means the default", d.SegmentBytes)
	}
	// What the components own (the core's timings, addresses, Secret's
	// length, GossipKey, GossipLabel, GossipTuning) their Validate checks.
	if err := d.validateComponents(); err != nil {
		return err
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
	if err := d.validateAuth(); err != nil {
		return err
	}
	// The ceilings come from the transport's frame, which the core does
	// not know (its Validate checks the rest of these fields).
	if d.FetchMaxBytes <= 0 || d.FetchMaxBytes > maxConfiguredSize {
		return bad("FetchMaxBytes", "must be in (0, %d] (what one transport frame carries), not %d", maxConfiguredSize, d.FetchMaxBytes)
	}
	if d.MaxRecordSize <= 0 || d.MaxRecordSize > maxRecordSize {
		return bad("MaxRecordSize", "must be in (0, %d] (what one transport frame carries, less protocol.EntryOverhead), not %d", maxRecordSize, d.MaxRecordSize)
	}
	return nil
}

// validateAuth checks Secret and Insecure on defaulted options: a node
// that listens (see needsTransport) must authenticate its peers, by Secret
// or mutual TLS, unless the caller opted out with Insecure. (Secret's
// length is the transport's to check: TCPConfig.Validate.)
func (d Options) validateAuth() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: %s %s", ErrInvalidOptions, field, fmt.Sprintf(format, args...))
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
