package membership

import (
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/memberlist"
)

// Config configures a Membership.
type Config struct {
	// NodeID is this node's ID; it is also its memberlist node name.
	// Required.
	NodeID string
	// ClusterID names the cluster. Members advertising another cluster ID
	// are ignored. Required.
	ClusterID string
	// BindAddr is the gossip bind address, "ip:port" (an IP address, not a
	// host name). Port 0 picks a free port; the port actually bound is then
	// advertised. Required.
	BindAddr string
	// AdvertiseAddr, if set, is the "ip:port" other members use to reach
	// this node's gossip (for NAT or a wildcard bind). Port 0 means the
	// bound port; when BindAddr's port is 0, memberlist always advertises
	// the port it bound, whatever this says. Default: the bound address
	// (for a wildcard bind, memberlist picks a private interface address).
	AdvertiseAddr string
	// RPCAddr is this node's replication (transport) address, "host:port",
	// advertised to the other members in the node metadata. Required.
	RPCAddr string
	// Voter says whether this node is a voter (advertised in metadata; it
	// is information for others, not a protocol decision).
	Voter bool
	// Join lists gossip addresses of existing members, joined at New. If
	// none can be reached, New still succeeds (the first node of a cluster
	// has nobody to join) and logs one line at Info; call Join later to
	// retry.
	Join []string
	// SecretKey, if set, encrypts and authenticates gossip (AES, 16, 24 or
	// 32 bytes). Members with another key cannot join. Default: none
	// (plain gossip).
	SecretKey []byte
	// ExtraKeys are further gossip keys this node accepts (decrypts)
	// besides SecretKey, which alone encrypts what it sends: memberlist's
	// keyring with SecretKey as its primary key. Rotating the key goes in
	// rolling restarts, every node at each step before the next: add the
	// new key here (SecretKey old, ExtraKeys [new]); make it SecretKey and
	// keep the old one here (new, [old]); drop it (new). Nodes in adjacent
	// steps each read what the other sends. Each 16, 24 or 32 bytes; only
	// with SecretKey. Default none.
	ExtraKeys [][]byte
	// Label is memberlist's label: gossip carrying another label is
	// refused. At most 255 bytes. Default: ClusterID.
	Label string
	// Tuning sets the failure detector's timings. Zero fields take the
	// values of LAN() (see Tuning.EnsureDefaults).
	Tuning Tuning
	// HintBuffer is the capacity of the Hints channel. When it is full the
	// oldest hint is dropped. Default DefaultHintBuffer (64).
	HintBuffer int
	// Logger receives this package's logs and memberlist's (at the levels
	// memberlist names, less the expected ones: see the package doc).
	// Default: a null logger.
	Logger hclog.Logger
}

// Tuning is memberlist's failure-detection and gossip timing. See
// memberlist.Config for the detailed meaning of each field.
//
// How long failure detection takes: a dead node is probed within about
// (number of members - 1) * ProbeInterval, declared suspect after
// ProbeTimeout (plus indirect probes until the end of that ProbeInterval),
// and dead after the suspicion timeout, SuspicionMult * ProbeInterval *
// max(1, log10(members)) (memberlist may start it longer, up to 6 times,
// and shorten it as other members confirm the suspicion).
type Tuning struct {
	// ProbeInterval is the time between failure probes.
	ProbeInterval time.Duration
	// ProbeTimeout is how long to wait for a probe's ack; must be below
	// ProbeInterval.
	ProbeTimeout time.Duration
	// GossipInterval is the time between gossip rounds.
	GossipInterval time.Duration
	// SuspicionMult scales the suspicion timeout (see above); at least 1.
	SuspicionMult int
	// PushPullInterval is the time between full state syncs with a random
	// member (it also repairs missed gossip, e.g. metadata updates).
	PushPullInterval time.Duration
	// GossipToTheDeadTime is how long a dead node still gets gossip (so it
	// can refute its death).
	GossipToTheDeadTime time.Duration
	// TCPTimeout bounds TCP exchanges (join, push/pull, fallback probes).
	TCPTimeout time.Duration
	// DeadNodeReclaimTime is how long a node must have been dead before a
	// node with the same ID but another gossip address may take its place
	// (a restart on a new port). Until then the others keep the old
	// address (memberlist's name conflict, logged at Debug); the restarted
	// node itself starts, since its old address no longer answers (see
	// the package doc). A node that left gracefully may always be
	// replaced at once.
	DeadNodeReclaimTime time.Duration
	// BroadcastTimeout bounds how long SetLeader and Leave wait for their
	// broadcast to go out.
	BroadcastTimeout time.Duration
}

// LAN returns timings for a local network, memberlist's LAN defaults: a
// crashed node is declared dead after roughly 5-10 s in a small cluster.
func LAN() Tuning {
	return Tuning{
		ProbeInterval:       time.Second,
		ProbeTimeout:        500 * time.Millisecond,
		GossipInterval:      200 * time.Millisecond,
		SuspicionMult:       4,
		PushPullInterval:    30 * time.Second,
		GossipToTheDeadTime: 30 * time.Second,
		TCPTimeout:          10 * time.Second,
		DeadNodeReclaimTime: 10 * time.Second,
		BroadcastTimeout:    5 * time.Second,
	}
}

// FastForTests returns timings for tests and single-host clusters on
// loopback: a crashed node of a three-node cluster is declared dead in
// about 0.5 s (probe within 200 ms, 50 ms probe timeout, 200 ms
// suspicion). On a loaded machine it may also suspect live nodes, which
// then refute; the resulting spurious hints are harmless because hints are
// advisory.
func FastForTests() Tuning {
	return Tuning{
		ProbeInterval:       100 * time.Millisecond,
		ProbeTimeout:        50 * time.Millisecond,
		GossipInterval:      20 * time.Millisecond,
		SuspicionMult:       2,
		PushPullInterval:    time.Second,
		GossipToTheDeadTime: time.Second,
		TCPTimeout:          2 * time.Second,
		DeadNodeReclaimTime: 200 * time.Millisecond,
		BroadcastTimeout:    2 * time.Second,
	}
}

// EnsureDefaults sets t's zero fields to LAN()'s values.
func (t *Tuning) EnsureDefaults() {
	d := LAN()
	setDur := func(v *time.Duration, def time.Duration) {
		if *v == 0 {
			*v = def
		}
	}
	setDur(&t.ProbeInterval, d.ProbeInterval)
	setDur(&t.ProbeTimeout, d.ProbeTimeout)
	setDur(&t.GossipInterval, d.GossipInterval)
	setDur(&t.PushPullInterval, d.PushPullInterval)
	setDur(&t.GossipToTheDeadTime, d.GossipToTheDeadTime)
	setDur(&t.TCPTimeout, d.TCPTimeout)
	setDur(&t.DeadNodeReclaimTime, d.DeadNodeReclaimTime)
	setDur(&t.BroadcastTimeout, d.BroadcastTimeout)
	if t.SuspicionMult == 0 {
		t.SuspicionMult = d.SuspicionMult
	}
}

// EnsureDefaults sets c's zero optional fields to their defaults (named on
// each field): Label, HintBuffer, Tuning and Logger. New calls it on its
// own copy of the config.
func (c *Config) EnsureDefaults() {
	if c.Label == "" {
		c.Label = c.ClusterID
	}
	if c.HintBuffer == 0 {
		c.HintBuffer = DefaultHintBuffer
	}
	c.Tuning.EnsureDefaults()
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
}

// ConfigError is the error Config.Validate returns: which field is bad and
// why. It wraps ErrInvalidConfig, and Err if set.
type ConfigError struct {
	// Field is the bad field's path in Config: "BindAddr", "Join[1]",
	// "Tuning.ProbeTimeout"; fields that are only bad together are joined
	// with '/' ("NodeID/ClusterID/RPCAddr").
	Field string
	// Reason says what is wrong with it.
	Reason string
	// Err is a more specific cause (ErrMetaTooLarge), or nil.
	Err error
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("%v: %s: %s", ErrInvalidConfig, e.Field, e.Reason)
}

// Unwrap returns ErrInvalidConfig, and Err if set.
func (e *ConfigError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrInvalidConfig, e.Err}
	}
	return []error{ErrInvalidConfig}
}

// Validate checks c and returns a *ConfigError (wrapping ErrInvalidConfig)
// that names the first bad field. Defaults are applied first (to a copy:
// c is not modified), so zero optional fields are valid.
func (c Config) Validate() error {
	bad := func(field, format string, args ...any) error {
		return &ConfigError{Field: field, Reason: fmt.Sprintf(format, args...)}
	}
	if c.NodeID == "" {
		return bad("NodeID", "empty")
	}
	if c.ClusterID == "" {
		return bad("ClusterID", "empty")
	}
	if c.Label == "" && len(c.ClusterID) > memberlist.LabelMaxSize {
		return bad("ClusterID", "%d bytes is too long to be the default Label (limit %d); set Label",
			len(c.ClusterID), memberlist.LabelMaxSize)
	}
	if c.HintBuffer < 0 {
		return bad("HintBuffer", "negative")
	}
	c.EnsureDefaults() // c is a copy
	if _, _, err := splitIPPort(c.BindAddr); err != nil {
		return bad("BindAddr", "%v", err)
	}
	if c.AdvertiseAddr != "" {
		if _, _, err := splitIPPort(c.AdvertiseAddr); err != nil {
			return bad("AdvertiseAddr", "%v", err)
		}
	}
	if c.RPCAddr == "" {
		return bad("RPCAddr", "empty")
	}
	if _, _, err := net.SplitHostPort(c.RPCAddr); err != nil {
		return bad("RPCAddr", "%v", err)
	}
	for i, s := range c.Join {
		if _, _, err := net.SplitHostPort(s); err != nil {
			return bad(fmt.Sprintf("Join[%d]", i), "%v", err)
		}
	}
	switch len(c.SecretKey) {
	case 0, 16, 24, 32:
	default:
		return bad("SecretKey", "%d bytes, want 16, 24 or 32", len(c.SecretKey))
	}
	for i, k := range c.ExtraKeys {
		switch {
		case len(c.SecretKey) == 0:
			return bad("ExtraKeys", "set without SecretKey (it encrypts; the extra keys only decrypt)")
		case len(k) != 16 && len(k) != 24 && len(k) != 32:
			return bad(fmt.Sprintf("ExtraKeys[%d]", i), "%d bytes, want 16, 24 or 32", len(k))
		}
	}
	if len(c.Label) > memberlist.LabelMaxSize {
		return bad("Label", "%d bytes, limit %d", len(c.Label), memberlist.LabelMaxSize)
	}
	t := c.Tuning
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"Tuning.ProbeInterval", t.ProbeInterval},
		{"Tuning.ProbeTimeout", t.ProbeTimeout},
		{"Tuning.GossipInterval", t.GossipInterval},
		{"Tuning.PushPullInterval", t.PushPullInterval},
		{"Tuning.GossipToTheDeadTime", t.GossipToTheDeadTime},
		{"Tuning.TCPTimeout", t.TCPTimeout},
		{"Tuning.DeadNodeReclaimTime", t.DeadNodeReclaimTime},
		{"Tuning.BroadcastTimeout", t.BroadcastTimeout},
	} {
		if d.v < 0 {
			return bad(d.name, "negative (%v)", d.v)
		}
	}
	if t.SuspicionMult < 1 {
		return bad("Tuning.SuspicionMult", "%d, want at least 1", t.SuspicionMult)
	}
	if t.ProbeTimeout >= t.ProbeInterval {
		return bad("Tuning.ProbeTimeout", "%v, must be below ProbeInterval (%v)", t.ProbeTimeout, t.ProbeInterval)
	}
	meta := nodeMeta{NodeID: c.NodeID, ClusterID: c.ClusterID, RPCAddr: c.RPCAddr, Voter: c.Voter}
	if _, err := meta.encode(); err != nil {
		// Both sentinels: it is a config error and a metadata-size one.
		return &ConfigError{Field: "NodeID/ClusterID/RPCAddr", Reason: err.Error(), Err: err}
	}
	return nil
}

// keyring returns memberlist's keyring for c: SecretKey primary, the
// extra keys accepted; nil without extra keys (memberlist then makes its
// own of SecretKey). The keys are copied: the keyring keeps what it is
// given.
func (c Config) keyring() (*memberlist.Keyring, error) {
	if len(c.ExtraKeys) == 0 {
		return nil, nil
	}
	keys := make([][]byte, 0, len(c.ExtraKeys))
	for _, k := range c.ExtraKeys {
		keys = append(keys, append([]byte(nil), k...))
	}
	return memberlist.NewKeyring(keys, append([]byte(nil), c.SecretKey...))
}

// splitIPPort parses "ip:port" with a literal IP (memberlist binds and
// advertises IP addresses only).
func splitIPPort(s string) (string, int, error) {
	host, p, err := net.SplitHostPort(s)
	if err != nil {
		return "", 0, err
	}
	if net.ParseIP(host) == nil {
		return "", 0, fmt.Errorf("%q is not an IP address", host)
	}
	port, err := strconv.ParseUint(p, 10, 16)
	if err != nil {
		return "", 0, fmt.Errorf("bad port %q", p)
	}
	return host, int(port), nil
}
