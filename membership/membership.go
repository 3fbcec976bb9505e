package membership

import (
	"context"
	"errors"
	"fmt"
	"log"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/memberlist"
)

// Errors.
var (
	// ErrInvalidConfig wraps every Config.Validate error.
	ErrInvalidConfig = errors.New("replog: invalid membership config")
	// ErrMetaTooLarge: the node metadata would exceed MaxMetaSize.
	ErrMetaTooLarge = errors.New("replog: membership metadata too large")
	// ErrBadMeta: node metadata could not be decoded.
	ErrBadMeta = errors.New("replog: malformed membership metadata")
	// ErrClosed: the Membership has left the cluster or been closed.
	ErrClosed = errors.New("replog: membership closed")
	// ErrBroadcastTimeout: an update or leave message was not broadcast
	// within Tuning.BroadcastTimeout. The local state has changed anyway
	// and still spreads through gossip and push/pull syncs.
	ErrBroadcastTimeout = errors.New("replog: membership broadcast timed out")
	// ErrJoin: no seed could be joined.
	ErrJoin = errors.New("replog: could not join any gossip seed")
	// ErrDuplicateNodeID: New found another live member using this
	// node's ID (at another gossip address): two processes claim one node
	// ID, which would break replication. Nothing was started.
	ErrDuplicateNodeID = errors.New("replog: another live process uses this node ID")
)

// HintKind says what a Hint reports.
type HintKind uint8

// Hint kinds.
const (
	// NodeFailed: gossip declared Node dead, or it left gracefully; Epoch
	// is the epoch Node last advertised. Gossip may be wrong (a slow node
	// can be declared dead and then refute).
	NodeFailed HintKind = iota + 1
	// LeaderClaim: Node advertises that it leads Epoch (only self-claims
	// count; a member repeating whom it follows does not). A claim is to be
	// verified by fetching from Node, never trusted.
	LeaderClaim
	// MemberJoined: Node joined (or came back to life). A node whose log
	// holds no voter set asks every member it knows of whether a cluster
	// exists before it bootstraps one (docs/protocol.md R60).
	MemberJoined
)

// String returns "node-failed", "leader-claim", "member-joined" or
// "hint(N)".
func (k HintKind) String() string {
	switch k {
	case NodeFailed:
		return "node-failed"
	case LeaderClaim:
		return "leader-claim"
	case MemberJoined:
		return "member-joined"
	}
	return fmt.Sprintf("hint(%d)", uint8(k))
}

// Hint is one piece of advisory information gossip gives about another
// node (never about this node itself).
type Hint struct {
	Kind  HintKind
	Node  string
	Epoch uint64
}

// DefaultHintBuffer is the default capacity of the Hints channel.
const DefaultHintBuffer = 64

// Member is what this node knows about a cluster member.
type Member struct {
	// ID is the member's node ID.
	ID string
	// RPCAddr is the replication address it advertises.
	RPCAddr string
	// GossipAddr is its memberlist address ("ip:port").
	GossipAddr string
	// Voter is the voter flag it advertises.
	Voter bool
	// LeaderID and Epoch are the leader and epoch it last advertised
	// knowing ("" and 0 if none).
	LeaderID string
	Epoch    uint64
	// Alive is gossip's opinion: false once the member has been declared
	// dead or has left (until it comes back).
	Alive bool
}

// Membership is one node's membership in the gossip cluster. Its methods
// are safe for concurrent use.
type Membership struct {
	cfg        Config
	tuning     Tuning
	logger     hclog.Logger
	list       *memberlist.Memberlist
	gossipAddr string

	// lifeMu: calls into memberlist hold it for reading; Close and Leave
	// state changes hold it for writing, so memberlist is never used after
	// Shutdown (its Leave panics then) and nothing re-advertises after Leave.
	lifeMu  sync.RWMutex
	left    bool
	stopped bool

	// setMu serialises SetLeader so metadata updates go out in order.
	setMu sync.Mutex

	// metaMu guards metaBytes, read by memberlist through NodeMeta.
	metaMu    sync.Mutex
	meta      nodeMeta
	metaBytes []byte

	// mu guards the member table and the hints channel's producer side.
	mu      sync.Mutex
	members map[string]Member
	hints   chan Hint
	closed  bool
	dropped uint64

	// closing is set when Close begins: from then on memberlist's
	// complaints about its own closed sockets are expected (conflict.go).
	closing atomic.Bool
	// conflicts: other gossip addresses claiming this node's ID
	// (conflict.go).
	conflicts conflictState
}

// New validates cfg, starts memberlist on cfg.BindAddr and joins cfg.Join.
// Failing to reach every seed is not an error (see Config.Join); joining
// blocks up to Tuning.TCPTimeout per unreachable seed.
func New(cfg Config) (*Membership, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.EnsureDefaults() // cfg is New's copy: the caller's is untouched
	logger := cfg.Logger.Named("membership")
	t, hintBuf, label := cfg.Tuning, cfg.HintBuffer, cfg.Label

	meta := nodeMeta{NodeID: cfg.NodeID, ClusterID: cfg.ClusterID, RPCAddr: cfg.RPCAddr, Voter: cfg.Voter}
	metaBytes, err := meta.encode()
	if err != nil {
		return nil, err // unreachable: Validate checked it
	}
	m := &Membership{
		cfg:       cfg,
		tuning:    t,
		logger:    logger,
		meta:      meta,
		metaBytes: metaBytes,
		members:   make(map[string]Member),
		hints:     make(chan Hint, hintBuf),
	}

	host, port, _ := splitIPPort(cfg.BindAddr) // validated
	mc := memberlist.DefaultLANConfig()
	mc.Name = cfg.NodeID
	mc.BindAddr = host
	mc.BindPort = port
	mc.AdvertisePort = port
	if cfg.AdvertiseAddr != "" {
		ah, ap, _ := splitIPPort(cfg.AdvertiseAddr) // validated
		mc.AdvertiseAddr = ah
		if ap != 0 {
			// Ignored by memberlist when BindPort is 0: it then advertises
			// the port it bound.
			mc.AdvertisePort = ap
		}
	}
	mc.Label = label
	mc.SecretKey = cfg.SecretKey
	if mc.Keyring, err = cfg.keyring(); err != nil {
		return nil, fmt.Errorf("replog: membership: keyring: %w", err)
	}
	mc.Delegate = (*delegate)(m)
	mc.Events = (*delegate)(m)
	mc.Conflict = (*delegate)(m)
	mc.Logger = log.New(&memberlistLog{m: m, log: logger.Named("memberlist")}, "", 0)
	mc.ProbeInterval = t.ProbeInterval
	mc.ProbeTimeout = t.ProbeTimeout
	mc.GossipInterval = t.GossipInterval
	mc.SuspicionMult = t.SuspicionMult
	mc.PushPullInterval = t.PushPullInterval
	mc.GossipToTheDeadTime = t.GossipToTheDeadTime
	mc.TCPTimeout = t.TCPTimeout
	mc.DeadNodeReclaimTime = t.DeadNodeReclaimTime

	list, err := memberlist.Create(mc)
	if err != nil {
		return nil, fmt.Errorf("replog: membership: start memberlist on %s: %w", cfg.BindAddr, err)
	}
	m.list = list
	m.gossipAddr = list.LocalNode().Address()
	logger.Debug("gossip started", "node", cfg.NodeID, "addr", m.gossipAddr, "label", label)

	if len(cfg.Join) > 0 {
		n, err := list.Join(cfg.Join)
		switch {
		case n == 0:
			// Normal for the first node of a cluster: the others join it.
			// One line, at Info: nothing is wrong yet.
			logger.Info("no gossip seed answered yet; running alone until a member joins this node",
				"seeds", strings.Join(cfg.Join, ","), "error", oneLine(err))
		case err != nil:
			logger.Debug("joined some seeds", "joined", n, "error", oneLine(err))
		default:
			logger.Debug("joined", "seeds", n)
		}
	}
	// A live member with this node's ID, seen while joining, refuses the
	// node (a leftover of this node's own earlier run does not).
	if err := m.checkConflictsAtStart(); err != nil {
		m.closing.Store(true)
		_ = list.Shutdown()
		m.conflicts.wg.Wait() // checks of conflicts seen meanwhile
		return nil, err
	}
	return m, nil
}

// GossipAddr returns the gossip address other members use to reach this
// node ("ip:port", with the port actually bound): give it to new members
// as a seed.
func (m *Membership) GossipAddr() string { return m.gossipAddr }

// Join joins the members at the given gossip addresses, one seed at a
// time, stopping early if ctx is done (a single attempt is bounded by
// Tuning.TCPTimeout, not by ctx). It returns how many seeds were joined;
// the error is nil if at least one was, otherwise it wraps ErrJoin (and
// the last failure) or is ctx's error. A member with another Label or
// SecretKey cannot be joined.
func (m *Membership) Join(ctx context.Context, seeds []string) (int, error) {
	m.lifeMu.RLock()
	defer m.lifeMu.RUnlock()
	if m.left || m.stopped {
		return 0, ErrClosed
	}
	joined := 0
	var errs []error
	for _, s := range seeds {
		if err := ctx.Err(); err != nil {
			if joined > 0 {
				return joined, nil
			}
			return 0, err
		}
		n, err := m.list.Join([]string{s})
		joined += n
		if err != nil {
			errs = append(errs, err)
		}
	}
	if joined == 0 && len(seeds) > 0 {
		return 0, fmt.Errorf("%w (%d tried): %w", ErrJoin, len(seeds), errors.Join(errs...))
	}
	return joined, nil
}

// Resolve returns the RPC address nodeID advertised, if this node has ever
// seen it (it matches transport.Resolver). A member gossip thinks dead
// still resolves to its last address: liveness is the transport's
// business.
func (m *Membership) Resolve(nodeID string) (addr string, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mem, ok := m.members[nodeID]
	if !ok {
		return "", false
	}
	return mem.RPCAddr, true
}

// Members returns the known members, this node included, sorted by ID,
// including those gossip considers dead (Alive false). The slice is the
// caller's.
func (m *Membership) Members() []Member {
	m.mu.Lock()
	out := make([]Member, 0, len(m.members))
	for _, mem := range m.members {
		out = append(out, mem)
	}
	m.mu.Unlock()
	slices.SortFunc(out, func(a, b Member) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// SetLeader advertises the leader and epoch this node knows (leaderID ""
// for none). It returns ErrMetaTooLarge (nothing changed) if the metadata
// would not fit, ErrClosed after Leave or Close, and ErrBroadcastTimeout if
// the update was not broadcast within Tuning.BroadcastTimeout (it is
// advertised anyway). It blocks until the broadcast or the timeout.
func (m *Membership) SetLeader(leaderID string, epoch uint64) error {
	m.setMu.Lock()
	defer m.setMu.Unlock()
	m.lifeMu.RLock()
	defer m.lifeMu.RUnlock()
	if m.left || m.stopped {
		return ErrClosed
	}
	m.metaMu.Lock()
	nm := m.meta
	nm.LeaderID, nm.Epoch = leaderID, epoch
	b, err := nm.encode()
	if err != nil {
		m.metaMu.Unlock()
		return err
	}
	m.meta, m.metaBytes = nm, b
	m.metaMu.Unlock()
	if err := m.list.UpdateNode(m.tuning.BroadcastTimeout); err != nil {
		return fmt.Errorf("%w: %v", ErrBroadcastTimeout, err)
	}
	return nil
}

// Hints returns the channel of advisory hints, for the shell to pass to
// the protocol core:
//
//   - Hint{NodeFailed, Node, Epoch}: gossip declared Node dead or it left
//     gracefully; Epoch is the epoch Node last advertised.
//   - Hint{LeaderClaim, Node, Epoch}: Node advertises that it leads Epoch
//     (only self-claims count; a member repeating whom it follows does not).
//
// No hints are given about this node itself. The channel is bounded
// (Config.HintBuffer): memberlist's event delivery never waits for the
// reader, and when the channel is full the oldest hint is dropped (newer
// information supersedes it; see Dropped). It is closed by Close.
func (m *Membership) Hints() <-chan Hint { return m.hints }

// Dropped returns how many hints have been dropped because the Hints
// channel was full.
func (m *Membership) Dropped() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.dropped
}

// Leave tells the cluster that this node is leaving, waiting until the
// message is broadcast, for at most ctx's deadline or else
// Tuning.BroadcastTimeout (the wait is not interrupted by a cancel without
// deadline). The node keeps answering gossip until Close. It returns
// ErrClosed after Close and ErrBroadcastTimeout if the message did not go
// out in time (others then detect the node's failure after Close).
// Calling it twice is harmless.
func (m *Membership) Leave(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	timeout := m.tuning.BroadcastTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
		if timeout <= 0 {
			return context.DeadlineExceeded
		}
	}
	// Write lock: no SetLeader may re-advertise the node while it leaves.
	m.lifeMu.Lock()
	defer m.lifeMu.Unlock()
	if m.stopped {
		return ErrClosed
	}
	m.left = true
	if err := m.list.Leave(timeout); err != nil {
		return fmt.Errorf("%w: %v", ErrBroadcastTimeout, err)
	}
	return nil
}

// Close shuts memberlist down without a leave message (call Leave first to
// leave gracefully; otherwise the others detect a failure) and closes the
// Hints channel. It waits for calls in progress (a Join may take up to
// Tuning.TCPTimeout per seed). Safe to call more than once.
func (m *Membership) Close() error {
	m.lifeMu.Lock()
	if m.stopped {
		m.lifeMu.Unlock()
		return nil
	}
	m.stopped = true
	m.closing.Store(true)
	err := m.list.Shutdown()
	m.lifeMu.Unlock()
	m.conflicts.mu.Lock()
	m.conflicts.closed = true // no check starts from here (see conflictState)
	m.conflicts.mu.Unlock()
	m.conflicts.wg.Wait() // checks in flight end at their next ping

	// memberlist goroutines may still deliver an event or two after
	// Shutdown returns; push refuses them once closed is set.
	m.mu.Lock()
	m.closed = true
	close(m.hints)
	m.mu.Unlock()
	if err != nil {
		return fmt.Errorf("replog: membership: shutdown: %w", err)
	}
	return nil
}

// pushLocked enqueues h without blocking, dropping the oldest queued hint
// if the channel is full. m.mu must be held (it makes this the only sender,
// so the slot freed by the drop stays free).
func (m *Membership) pushLocked(h Hint) {
	if m.closed {
		return
	}
	select {
	case m.hints <- h:
		return
	default:
	}
	select {
	case <-m.hints:
	default: // the reader just made room
	}
	m.dropped++
	select {
	case m.hints <- h:
	default: // cannot happen with a single sender; never block regardless
	}
	m.logger.Debug("hint channel full; dropped the oldest hint", "dropped", m.dropped)
}

// observe records n's (new) metadata and emits a LeaderClaim hint for a new
// leadership claim. Called by memberlist with its node lock held: it must
// not call back into memberlist.
func (m *Membership) observe(n *memberlist.Node, event string) {
	meta, err := decodeMeta(n.Meta)
	if err == nil && meta.ClusterID != m.cfg.ClusterID {
		err = fmt.Errorf("cluster ID %q, want %q", meta.ClusterID, m.cfg.ClusterID)
	}
	if err == nil && meta.NodeID != n.Name {
		err = fmt.Errorf("metadata names node %q", meta.NodeID)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		delete(m.members, n.Name)
		m.logger.Warn("ignoring gossip member", "member", n.Name, "addr", n.Address(), "event", event, "error", err)
		return
	}
	prev, known := m.members[n.Name]
	m.members[n.Name] = Member{
		ID:         meta.NodeID,
		RPCAddr:    meta.RPCAddr,
		GossipAddr: n.Address(),
		Voter:      meta.Voter,
		LeaderID:   meta.LeaderID,
		Epoch:      meta.Epoch,
		Alive:      true,
	}
	if n.Name == m.cfg.NodeID {
		return
	}
	if !known || !prev.Alive {
		m.pushLocked(Hint{Kind: MemberJoined, Node: n.Name})
	}
	claims := meta.LeaderID == meta.NodeID && meta.Epoch > 0
	sameClaim := known && prev.Alive && prev.LeaderID == prev.ID && prev.Epoch == meta.Epoch
	if claims && !sameClaim {
		m.logger.Debug("leader hint", "member", n.Name, "epoch", meta.Epoch, "event", event)
		m.pushLocked(Hint{Kind: LeaderClaim, Node: n.Name, Epoch: meta.Epoch})
	}
}

// observeLeave marks n not alive and emits a NodeFailed hint. Same locking
// rule as observe.
func (m *Membership) observeLeave(n *memberlist.Node) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mem, known := m.members[n.Name]
	if !known {
		return // ignored member, or never seen
	}
	wasAlive := mem.Alive
	mem.Alive = false
	m.members[n.Name] = mem
	if n.Name == m.cfg.NodeID || !wasAlive {
		return
	}
	m.logger.Debug("node failed hint", "member", n.Name, "epoch", mem.Epoch)
	m.pushLocked(Hint{Kind: NodeFailed, Node: n.Name, Epoch: mem.Epoch})
}

// delegate implements memberlist.Delegate and memberlist.EventDelegate
// for a Membership without exporting those methods.
type delegate Membership

var (
	_ memberlist.Delegate         = (*delegate)(nil)
	_ memberlist.EventDelegate    = (*delegate)(nil)
	_ memberlist.ConflictDelegate = (*delegate)(nil)
)

// NodeMeta returns the current encoded metadata (at most limit bytes: the
// size was checked when it was set).
func (d *delegate) NodeMeta(limit int) []byte {
	d.metaMu.Lock()
	defer d.metaMu.Unlock()
	if len(d.metaBytes) > limit {
		// Never hand memberlist oversize metadata (it panics); the checks
		// in Validate and SetLeader make this unreachable.
		return nil
	}
	return slices.Clone(d.metaBytes)
}

// NotifyMsg ignores user messages (none are sent).
func (d *delegate) NotifyMsg([]byte) {}

// GetBroadcasts sends no user broadcasts.
func (d *delegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }

// LocalState has no user state for push/pull.
func (d *delegate) LocalState(join bool) []byte { return nil }

// MergeRemoteState ignores remote user state.
func (d *delegate) MergeRemoteState(buf []byte, join bool) {}

// NotifyJoin records a new (or returning) member.
func (d *delegate) NotifyJoin(n *memberlist.Node) { (*Membership)(d).observe(n, "join") }

// NotifyUpdate records a member's new metadata.
func (d *delegate) NotifyUpdate(n *memberlist.Node) { (*Membership)(d).observe(n, "update") }

// NotifyLeave records a member's failure or departure.
func (d *delegate) NotifyLeave(n *memberlist.Node) { (*Membership)(d).observeLeave(n) }
