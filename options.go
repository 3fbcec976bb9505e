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
//
// For OpenNode, Options configure the node and its default log. Per log
// (each named log has its own, from its LogOptions, docs/logs.md):
// RetentionBytes, RetentionAge, SegmentBytes, DedupWindow,
// ProducerIdleTimeout, DisableIdempotence, MaxRecordSize, FetchMaxBytes,
// CatchUpBytesPerSecond and MaxUncommittedBytes here are the default
// log's. Every other field is the node's, shared by all its logs; Voters
// are the default log's voters, among which each named log's replicas are
// chosen.
type Options struct {
	// Dir is the node's data directory, owned by the storage package
	// (storage.OpenDir): the log as bbolt segment files (the active one,
	// replog.db, and the sealed ones, replog-<base>.seg, rolled at
	// SegmentBytes) and the identity file (replog.identity, which records
	// ClusterID and NodeID when the directory is created; Open refuses a
	// directory of another cluster or node). Created if missing. Required.
	Dir string
	// NodeID names this node; unique in the cluster. Default "node1".
	NodeID string
	// ClusterID must match on every node; connections from another cluster
	// are refused. Default "replog".
	ClusterID string
	// Voters is the bootstrap voter set: the voters of a brand-new cluster
	// (docs/protocol.md R57). Its first election needs every one of them up
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
	// Listener, if set, is the RPC listener: Open serves the transport on
	// it instead of listening on RPCAddr, so that a node's address is
	// known before Open (bind "127.0.0.1:0", give the address to the
	// other nodes' Peers) with no listen-and-close race for a free port.
	// Open owns it: Close closes it, and so does Open when it fails. Its
	// address is advertised unless AdvertiseRPCAddr is set; RPCAddr must
	// be empty (it then defaults to the listener's address) or that
	// address. The gossip port takes no listener (memberlist's transport
	// binds its own TCP and UDP sockets): GossipAddr with port 0 binds a
	// free one, Status.GossipAddr says which, and Join needs only a
	// running member's. Default nil.
	Listener net.Listener
	// Peers maps node IDs to RPC addresses statically. Addresses learned by
	// gossip are used for IDs not listed here. A node with an empty
	// directory asks each of them before it bootstraps (R60, see Voters).
	// Default: none.
	Peers map[string]string
	// TLS, if set, secures the transport. It is used both to serve (set
	// Certificates, and ClientCAs with ClientAuth for mutual TLS) and to
	// dial (RootCAs). GetCertificate serves only: with mutual TLS set
	// Certificates or GetClientCertificate too, which Validate checks.
	// Nil means plain TCP.
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
	// NextSecret, if set, is a second cluster secret this node accepts
	// besides Secret, to rotate the secret without an outage: a peer that
	// proves either is let in (this node proves Secret), and gossip under
	// the key derived from NextSecret is read besides GossipKey's (which
	// encrypts; by default Secret's). A rotation from A to B is three rolling
	// restarts, every node done before the next: Secret A with NextSecret
	// B; then Secret B with NextSecret A; then B alone
	// (docs/upgrading.md). At least MinSecretLen bytes, and only with
	// Secret. Default none.
	NextSecret []byte
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
	// replica.fetch.wait.max.ms). Default 150ms: an idle follower fetches
	// about 7 times a second.
	FetchMaxWait time.Duration
	// FetchTimeout: a voter that has not fetched successfully for this
	// long starts an election; a leader without fetches from a majority for
	// this long resigns. Default 700ms. Must be at least
	// 2*(FetchMaxWait+ElectionTimeout): a follower retries a fetch after
	// FetchMaxWait+ElectionTimeout without an answer, and the retry may be
	// parked for FetchMaxWait too, so only then does one lost fetch or
	// answer not cost leader contact (and set off an election).
	FetchTimeout time.Duration
	// ElectionTimeout is the base of randomised election timeouts.
	// Default 200ms. A silent leader is replaced FetchTimeout plus a
	// random part of ElectionTimeout after its followers last heard from
	// it (0.7 to 0.9s with the defaults); one whose connections close
	// (its process died) within about half an ElectionTimeout
	// (docs/protocol.md R69).
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
	// CatchUpBytesPerSecond is the leader's replication quota
	// (docs/protocol.md R73; Kafka's leader.replication.throttled.rate):
	// the entry bytes per second it serves, all together, to nodes
	// catching up (fetching below its high watermark: an observer or a
	// wiped node starting from empty, a voter back after a long absence)
	// whose progress no commit waits for, so that their catch-up leaves
	// disk and CPU to the appends. Nodes in step, and a voter without
	// which no majority is in step, are never throttled. Default
	// DefaultCatchUpBytesPerSecond (32 MiB/s); negative: no quota.
	CatchUpBytesPerSecond int
	// MaxUncommittedBytes bounds the leader's uncommitted backlog
	// (docs/protocol.md R74): the bytes of the records it appended and has
	// not yet committed. An append that would take it over the bound
	// waits: Append, AppendBatch and AppendAsync try again (as while no
	// leader is known) until it fits, their context ends or the Log
	// closes; nothing is appended meanwhile. An append arriving while the
	// backlog is empty goes through whatever its size. Default
	// DefaultMaxUncommittedBytes (64 MiB); negative: no bound.
	MaxUncommittedBytes int

	// DedupWindow: an append WithID whose ID was appended within this
	// window is not appended again; it returns the original's offset and
	// ErrDuplicate (docs/protocol.md R64; NATS JetStream's duplicate window).
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
	// MaxFeatureLevel holds the cluster feature level (docs/protocol.md
	// R68): as leader, this node raises it no higher. Default 0: the
	// leader raises it on its own as far as every voter and observer
	// supports. protocol.BaseFeatureLevel (6) keeps the cluster where it
	// started, so that any node can still go back to the previous release;
	// lift it in a later rolling restart. Otherwise at least 6 (Validate).
	// It never lowers a level already raised (Status.FeatureLevel).
	MaxFeatureLevel int

	// RetentionBytes, when positive, keeps the log to about this many bytes
	// on disk: while this node leads, the oldest whole segment files go
	// while the segments together hold more (Kafka's retention.bytes). A
	// node keeps up to one segment more than the bound, plus the active
	// one. The bound counts segment files: with the commit journal
	// (feature level 7) up to a quarter of its size (2 MiB) may wait in
	// the journal before it reaches a segment, and the journal's file
	// is preallocated whatever the log holds. Default 0: keep everything
	// (the only safe default for a library).
	RetentionBytes int64
	// RetentionAge, when positive, deletes whole segment files whose newest
	// entry the leader appended longer ago than this (Kafka's
	// retention.ms; Entry.Time). The active segment is never deleted: with
	// a slow log, lower SegmentBytes. Default 0: off.
	RetentionAge time.Duration
	// Compaction makes the log a compacted log (docs/protocol.md R103):
	// below its lag, of the entries with a key (WithKey) only the newest
	// of each key stays, and a tombstone only for its retention. Each
	// node compacts its own sealed segments in the background; see
	// Compaction for the fields and their defaults. It needs a data
	// directory (Dir) and feature level 10; below it no entry has a key
	// and a pass drops nothing. Default: off.
	Compaction Compaction
	// RetainUntilSnapshot keeps the service's state rebuildable on this
	// node (docs/protocol.md R87): the retention policies (as leader) and
	// DeleteBefore never ask to move the log start above this node's
	// newest snapshot's offset (Log.SaveSnapshot), and delete nothing
	// while it has none. It bounds this node's own requests: followers
	// follow the leader's log start, and a leader takes a follower's
	// DeleteBefore, so set it on every node. Default false.
	RetainUntilSnapshot bool
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
	// Load that must not hurt the commit path (R73, R74).
	DefaultCatchUpBytesPerSecond = replica.DefaultCatchUpBytesPerSecond
	DefaultMaxUncommittedBytes   = replica.DefaultMaxUncommittedBytes
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
	if o.RPCAddr == "" && o.Listener != nil {
		o.RPCAddr = o.Listener.Addr().String()
	}
	if o.RPCAddr == "" && o.needsTransport() {
		o.RPCAddr = DefaultRPCAddr
	}
	if o.CloseTransferTimeout == 0 {
		o.CloseTransferTimeout = DefaultCloseTransferTimeout
	}
	// The core's timings and sizes take the core's defaults
	// (replica.Config.EnsureDefaults), written back because the root uses
	// them too (MaxRecordSize in AppendBatch, the ceilings in Validate):
	// the core's rows of derivations, there and back.
	var c components
	for _, d := range derivations {
		if d.component == coreConfig && d.applies(o) {
			d.set(&c, o)
		}
	}
	c.replica.EnsureDefaults()
	for _, d := range derivations {
		if d.component == coreConfig && d.back != nil && d.applies(o) {
			d.back(o, &c)
		}
	}
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
	if o.NextSecret != nil {
		o.NextSecret = append([]byte(nil), o.NextSecret...)
	}
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

// The components' names in derivations and in Validate's errors: their
// package and type.
const (
	coreConfig       = "replica.Config"
	transportConfig  = "transport.TCPConfig"
	membershipConfig = "membership.Config"
	storeConfig      = "storage.DirOptions"
	identityConfig   = "storage.Identity"
)

// derivation is one component field fed by an Options field: the names of
// both (what Validate's errors say) and the assignment. components applies
// every row; a component's Validate error is restated in Options' terms by
// looking its field up here (Options.optionFor), so the field that is set
// and the name an error gives it come from the same row.
type derivation struct {
	option    string // the Options field
	component string // coreConfig, transportConfig, ...
	field     string // the component's field
	// when, if not nil, says whether the row applies to o: a component
	// field fed by one Options field or, failing it, another.
	when func(o *Options) bool
	set  func(c *components, o *Options)
	// back, if not nil, copies the component's field back into the Options
	// field; EnsureDefaults uses it on the core's rows to take the core's
	// defaults.
	back func(o *Options, c *components)
}

func (d derivation) applies(o *Options) bool { return d.when == nil || d.when(o) }

// copied is the derivation of a component field that holds the Options
// field's value as it is; at returns the two fields.
func copied[T any](option, component, field string, at func(o *Options, c *components) (from, to *T)) derivation {
	return derivation{
		option: option, component: component, field: field,
		set:  func(c *components, o *Options) { from, to := at(o, c); *to = *from },
		back: func(o *Options, c *components) { from, to := at(o, c); *from = *to },
	}
}

// derivations says which Options field feeds which component field: the
// one place to add an Options field that a component uses (a row here;
// Validate's errors then name it, and options_test checks the row).
// What components sets from no Options field (the loggers, the core's
// MaxForwardBytes) it sets itself.
var derivations = []derivation{
	copied("NodeID", coreConfig, "ID", func(o *Options, c *components) (*string, *string) { return &o.NodeID, &c.replica.ID }),
	copied("Voters", coreConfig, "Voters", func(o *Options, c *components) (*[]string, *[]string) { return &o.Voters, &c.replica.Voters }),
	copied("FetchTimeout", coreConfig, "FetchTimeout", func(o *Options, c *components) (*time.Duration, *time.Duration) {
		return &o.FetchTimeout, &c.replica.FetchTimeout
	}),
	copied("ElectionTimeout", coreConfig, "ElectionTimeout", func(o *Options, c *components) (*time.Duration, *time.Duration) {
		return &o.ElectionTimeout, &c.replica.ElectionTimeout
	}),
	copied("FetchMaxWait", coreConfig, "FetchMaxWait", func(o *Options, c *components) (*time.Duration, *time.Duration) {
		return &o.FetchMaxWait, &c.replica.FetchMaxWait
	}),
	copied("FetchMaxBytes", coreConfig, "FetchMaxBytes", func(o *Options, c *components) (*int, *int) { return &o.FetchMaxBytes, &c.replica.FetchMaxBytes }),
	copied("MaxRecordSize", coreConfig, "MaxRecordSize", func(o *Options, c *components) (*int, *int) { return &o.MaxRecordSize, &c.replica.MaxRecordSize }),
	copied("CatchUpBytesPerSecond", coreConfig, "CatchUpBytesPerSecond", func(o *Options, c *components) (*int, *int) {
		return &o.CatchUpBytesPerSecond, &c.replica.CatchUpBytesPerSecond
	}),
	copied("MaxUncommittedBytes", coreConfig, "MaxUncommittedBytes", func(o *Options, c *components) (*int, *int) {
		return &o.MaxUncommittedBytes, &c.replica.MaxUncommittedBytes
	}),
	copied("DedupWindow", coreConfig, "DedupWindow", func(o *Options, c *components) (*time.Duration, *time.Duration) {
		return &o.DedupWindow, &c.replica.DedupWindow
	}),
	copied("ProducerIdleTimeout", coreConfig, "ProducerIdleTimeout", func(o *Options, c *components) (*time.Duration, *time.Duration) {
		return &o.ProducerIdleTimeout, &c.replica.ProducerIdleTimeout
	}),
	copied("ManualVoterChanges", coreConfig, "ManualVoterChanges", func(o *Options, c *components) (*bool, *bool) {
		return &o.ManualVoterChanges, &c.replica.ManualVoterChanges
	}),
	copied("MaxFeatureLevel", coreConfig, "MaxFeatureLevel", func(o *Options, c *components) (*int, *int) {
		return &o.MaxFeatureLevel, &c.replica.MaxFeatureLevel
	}),

	copied("NodeID", transportConfig, "NodeID", func(o *Options, c *components) (*string, *string) { return &o.NodeID, &c.transport.NodeID }),
	// The node's heartbeats keep an idle follower's contact as its
	// fetches did, one per FetchMaxWait, and its silence counts after
	// FetchTimeout as a leader's does (R98, R99).
	copied("FetchMaxWait", transportConfig, "HeartbeatInterval", func(o *Options, c *components) (*time.Duration, *time.Duration) {
		return &o.FetchMaxWait, &c.transport.HeartbeatInterval
	}),
	copied("FetchTimeout", transportConfig, "ContactTimeout", func(o *Options, c *components) (*time.Duration, *time.Duration) {
		return &o.FetchTimeout, &c.transport.ContactTimeout
	}),
	copied("ClusterID", transportConfig, "ClusterID", func(o *Options, c *components) (*string, *string) { return &o.ClusterID, &c.transport.ClusterID }),
	copied("RPCAddr", transportConfig, "ListenAddr", func(o *Options, c *components) (*string, *string) { return &o.RPCAddr, &c.transport.ListenAddr }),
	copied("Listener", transportConfig, "Listener", func(o *Options, c *components) (*net.Listener, *net.Listener) {
		return &o.Listener, &c.transport.Listener
	}),
	copied("Secret", transportConfig, "Secret", func(o *Options, c *components) (*[]byte, *[]byte) { return &o.Secret, &c.transport.Secret }),
	copied("NextSecret", transportConfig, "NextSecret", func(o *Options, c *components) (*[]byte, *[]byte) { return &o.NextSecret, &c.transport.NextSecret }),
	copied("TLS", transportConfig, "TLS", func(o *Options, c *components) (**tls.Config, **tls.Config) { return &o.TLS, &c.transport.TLS }),
	{option: "TLSVerifyNodeID", component: transportConfig, field: "VerifyPeer", set: func(c *components, o *Options) {
		if o.TLSVerifyNodeID {
			c.transport.VerifyPeer = transport.VerifyCertNamesNode
		}
	}},

	copied("NodeID", membershipConfig, "NodeID", func(o *Options, c *components) (*string, *string) { return &o.NodeID, &c.membership.NodeID }),
	copied("ClusterID", membershipConfig, "ClusterID", func(o *Options, c *components) (*string, *string) { return &o.ClusterID, &c.membership.ClusterID }),
	copied("GossipAddr", membershipConfig, "BindAddr", func(o *Options, c *components) (*string, *string) { return &o.GossipAddr, &c.membership.BindAddr }),
	// The address gossip advertises: AdvertiseRPCAddr, else RPCAddr (Open
	// puts the transport's bound address there once it has one).
	{option: "AdvertiseRPCAddr", component: membershipConfig, field: "RPCAddr",
		when: func(o *Options) bool { return o.AdvertiseRPCAddr != "" },
		set:  func(c *components, o *Options) { c.membership.RPCAddr = o.AdvertiseRPCAddr }},
	{option: "RPCAddr", component: membershipConfig, field: "RPCAddr",
		when: func(o *Options) bool { return o.AdvertiseRPCAddr == "" },
		set:  func(c *components, o *Options) { c.membership.RPCAddr = o.RPCAddr }},
	{option: "Voters", component: membershipConfig, field: "Voter", set: func(c *components, o *Options) {
		c.membership.Voter = slices.Contains(o.Voters, o.NodeID)
	}},
	copied("Join", membershipConfig, "Join", func(o *Options, c *components) (*[]string, *[]string) { return &o.Join, &c.membership.Join }),
	copied("GossipKey", membershipConfig, "SecretKey", func(o *Options, c *components) (*[]byte, *[]byte) { return &o.GossipKey, &c.membership.SecretKey }),
	// Gossip under NextSecret's key is read too (what Secret's key is to
	// GossipKey's default).
	{option: "NextSecret", component: membershipConfig, field: "ExtraKeys",
		when: func(o *Options) bool { return len(o.NextSecret) > 0 },
		set:  func(c *components, o *Options) { c.membership.ExtraKeys = [][]byte{deriveGossipKey(o.NextSecret)} }},
	copied("GossipLabel", membershipConfig, "Label", func(o *Options, c *components) (*string, *string) { return &o.GossipLabel, &c.membership.Label }),
	copied("GossipTuning", membershipConfig, "Tuning", func(o *Options, c *components) (*membership.Tuning, *membership.Tuning) {
		return &o.GossipTuning, &c.membership.Tuning
	}),

	copied("NoSync", storeConfig, "NoSync", func(o *Options, c *components) (*bool, *bool) { return &o.NoSync, &c.store.NoSync }),
	copied("SegmentBytes", storeConfig, "SegmentBytes", func(o *Options, c *components) (*int64, *int64) { return &o.SegmentBytes, &c.store.SegmentBytes }),

	copied("ClusterID", identityConfig, "ClusterID", func(o *Options, c *components) (*string, *string) { return &o.ClusterID, &c.identity.ClusterID }),
	copied("NodeID", identityConfig, "NodeID", func(o *Options, c *components) (*string, *string) { return &o.NodeID, &c.identity.NodeID }),
}

// components derives every part's configuration from o (defaults applied:
// see withDefaults) by the rows of derivations. Each configuration then has
// its own defaults applied (their EnsureDefaults; replica.New applies the
// core's). Left for Open to fill, because they exist only at run time: the
// transport's Resolver, the replica's Rand, and, when AdvertiseRPCAddr is
// empty, membership's RPCAddr (the transport's bound address; RPCAddr until
// then). logger is the node's logger (nil: a null logger).
func (o Options) components(logger hclog.Logger) components {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	var c components
	for _, d := range derivations {
		if d.applies(&o) {
			d.set(&c, &o)
		}
	}
	// Not fed by Options: the loggers, and the largest batch a follower
	// forwards (what the transport's frame carries).
	c.replica.Logger, c.transport.Logger, c.membership.Logger = logger, logger, logger
	c.store.Logger = logger.Named("storage")
	c.replica.MaxForwardBytes = maxConfiguredSize
	c.transport.EnsureDefaults()
	c.membership.EnsureDefaults()
	c.store.EnsureDefaults()
	return c
}

// optionFor names the Options field that feeds field of component on o,
// field being a component's path as its Validate names it ("Tuning.ProbeTimeout",
// "Join[1]", or several joined by '/': "NodeID/ClusterID/RPCAddr"). It
// returns "" if some part is fed by no Options field.
func (o *Options) optionFor(component, field string) string {
	parts := strings.Split(field, "/")
	for i, p := range parts {
		head, rest := p, ""
		if j := strings.IndexAny(p, ".["); j >= 0 {
			head, rest = p[:j], p[j:]
		}
		name := ""
		for _, d := range derivations {
			if d.component == component && d.field == head && d.applies(o) {
				name = d.option
				break
			}
		}
		if name == "" {
			return ""
		}
		parts[i] = name + rest
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
func (o Options) componentError(component, field, reason string, cause error) error {
	of := o.optionFor(component, field)
	if of == "" {
		// A field no row of derivations feeds (the loggers,
		// MaxForwardBytes): a bug in components.
		of = "(derived configuration)"
	}
	return &optionsError{
		msg:   fmt.Sprintf("%v: %s %s (%s.%s)", ErrInvalidOptions, of, reason, component, field),
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
			return d.componentError(coreConfig, ce.Field, ce.Reason, err)
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
			return d.componentError(transportConfig, ce.Field, ce.Reason, err)
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
			return d.componentError(membershipConfig, ce.Field, ce.Reason, err)
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
	// GetCertificate serves only: a dialer presents Certificates or
	// GetClientCertificate's, and under mutual TLS one with neither is
	// refused by every peer, which would show only as failed handshakes.
	if d.TLS != nil && d.TLS.ClientAuth >= tls.RequireAnyClientCert && len(d.TLS.Certificates) == 0 && d.TLS.GetClientCertificate == nil {
		return bad("TLS", "requires client certificates (ClientAuth %v) but sets only GetCertificate, which serves: set Certificates or GetClientCertificate too, so that the node presents one when it dials", d.TLS.ClientAuth)
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
	if err := d.Compaction.validate(bad); err != nil {
		return err
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
