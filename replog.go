package replog

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	randv2 "math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/replog-io/replog/internal/shell"
	"github.com/replog-io/replog/membership"
	"github.com/replog-io/replog/replica"
	"github.com/replog-io/replog/storage"
	"github.com/replog-io/replog/transport"
)

// Entry is a committed record as readers see it.
type Entry struct {
	// Offset is the entry's position in the log.
	Offset uint64
	// Epoch is the leader epoch that appended it.
	Epoch uint64
	// Time is when the leader appended it, by the leader's clock, to the
	// millisecond (zero for an entry stored before entries carried a
	// time). Retention by age (Options.RetentionAge) reads it.
	Time time.Time
	// Data is the record; the caller owns it.
	Data []byte
	// Key is the entry's key, as WithKey gave it ("" for an entry
	// appended without one, and for every entry stored before keys,
	// feature level 10). A compacted log (Options.Compaction) keeps the
	// newest entry of each key (docs/protocol.md R102, R103).
	Key string
}

// entryTime turns a stored entry time (milliseconds since the Unix epoch,
// 0 for unknown) into Entry.Time.
func entryTime(ms int64) time.Time {
	if ms <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

// Status is a snapshot of a node's replication state.
type Status struct {
	NodeID string `json:"node_id"`
	// Role is RoleLeader, RoleFollower, RoleProspective, RoleCandidate or
	// RoleObserver ("leader", ... in JSON); RoleClosed once the Log is
	// closed (the other fields then keep their last values).
	Role  Role   `json:"role"`
	Epoch uint64 `json:"epoch"`
	// LeaderID is the leader this node believes in: itself when it leads,
	// "" while it knows none. A node stops naming its leader as soon as it
	// stops following it (a prospective or candidate names none), and
	// after Close.
	LeaderID string `json:"leader_id"`
	// Voters is the voter set in force (docs/protocol.md R55): the newest one
	// recorded in this node's log (committed once HighWatermark passes
	// VotersOffset), in its recorded order. Before any set is recorded (a
	// brand-new cluster, until its first leader is elected) it is
	// Options.Voters with empty directory IDs. Change it with AddVoter and
	// RemoveVoter.
	Voters []VoterStatus `json:"voters"`
	// VotersOffset is the offset of the log entry that recorded Voters (0
	// before any is recorded).
	VotersOffset uint64 `json:"voters_offset"`
	// DirectoryID is this node's directory ID, made when its data
	// directory was created: a voter is a node at one directory, and a
	// node whose directory was wiped comes back with another one, as an
	// observer (R56).
	DirectoryID string `json:"directory_id"`
	// Observers is, on the leader, each node fetching from it now that is
	// not a voter at the directory it fetches from (a voter's new
	// incarnation among them), sorted by ID; nil on other nodes.
	Observers []Incarnation `json:"observers,omitempty"`
	// Replacing is, on the leader, each node removed from Voters because
	// it came back with a new directory (the voter set records that it is
	// owed its place, R58), with the directory its new incarnation fetches
	// from ("" while none does): the leader makes it a voter again once it
	// has caught up (Options.ManualVoterChanges turns this off). Sorted by
	// ID; nil on other nodes.
	Replacing []Incarnation `json:"replacing,omitempty"`
	// LEO is the log end offset (written or being written); HW the high
	// watermark: offsets below it are committed and readable.
	LEO           uint64 `json:"leo"`
	DurableLEO    uint64 `json:"durable_leo"`
	HighWatermark uint64 `json:"hw"`
	// ReadableHW is what readers on this node see up to:
	// min(HighWatermark, DurableLEO). It differs from the HW only on a
	// leader whose own write of an entry is still under way while two
	// followers have already made it committed.
	ReadableHW uint64 `json:"readable_hw"`
	LogStart   uint64 `json:"log_start"`
	// RemoteLEO is, on the leader, each other voter's LEO as the leader
	// knows it; nil on other nodes.
	RemoteLEO map[string]uint64 `json:"remote_leo,omitempty"`
	// RPCAddr is the transport's advertised address ("" for a single node).
	RPCAddr string `json:"rpc_addr"`
	// GossipAddr is memberlist's bound address ("" without gossip).
	GossipAddr string `json:"gossip_addr"`
	// FeatureLevel is the cluster feature level this node knows to be
	// finalized (docs/protocol.md R68): what the newest committed level
	// entry of its log says, protocol.BaseFeatureLevel (6) with none. It
	// never goes down; a node whose release cannot run at it stops (Error).
	// After a restart it shows the level once the node has read its log.
	FeatureLevel int `json:"feature_level"`
	// SupportedLevels is the range of feature levels this node's release
	// can run at: (protocol.MinVersion, its highest wire version).
	SupportedLevels [2]int `json:"supported_levels"`
	// Error is set once the node has stopped serving because its disk
	// failed (see ErrStorageFailed); "" otherwise.
	Error string `json:"error,omitempty"`
}

// openStore opens the node's data directory (see storage.OpenDir); tests
// replace it to inject faults.
var openStore = func(dir string, id storage.Identity, opts storage.DirOptions) (storage.Store, storage.Identity, error) {
	return storage.OpenDir(dir, id, opts)
}

// Log is a handle on this node's replica of the replicated log. All
// methods are safe for concurrent use.
type Log struct {
	opts   Options
	logger hclog.Logger
	// compaction counts the compactor's passes (compaction.go).
	compaction compactionStats

	store storage.Store
	node  *shell.Node // the round logic around the core; owned by the loop goroutine
	tr    transport.Transport
	tcp   *transport.TCP
	ml    *membership.Membership
	// net is what this Log takes from the network besides tr: the
	// transport's PeerDown and gossip's hints (its own, or a Node's
	// copies), and whether it owns tr and ml (closes them) and advertises
	// its leader in gossip.
	net  netParts
	name string // the log's name; "" for a node's default log
	// logsVersion and catalogHW are the core's LogsVersion and LogsAsOf
	// last given to net.onCatalog (0: never); the loop's.
	logsVersion, catalogHW uint64
	writer                 *writer
	// journalOn: the store was opened with the commit journal, or the
	// writer was asked to turn it on (useJournal; the loop's, or Open's
	// before the loop starts).
	journalOn bool

	// requests carries the calls' requests into the loop (request).
	requests chan *request
	// prod makes this Log an idempotent producer (producer.go, R63).
	prod *producer
	// deletes carries DeleteBefore's and the retention policies' requests
	// to move the log start (shell.DeleteBefore) into the loop.
	deletes   chan uint64
	claims    chan leaderClaim // cap 1: the newest leader claim for gossip
	persisted atomic.Uint64    // highest Seq the writer has made durable
	wakeLoop  chan struct{}    // cap 1: persisted moved or the writer failed
	failErr   atomic.Pointer[error]

	// hw and hwChanged let readers wait for the high watermark without
	// touching the core: the loop closes hwChanged and replaces it whenever
	// hw moves (or the log closes) and a reader took it (hwTaken; with
	// none waiting, a round that moves hw makes no channel).
	hwMu      sync.Mutex
	hw        uint64
	hwChanged chan struct{}
	hwTaken   bool

	// status is the published Status, replaced whole by the loop (publish)
	// under statusMu and copied out under it (statusNow): a round makes
	// no new one, only its slices and maps are new when they change (they
	// are never modified once published). The loop, its only writer, may
	// read it without the lock.
	statusMu sync.Mutex
	status   Status
	// voterIDs are the IDs of the published Status.Voters, for Watch
	// (publish's, which runs on the loop, or in Open before it starts).
	voterIDs []string
	stats    loopStats // counters for Stats (stats.go)

	// watch is the view Watch, WaitReady and WithRequireLeader readers
	// wait on (watch.go); retries are the asynchronous appends waiting to
	// be proposed again after ErrNotLeader, the loop's own (async.go).
	watch   watchState
	retries []asyncRetryItem

	// ship is the shipping of snapshots to and from other nodes
	// (snapshotship.go).
	ship shipState
	// snap holds the service's snapshots (snapshot.go).
	snap snapshotState

	// unregister removes the directory from openDirs once the store is
	// closed.
	unregister func()

	// ownSched: net.sched is this Log's own (Open's), closed with it.
	ownSched bool

	closing   chan struct{}
	loopDone  chan struct{} // closed when the loop goroutine has ended
	closeOnce sync.Once
	closeErr  error
	wg        sync.WaitGroup
}

// request is one call's request waiting in the loop. ev is the request as
// the shell consumes it, built once, when the call is made (the loop only
// gives it its ID); the rest is how to answer it.
type request struct {
	ev shell.Event
	// prod and seq are this Log's producer and the sequence number of an
	// append or cursor commit made as its producer (R63; nil: none), id
	// its caller's ID, entryKey its WithKey key: what each try's key is
	// made from (refreshKey).
	prod     *producer
	seq      uint64
	id       string
	entryKey string

	result chan outcome  // cap 1: the loop never blocks on it (nil for async)
	async  *AppendResult // AppendAsync's handle, completed by the loop (async.go)
}

// outcome is a request's answer from the loop.
type outcome struct {
	offset uint64
	err    error
}

// Open opens (or creates) the node's log in opts.Dir, starts replication and
// joins the cluster. Options.Validate errors come back wrapping
// ErrInvalidOptions (a networked node without Secret, mutual TLS or
// Insecure among them); a directory another open Log holds, in this
// process or another, gives ErrLocked (the message says which); a
// directory created for another cluster or node ErrIdentityMismatch
// (nothing in it is changed); a damaged store, or a directory whose data
// file is missing or empty although a node lived there, ErrCorrupt naming
// the file; another live process with this NodeID in the gossip cluster,
// ErrDuplicateNodeID. Open owns Options.Listener: when it fails, the
// listener is closed too.
func Open(opts Options) (*Log, error) {
	return ownListener(opts, open)
}

// ownListener runs open(opts) and closes opts.Listener if it fails: Open
// and OpenNode own the listener they are given.
func ownListener[T any](opts Options, open func(Options) (T, error)) (T, error) {
	v, err := open(opts)
	if err != nil && opts.Listener != nil {
		_ = opts.Listener.Close() // already closed if the transport had started
	}
	return v, err
}

// open is Open but for the listener's close when it fails.
func open(opts Options) (*Log, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	o := opts.withDefaults()
	logger := nodeLogger(o)
	cfgs := o.components(logger)
	startNet := func() (netParts, error) {
		if !o.needsTransport() {
			return netParts{}, nil
		}
		tcp, ml, err := startNetwork(o, cfgs)
		if err != nil {
			return netParts{}, err
		}
		np := netParts{tcp: tcp, tr: tcp, ml: ml, down: tcp.PeerDown(), silent: tcp.Silent(), resync: tcp.Resyncs(), owned: true, advertise: ml != nil}
		if ml != nil {
			np.hints = ml.Hints()
		}
		return np, nil
	}
	return openLog(o, logger, cfgs, startNet, "", nil)
}

// nodeLogger is the logger of the node o configures (defaults applied).
func nodeLogger(o Options) hclog.Logger {
	logger := o.Logger
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	return logger.With("node", o.NodeID)
}

// netParts is what a Log uses of the network: the transport it sends on
// and receives from (tr: the TCP transport itself, or a Node's view of it
// for one log), the TCP transport and gossip member (for their addresses
// and members), the channels of lost peers and gossip hints, and what the
// Log does with them. Every part may be nil (a single node).
type netParts struct {
	tr    transport.Transport
	tcp   *transport.TCP
	ml    *membership.Membership
	down  <-chan string
	hints <-chan membership.Hint
	// silent and resync are the node's contact reports (R99, R100): a
	// peer that fell silent, a peer to resync with (Open's: the
	// transport's channels). A Node's logs have reports instead, which
	// its router fills.
	silent, resync <-chan string
	reports        *contactReports
	// owned: the Log closes tr and ml when it closes (Open's); a Node's
	// logs leave them to the Node.
	owned bool
	// wire is what the Log's messages carry as protocol.Message.Log ("" for
	// Open's and a Node's default log): a message that names another log
	// is not this Log's, whatever the transport hands it (Open's reads the
	// shared transport directly, with no router to sort them out).
	wire string
	// advertise: the Log puts its leader claims in gossip (one log per
	// node does: Open's, or a Node's default log).
	advertise bool
	// members, if not nil, are the nodes the core asks before it
	// bootstraps (R60) instead of the static peers and gossip members: a
	// named log's other replicas, the only nodes that answer for it.
	members []string
	// firstCandidate, if not empty, campaigns for the log's first leader
	// at once (replica.Config.FirstCandidate, R108): a named log's
	// preferred leader.
	firstCandidate string
	// onCatalog, if not nil, is given the catalog of named logs and the
	// readable HW it is as of whenever either moves, once the core knows
	// the catalog (changed: the catalog itself changed, or is given for
	// the first time), on the loop goroutine: a Node's default log.
	onCatalog func(recs []replica.LogRecord, hw uint64, changed bool)
	// sched wakes the Log's loop at its deadlines (deadlines.go, R97): a
	// Node's, shared by its logs, or nil for openLog to start the Log's
	// own (ownSched).
	sched *deadlines
}

// openLog opens the log o configures (defaults applied, Validate passed)
// on the network parts startNet returns once the store is open: Open's
// log, or one of a Node's (name is its name, "" for the default log).
// A named log's writes are made durable by gw, its node's writer for the
// logs on the shared journal; with gw nil the log has a writer of its
// own. When it fails, the parts it owns are closed.
func openLog(o Options, logger hclog.Logger, cfgs components, startNet func() (netParts, error), name string, gw *groupWriter) (*Log, error) {
	var np netParts
	closeNet := func() {
		if !np.owned {
			return
		}
		if np.ml != nil {
			_ = np.ml.Close()
		}
		if np.tr != nil {
			_ = np.tr.Close()
		}
	}
	// The directory records the cluster and node it was created for, so
	// that a node never runs on another node's data (or a node whose data
	// file vanished restarts empty and votes as if it had it).
	// A directory already in storage format 2 stays in it: opened without
	// the journal it would go back to format 1 (useJournal).
	if f, err := storage.DirFormat(o.Dir); err == nil && f >= storage.StorageFormatJournal && cfgs.store.SharedJournal == nil {
		cfgs.store.Journal = true
	}
	store, ident, err := openStore(o.Dir, cfgs.identity, cfgs.store)
	if err != nil {
		if errors.Is(err, ErrLocked) {
			return nil, lockedErr(o.Dir, o.NodeID, err)
		}
		return nil, fmt.Errorf("replog: open store: %w", err)
	}
	unregister := openDirs.add(o.Dir, o.NodeID)
	logger.Debug("opened data directory", "dir", o.Dir, "directory_id", ident.DirectoryID)
	l := &Log{
		unregister: unregister,
		opts:       o,
		logger:     logger,
		store:      store,
		name:       name,
		// A store on a shared journal has its journal already.
		journalOn: cfgs.store.Journal || cfgs.store.SharedJournal != nil,
		requests:  make(chan *request, 1024),
		prod:      newProducer(),
		deletes:   make(chan uint64, 1),
		claims:    make(chan leaderClaim, 1),
		wakeLoop:  make(chan struct{}, 1),
		hwChanged: make(chan struct{}),
		closing:   make(chan struct{}),
		loopDone:  make(chan struct{}),
	}
	cleanup := func() {
		closeNet()
		if l.ownSched {
			l.net.sched.close()
		}
		_ = store.Close()
		unregister()
	}

	if err := l.openSnapshots(cfgs.store); err != nil {
		cleanup()
		return nil, err
	}
	// The network starts before the core: gossip's join tells the core
	// who else is there, which a fresh store must ask before it
	// bootstraps (R60).
	np, err = startNet()
	if err != nil {
		cleanup()
		return nil, err
	}
	l.tr, l.tcp, l.ml, l.net = np.tr, np.tcp, np.ml, np
	if l.net.sched == nil {
		l.net.sched, l.ownSched = newDeadlines(), true
	}
	seed := time.Now().UnixNano() ^ int64(len(o.NodeID))<<32 ^ int64(len(name))<<40
	rcfg := cfgs.replica
	rcfg.Rand = rand.New(newPCGSource(seed))
	// A voter is this node at this directory (docs/protocol.md R56).
	rcfg.DirID = ident.DirectoryID
	rcfg.Members = l.knownMembers()
	if np.members != nil {
		rcfg.Members = slices.Clone(np.members)
	}
	rcfg.Name = name // R106: which voter stands first when the leader dies
	rcfg.FirstCandidate = np.firstCandidate
	rcfg.ShipSnapshots = true // the data directory's snapshot store (R92)
	if np.tcp != nil {
		rcfg.Contact = np.tcp // the node's contact with its peers (R98)
	}
	if keyCheckpointBytes != 0 {
		rcfg.KeyCheckpointBytes = keyCheckpointBytes
	}
	core, err := replica.New(rcfg, store, time.Now())
	if err != nil {
		cleanup()
		return nil, fmt.Errorf("replog: start replica: %w", err)
	}
	l.node = shell.New(core)
	if gw != nil {
		l.writer = gw.writerFor(store, logger.Named("writer"), l.onPersisted, l.onWriteFailed)
	} else {
		l.writer = newWriter(store, logger.Named("writer"), l.onPersisted, l.onWriteFailed)
	}
	l.startShipping()
	l.publish(core.Status(), core.ReadableHW(), true)
	l.wg.Add(1)
	go l.loop()
	if o.RetentionBytes > 0 || o.RetentionAge > 0 {
		l.wg.Add(1)
		go l.retainer()
	}
	if o.Compaction.Enabled {
		l.wg.Add(1)
		go l.compactionLoop()
	}
	if l.ml != nil && np.advertise {
		l.wg.Add(1)
		go l.advertiser()
	}
	return l, nil
}

// pcgSource is a math/rand Source on math/rand/v2's PCG: 16 bytes of
// state where rand.NewSource's is 4.9 KiB, which every named log's core
// would pay.
type pcgSource struct{ p *randv2.PCG }

func newPCGSource(seed int64) pcgSource {
	return pcgSource{randv2.NewPCG(uint64(seed), 0x9e3779b97f4a7c15)}
}

func (s pcgSource) Int63() int64    { return int64(s.p.Uint64() >> 1) }
func (s pcgSource) Uint64() uint64  { return s.p.Uint64() }
func (s pcgSource) Seed(seed int64) { s.p.Seed(uint64(seed), 0x9e3779b97f4a7c15) }

// startNetwork starts the TCP transport and, if configured, gossip, with
// the configurations derived from the options o (see Options.components),
// completed with what exists only now.
func startNetwork(o Options, cfgs components) (*transport.TCP, *membership.Membership, error) {
	var ml *membership.Membership
	resolve := func(id string) (string, bool) {
		if addr, ok := o.Peers[id]; ok {
			return addr, true
		}
		if ml != nil {
			return ml.Resolve(id)
		}
		return "", false
	}
	tcfg := cfgs.transport
	tcfg.Resolver = resolve
	tcp, err := transport.NewTCP(tcfg)
	if err != nil {
		return nil, nil, fmt.Errorf("replog: start transport on %s: %w", o.RPCAddr, err)
	}
	if o.GossipAddr == "" {
		return tcp, nil, nil
	}
	mcfg := cfgs.membership
	if o.AdvertiseRPCAddr == "" {
		mcfg.RPCAddr = tcp.Addr()
	}
	m, err := membership.New(mcfg)
	if err != nil {
		_ = tcp.Close()
		return nil, nil, fmt.Errorf("replog: start gossip on %s: %w", o.GossipAddr, err)
	}
	ml = m
	return tcp, ml, nil
}

// knownMembers lists the other nodes known at Open: the static peers and
// the gossip members the join found (sorted, without this node).
func (l *Log) knownMembers() []string {
	var ids []string
	for id := range l.opts.Peers {
		ids = append(ids, id)
	}
	if l.ml != nil {
		for _, m := range l.ml.Members() {
			ids = append(ids, m.ID)
		}
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	return slices.DeleteFunc(ids, func(id string) bool { return id == l.opts.NodeID })
}

// Status returns a snapshot of the node's state. It never blocks.
func (l *Log) Status() Status {
	s := l.statusNow()
	s.Voters = slices.Clone(s.Voters)
	s.Observers = slices.Clone(s.Observers)
	s.Replacing = slices.Clone(s.Replacing)
	if s.RemoteLEO != nil {
		m := make(map[string]uint64, len(s.RemoteLEO))
		for k, v := range s.RemoteLEO {
			m[k] = v
		}
		s.RemoteLEO = m
	}
	return s
}

// Close stops the node: on the leader it first hands the leadership over
// (TransferLeadership, bounded by Options.CloseTransferTimeout), then it
// leaves the gossip cluster, closes connections, stops the goroutines and
// closes the store. Appends still waiting fail (see ErrClosed); iterators
// end with ErrClosed. Later calls return the first call's result.
func (l *Log) Close() error {
	l.shutdown(true)
	return l.closeErr
}

// crash stops the node the way a killed process looks to its peers: no
// gossip leave, connections dropped, queued writes lost. For in-process
// tests; the fault tests kill real processes.
func (l *Log) crash() { l.shutdown(false) }

func (l *Log) shutdown(graceful bool) {
	l.closeOnce.Do(func() {
		if graceful {
			l.transferBeforeClose() // R59: no election timeout for the cluster
		}
		close(l.closing)
		l.wg.Wait() // the loop fails every waiting proposal on its way out
		l.failStranded()
		l.publishClosed()
		// Readers learn of the close before the store goes away, so they
		// end with ErrClosed rather than the store's error.
		l.hwMu.Lock()
		close(l.hwChanged)
		l.hwChanged, l.hwTaken = nil, false
		l.hwMu.Unlock()
		var errs []error
		if err := l.failed(); err != nil {
			errs = append(errs, err)
		}
		if l.ml != nil && l.net.owned {
			if graceful {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				if err := l.ml.Leave(ctx); err != nil {
					l.logger.Debug("gossip leave", "error", err)
				}
				cancel()
			}
			errs = append(errs, l.ml.Close())
		}
		if l.tr != nil && l.net.owned {
			errs = append(errs, l.tr.Close())
		}
		l.writer.stop()
		if l.ownSched {
			l.net.sched.close()
		}
		errs = append(errs, l.closeSnapshots(), l.store.Close())
		l.unregister()
		l.closeErr = errors.Join(errs...)
	})
}

// onPersisted runs on the writer goroutine.
func (l *Log) onPersisted(seq uint64) {
	l.persisted.Store(seq)
	select {
	case l.wakeLoop <- struct{}{}:
	default:
	}
}

// onWriteFailed runs on the writer goroutine.
func (l *Log) onWriteFailed(err error) {
	err = fmt.Errorf("%w: %w", ErrStorageFailed, err)
	l.failErr.Store(&err)
	select {
	case l.wakeLoop <- struct{}{}:
	default:
	}
}

func (l *Log) failed() error {
	if p := l.failErr.Load(); p != nil {
		return *p
	}
	return nil
}
