package replog

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/replog-io/replog/internal/shell"
	"github.com/replog-io/replog/membership"
	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/replica"
	"github.com/replog-io/replog/storage"
	"github.com/replog-io/replog/transport"
)

// Where a Node keeps its named logs: each log's data directory
// <Dir>/logs/<name>-<incarnation>, and the journal they share.
const (
	logsDirName       = "logs"
	sharedJournalName = "replog.journal"
	balanceInterval   = time.Second
	// balanceConcurrency is how many hand-overs one balancer pass has
	// under way at once (R107): each waits a round trip or two for the
	// new leader, so one at a time moved a restarted node's thousand logs
	// back over minutes.
	balanceConcurrency = 16
	reconcileInterval  = time.Second
	balanceTransferMax = time.Second
	// A log handed to its preferred leader that comes back to this node
	// within its backoff is not handed over again until the backoff
	// ends, and the backoff doubles (up to balanceBackoffMax): a
	// preferred leader that keeps losing the leadership (a slow disk, a
	// link that check-quorum keeps failing) must not have it bounced to
	// it every second, each move a moment without a leader.
	balanceBackoffMin = 10 * time.Second
	balanceBackoffMax = 5 * time.Minute
)

// Node is one node of a cluster hosting many named logs (docs/logs.md):
// its default log (Default, name "": the log replog.Open opens, and the
// cluster's metadata log, whose catalog says which named logs exist, with
// their options and replicas) and the named logs it is a replica of. Its
// logs share one TCP transport, one gossip member and, for the named
// logs, one commit journal and one writer. Every node of the cluster runs the default
// log; a named log runs on its replicas only. All methods are safe for
// concurrent use.
type Node struct {
	opts   Options // defaults applied
	logger hclog.Logger

	tcp *transport.TCP
	ml  *membership.Membership
	mux *logMux
	def *Log

	// journal is the named logs' shared journal, opened with the first
	// one (the reconciler's); writer makes their writes durable, every
	// log's in one round of it, started with the first named log.
	journal *storage.Journal
	writer  *groupWriter

	// cat is the default log's catalog as of its readable HW, published
	// by its loop (catalogChanged); catChanged wakes the reconciler.
	cat        atomic.Pointer[catalog]
	catChanged chan struct{}

	// placing are the creations under way on this node, by name: placed,
	// their catalog change not yet in the catalog (placeMu guards it,
	// and makes each placement count the ones before it).
	placeMu sync.Mutex
	placing map[string]logSpec
	// barrierEpoch is the default log's epoch in which this node, leading
	// it, committed a barrier for CreateLog (catalogCurrent; 0: none).
	barrierEpoch atomic.Uint64

	mu   sync.Mutex
	logs map[string]*localLog // the named logs open here
	// opening are the logs queued or being opened (name to incarnation),
	// toOpen the queue, openers how many opener goroutines run.
	opening map[string]uint64
	toOpen  []catalogEntry
	openers int
	// jids are the log IDs on the shared journal that directories under
	// <Dir>/logs hold or are being given (nil until journalID first
	// needs it: one scan of the directories, then kept up to date).
	jids map[uint32]bool
	// spares are empty log directories made ahead (spareMaker), ready to
	// be renamed to a new log's; spareOn says the maker runs, spareWake
	// wakes it, spareSeq numbers them.
	spares      []string
	spareOn     bool
	spareWake   chan struct{}
	spareSeq    uint64
	spareMaking int           // spares being made now
	ready       chan struct{} // closed and replaced when cat or logs change
	// waiters counts the calls in waitFor: only for them does a move of
	// the catalog's HW alone signal.
	waiters atomic.Int32

	closing chan struct{}
	// peerBack wakes the balancer when a peer joins or comes back (R107).
	peerBack  chan struct{}
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// localLog is a named log open on this node.
type localLog struct {
	log   *Log
	in    *inbox
	entry catalogEntry
	jid   uint32 // its store's log ID on the shared journal
	// bal is the balancer's state for this log (the balancer goroutine's
	// only).
	bal balanceState
}

// balanceState is when the balancer last handed a log over and how long
// it holds off handing it over again.
type balanceState struct {
	movedAt time.Time     // the last successful hand-over (zero: none)
	backoff time.Duration // 0 until a hand-over came back within its backoff
}

// due reports whether a log this node leads again at now may be handed
// over: not within the backoff after the last hand-over. A log that came
// back to this node within the backoff has had its hand-over undone (by
// an election or a transfer back): the backoff starts, or doubles.
func (b *balanceState) due(now time.Time) bool {
	if b.movedAt.IsZero() {
		return true
	}
	return now.Sub(b.movedAt) >= max(b.backoff, balanceBackoffMin)
}

// moved records a successful hand-over at now, given whether the
// previous one was undone within its hold (the log came back sooner than
// twice the hold: the preferred leader did not keep it).
func (b *balanceState) moved(now time.Time) {
	if !b.movedAt.IsZero() && now.Sub(b.movedAt) < 2*max(b.backoff, balanceBackoffMin) {
		b.backoff = min(2*max(b.backoff, balanceBackoffMin), balanceBackoffMax)
	} else {
		b.backoff = 0
	}
	b.movedAt = now
}

// OpenNode opens (or creates) the node opts configures: its default log
// in opts.Dir, as Open does (the options are the node's and its default
// log's: see Options), then every named log the catalog says it is a
// replica of, under opts.Dir/logs. Its errors are Open's. A directory
// Open used opens unchanged with OpenNode, and the other way round while
// it holds no named log.
func OpenNode(opts Options) (*Node, error) {
	return ownListener(opts, openNode)
}

func openNode(opts Options) (*Node, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	o := opts.withDefaults()
	logger := nodeLogger(o)
	cfgs := o.components(logger)
	n := &Node{
		opts:       o,
		logger:     logger,
		catChanged: make(chan struct{}, 1),
		logs:       map[string]*localLog{},
		placing:    map[string]logSpec{},
		opening:    map[string]uint64{},
		spareWake:  make(chan struct{}, 1),
		ready:      make(chan struct{}),
		closing:    make(chan struct{}),
		peerBack:   make(chan struct{}, 1),
	}
	startNet := func() (netParts, error) {
		if o.needsTransport() {
			tcp, ml, err := startNetwork(o, cfgs)
			if err != nil {
				return netParts{}, err
			}
			n.tcp, n.ml = tcp, ml
		}
		n.mux = newLogMux(n.tcp, n.ml, logger.Named("mux"), func(string) { n.peerReturned() })
		np, _ := n.mux.add("", nil)
		np.onCatalog = n.catalogChanged
		return np, nil
	}
	def, err := openLog(o, logger, cfgs, startNet, "", nil)
	if err != nil {
		_ = n.closeShared(false)
		return nil, err
	}
	n.def = def
	n.wg.Add(2)
	go n.reconciler()
	go n.balancer()
	return n, nil
}

// Default returns the node's default log: the log replog.Open would
// open on the same Options, which also holds the catalog of named logs
// (readers never see its records).
func (n *Node) Default() *Log { return n.def }

// catalogChanged runs on the default log's loop whenever the readable
// catalog or the HW it is as of moved: it publishes them and wakes the
// reconciler (on a change) and the calls waiting.
func (n *Node) catalogChanged(recs []replica.LogRecord, hw uint64, changed bool) {
	prev := n.cat.Load()
	if !changed && prev != nil {
		n.cat.Store(&catalog{logs: prev.logs, hw: hw})
		if n.waiters.Load() > 0 {
			n.signal()
		}
		return
	}
	c, err := newCatalog(recs, hw, prev)
	if err != nil {
		n.logger.Error("catalog entry does not decode; the log is left closed", "error", err)
	}
	n.cat.Store(c)
	select {
	case n.catChanged <- struct{}{}:
	default:
	}
	n.signal()
}

// signal wakes the calls waiting for the catalog or the open logs.
func (n *Node) signal() {
	n.mu.Lock()
	close(n.ready)
	n.ready = make(chan struct{})
	n.mu.Unlock()
}

// CreateLog creates the named log name with options lo, on any node of
// the cluster (the catalog change goes to the default log's leader as an
// append does), and returns it once the creation is committed and, when
// this node is one of its replicas, the log is open here; a nil *Log and
// a nil error when this node is not one of them (Logs says which are).
// Its replicas are lo.Replicas of the default log's voters: its preferred
// leader, the voter that is preferred leader of the fewest logs, and the
// least loaded of the others (by how many logs each holds; docs/logs.md
// R85).
//
// Errors: one wrapping ErrInvalidArgument for a name that is not 1 to
// MaxLogNameLength bytes of [a-z0-9._-] not starting with '.' (see
// protocol.ValidLogName); ErrInvalidOptions naming the bad field of lo;
// ErrLogExists if the catalog holds name; ErrFeatureLevelTooLow if ctx
// ends while the cluster's feature level is below
// protocol.FeatureLevelNamedLogs (a new cluster's leader raises it soon
// after its election, and CreateLog waits for it; a node of an older
// release, or this node's MaxFeatureLevel, holds it down); those of
// Append (ErrUnknownOutcome, a *NotLeaderError wrapping ctx.Err(),
// ErrClosed, ErrStorageFailed) and of Barrier (ErrNoLeader); and ctx's
// while it waits for the log to open.
func (n *Node) CreateLog(ctx context.Context, name string, lo LogOptions) (*Log, error) {
	if err := checkLogName(name); err != nil {
		return nil, err
	}
	if err := lo.Validate(); err != nil {
		return nil, err
	}
	if err := n.waitNamedLogsLevel(ctx); err != nil {
		return nil, fmt.Errorf("replog: create log %q: %w", name, err)
	}
	t0 := time.Now()
	// Placement counts the catalog: it must count every log whose
	// creation was acknowledged before this call, on any node.
	if err := n.catalogCurrent(ctx); err != nil {
		return nil, fmt.Errorf("replog: create log %q: %w", name, err)
	}
	if err := n.waitFor(ctx, func(c *catalog) bool { return c.hw >= n.def.Status().ReadableHW }); err != nil {
		return nil, err
	}
	var voters []string
	for _, v := range n.def.Status().Voters {
		voters = append(voters, v.ID)
	}
	// Creations under way on this node count too, so that many at once
	// spread as many one after another do.
	n.placeMu.Lock()
	c := n.cat.Load()
	if c != nil {
		if _, ok := c.logs[name]; ok {
			n.placeMu.Unlock()
			return nil, fmt.Errorf("%w: %q", ErrLogExists, name)
		}
	}
	if _, ok := n.placing[name]; ok {
		n.placeMu.Unlock()
		return nil, fmt.Errorf("%w: %q (a creation of it is under way on this node)", ErrLogExists, name)
	}
	replicas, leader := place(name, voters, n.withPlacing(c), lo.replicas(len(voters)))
	spec := logSpec{Replicas: replicas, Leader: leader, Options: lo}
	n.placing[name] = spec
	n.placeMu.Unlock()
	defer func() {
		n.placeMu.Lock()
		delete(n.placing, name)
		n.placeMu.Unlock()
	}()
	t1 := time.Now()
	off, err := n.def.proposeLogChange(ctx, name, spec.encode())
	if err != nil {
		return nil, logChangeErr("create", name, err)
	}
	t2 := time.Now()
	var out *Log
	err = n.waitFor(ctx, func(c *catalog) bool {
		if c.hw <= off {
			return false
		}
		e, ok := c.logs[name]
		if !ok || !slices.Contains(e.spec.Replicas, n.opts.NodeID) {
			return true // not ours, or deleted already
		}
		ll := n.logs[name]
		if ll != nil && ll.entry.incarnation == e.incarnation {
			out = ll.log
			return true
		}
		return false
	})
	if err == nil {
		// Where a creation's time goes (docs/logs.md): the catalog made
		// current and the placement, the catalog change's commit, the
		// wait for the log to open here.
		n.logger.Debug("log created", "log", name, "offset", off, "place", t1.Sub(t0), "commit", t2.Sub(t1), "open", time.Since(t2))
	}
	return out, err
}

// withPlacing returns c with the creations under way on this node
// (n.placing, those c does not hold yet) added: what placement counts.
// Called with n.placeMu held.
func (n *Node) withPlacing(c *catalog) *catalog {
	if len(n.placing) == 0 {
		return c
	}
	out := &catalog{logs: map[string]catalogEntry{}}
	if c != nil {
		maps.Copy(out.logs, c.logs)
	}
	for name, spec := range n.placing {
		if _, ok := out.logs[name]; !ok {
			out.logs[name] = catalogEntry{name: name, spec: spec}
		}
	}
	return out
}

// catalogCurrent returns once this node's readable catalog holds every
// creation acknowledged, on any node, before the call (once the catalog
// reaches the readable HW: CreateLog waits for that). A barrier on the
// default log does it (R50). A leader that has committed a barrier in
// its epoch needs none while it keeps that epoch: every entry committed
// since was committed by it, and is in its readable catalog as soon as
// it is acknowledged anywhere. So creations one after another on the
// leader cost one commit each (the catalog change), not two.
func (n *Node) catalogCurrent(ctx context.Context) error {
	st := n.def.Status()
	if st.Role == RoleLeader && n.barrierEpoch.Load() == st.Epoch {
		return nil
	}
	if err := n.def.Barrier(ctx); err != nil {
		return err
	}
	// The barrier is of the epoch this node led in before and after it,
	// if it did: then no other leader committed anything in between.
	if after := n.def.Status(); st.Role == RoleLeader && after.Role == RoleLeader && after.Epoch == st.Epoch {
		n.barrierEpoch.Store(st.Epoch)
	}
	return nil
}

// DeleteLog deletes the named log name, on any node: once the deletion
// is committed every replica closes it and removes its files (a replica
// down at the time does so when it comes back). It returns once the
// deletion is committed and the log is closed and removed here, if it
// was open here. Errors: ErrInvalidArgument for an invalid name,
// ErrUnknownLog if the catalog does not hold name, and those of
// CreateLog.
func (n *Node) DeleteLog(ctx context.Context, name string) error {
	if err := checkLogName(name); err != nil {
		return err
	}
	off, err := n.def.proposeLogChange(ctx, name, nil)
	if err != nil {
		return logChangeErr("delete", name, err)
	}
	return n.waitFor(ctx, func(c *catalog) bool {
		// Closed here, or open as an incarnation created after the
		// deletion (the name taken again, both changes reaching this node
		// at once): the one deleted is gone either way.
		ll := n.logs[name]
		return c.hw > off && (ll == nil || ll.entry.incarnation > off)
	})
}

// logChangeErr names the log in a catalog change's error.
func logChangeErr(what, name string, err error) error {
	switch {
	case errors.Is(err, replica.ErrLogExists):
		return fmt.Errorf("%w: %q", ErrLogExists, name)
	case errors.Is(err, replica.ErrUnknownLog):
		return fmt.Errorf("%w: %q", ErrUnknownLog, name)
	}
	return fmt.Errorf("replog: %s log %q: %w", what, name, err)
}

// waitFor waits until done, called under n.mu with the newest catalog,
// says so.
func (n *Node) waitFor(ctx context.Context, done func(c *catalog) bool) error {
	n.waiters.Add(1)
	defer n.waiters.Add(-1)
	for {
		n.mu.Lock()
		c, ready := n.cat.Load(), n.ready
		ok := c != nil && done(c)
		n.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ready:
		case <-ctx.Done():
			return ctx.Err()
		case <-n.closing:
			return ErrClosed
		}
	}
}

// waitNamedLogsLevel waits for the cluster's feature level to reach
// protocol.FeatureLevelNamedLogs, which a new cluster's leader raises it
// to soon after its election (R68), unless this node's MaxFeatureLevel
// holds it lower. It ends with an error wrapping ErrFeatureLevelTooLow
// (and ctx's error, when ctx ends first: a node of an older release keeps
// the level down).
func (n *Node) waitNamedLogsLevel(ctx context.Context) error {
	want := protocol.FeatureLevelNamedLogs
	if h := n.opts.MaxFeatureLevel; h > 0 && h < want {
		return fmt.Errorf("%w: Options.MaxFeatureLevel (%d) holds the cluster below %d, the level named logs need", ErrFeatureLevelTooLow, h, want)
	}
	for {
		if lvl := n.def.Status().FeatureLevel; lvl >= want {
			return nil
		}
		t := time.NewTimer(retryMax / 4)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w: the cluster is at level %d, named logs need %d (every node must run a release that supports it): %w",
				ErrFeatureLevelTooLow, n.def.Status().FeatureLevel, want, ctx.Err())
		case <-n.closing:
			t.Stop()
			return ErrClosed
		case <-t.C:
		}
	}
}

// proposeLogChange proposes a catalog change to this (default) log, as
// CommitCursor proposes a cursor's: created (spec not empty) or deleted.
// It returns the offset of the change's entry.
func (l *Log) proposeLogChange(ctx context.Context, name string, spec []byte) (uint64, error) {
	r := &request{prod: l.prod}
	var key protocol.Key
	r.seq, key = l.prod.begin("")
	r.ev = shell.LogChange(0, key, name, spec)
	defer l.prod.end(r.seq)
	return l.appendUntilKnown(ctx, r)
}

// Log returns the named log name, open on this node. Errors:
// ErrUnknownLog if the catalog (as this node has it committed) does not
// hold it, or holds it but it is not open here yet; ErrNotReplica if this
// node is not one of its replicas; ErrClosed after Close.
func (n *Node) Log(name string) (*Log, error) {
	select {
	case <-n.closing:
		return nil, ErrClosed
	default:
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if ll := n.logs[name]; ll != nil {
		return ll.log, nil
	}
	var e catalogEntry
	ok := false
	if c := n.cat.Load(); c != nil {
		e, ok = c.logs[name]
	}
	switch {
	case !ok:
		return nil, fmt.Errorf("%w: %q", ErrUnknownLog, name)
	case !slices.Contains(e.spec.Replicas, n.opts.NodeID):
		return nil, fmt.Errorf("%w: %q is on %v", ErrNotReplica, name, e.spec.Replicas)
	}
	return nil, fmt.Errorf("%w: %q is not open on this node yet", ErrUnknownLog, name)
}

// Logs lists the named logs of the catalog as this node has it
// committed, sorted by name.
func (n *Node) Logs() []LogInfo {
	c := n.cat.Load()
	if c == nil {
		return nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return c.infos(n.opts.NodeID, func(name string) bool { return n.logs[name] != nil })
}

// Name returns the log's name: "" for a node's default log (and a log
// Open opened).
func (l *Log) Name() string { return l.name }

// reconciler opens and closes the named logs as the catalog says: at
// start, whenever the catalog changes, and every reconcileInterval (to
// try again what failed). One goroutine per node.
func (n *Node) reconciler() {
	defer n.wg.Done()
	t := time.NewTicker(reconcileInterval)
	defer t.Stop()
	for {
		n.reconcile()
		select {
		case <-n.closing:
			return
		case <-n.catChanged:
		case <-t.C:
		}
	}
}

// reconcile makes the named logs open here those of the catalog this
// node is a replica of: it closes (and removes the files of) every open
// log the catalog no longer holds, or holds as another incarnation; it
// opens every one it holds and is not open; it removes the directories of
// logs deleted while the node was down.
func (n *Node) reconcile() {
	c := n.cat.Load()
	if c == nil {
		return
	}
	self := n.opts.NodeID
	n.mu.Lock()
	var gone []*localLog
	for name, ll := range n.logs {
		e, ok := c.logs[name]
		if inc, bad := c.undecoded[name]; bad && inc == ll.entry.incarnation {
			continue // its spec does not decode: that is not a deletion
		}
		if !ok || e.incarnation != ll.entry.incarnation || !slices.Contains(e.spec.Replicas, self) {
			gone = append(gone, ll)
			delete(n.logs, name)
		}
	}
	n.mu.Unlock()
	for _, ll := range gone {
		n.logger.Info("log deleted: closing it and removing its files", "log", ll.entry.name)
		ll.log.crash() // deleted: nothing to hand over
		n.mux.remove(ll.in)
		if err := os.RemoveAll(ll.log.opts.Dir); err != nil {
			n.logger.Warn("removing a deleted log's directory", "log", ll.entry.name, "error", err)
			continue
		}
		n.forgetJournal(ll.jid, ll.log.opts.Dir)
	}
	if len(gone) > 0 {
		n.signal()
	}
	n.mu.Lock()
	for _, e := range c.logs {
		if !slices.Contains(e.spec.Replicas, self) || n.logs[e.name] != nil {
			continue
		}
		if _, ok := n.opening[e.name]; ok {
			continue
		}
		n.opening[e.name] = e.incarnation
		n.toOpen = append(n.toOpen, e)
	}
	for len(n.toOpen) > n.openers && n.openers < openConcurrency {
		n.openers++
		n.wg.Add(1)
		go n.opener()
	}
	n.mu.Unlock()
	n.removeStale(c)
}

// openConcurrency bounds the named logs a node opens at once: a restart
// with many logs opens them side by side (each open is mostly waiting for
// its files and fsyncs), without a thousand goroutines at once.
const openConcurrency = 16

// opener opens the logs the reconciler queued (n.toOpen), one after
// another, and ends when none is left: up to openConcurrency run at
// once. A log whose open fails is logged and left closed; the
// reconciler queues it again on its next pass (a failure never stops the
// others).
func (n *Node) opener() {
	defer n.wg.Done()
	for {
		n.mu.Lock()
		if len(n.toOpen) == 0 {
			n.toOpen = nil
			n.openers--
			n.mu.Unlock()
			return
		}
		e := n.toOpen[0]
		n.toOpen = n.toOpen[1:]
		n.mu.Unlock()
		err := n.openNamed(e)
		n.mu.Lock()
		delete(n.opening, e.name)
		n.mu.Unlock()
		if err != nil {
			if !errors.Is(err, ErrClosed) {
				n.logger.Error("opening a log of the catalog (tried again later)", "log", e.name, "error", err)
			}
			continue
		}
		// Deleted (or placed elsewhere) while it opened: the reconciler
		// closes it now rather than at its next tick.
		if c := n.cat.Load(); c != nil {
			if now, ok := c.logs[e.name]; !ok || now.incarnation != e.incarnation || !slices.Contains(now.spec.Replicas, n.opts.NodeID) {
				select {
				case n.catChanged <- struct{}{}:
				default:
				}
			}
		}
		n.signal()
	}
}

// openNamed opens catalog entry e's log here.
func (n *Node) openNamed(e catalogEntry) error {
	select {
	case <-n.closing:
		return ErrClosed
	default:
	}
	j, err := n.sharedJournal()
	if err != nil {
		return err
	}
	o := n.namedOptions(e)
	logger := n.logger.With("log", e.name)
	cfgs := o.components(logger)
	cfgs.store.Journal = false
	cfgs.store.SharedJournal = j
	if err := os.MkdirAll(filepath.Dir(o.Dir), 0o755); err != nil {
		return fmt.Errorf("replog: create %s: %w", filepath.Dir(o.Dir), err)
	}
	// A new log's directory is a spare made ahead, renamed (one fsync),
	// or else made whole and durable in one pass (storage.CreateDir: 8
	// fsyncs, where OpenDir's step-by-step creation takes 16); then it
	// is opened as one that exists (R101). A spare has its log ID on the
	// journal already, which journalID reads from it.
	create := false
	if _, err := os.Lstat(o.Dir); errors.Is(err, os.ErrNotExist) {
		took, err := n.takeSpare(o.Dir)
		if err != nil {
			return err
		}
		create = !took
	}
	jid, err := n.journalID(j, o.Dir, e.incarnation)
	if err != nil {
		return err
	}
	cfgs.store.JournalLogID = jid
	if create {
		if err := storage.CreateDir(o.Dir, cfgs.identity, cfgs.store); err != nil {
			return err
		}
	}
	np, in := n.mux.add(wireLogName(e.name, e.incarnation), e.spec.Replicas)
	np.members = slices.DeleteFunc(slices.Clone(e.spec.Replicas), func(id string) bool { return id == n.opts.NodeID })
	np.firstCandidate = e.spec.Leader
	l, err := openLog(o, logger, cfgs, func() (netParts, error) { return np, nil }, e.name, n.groupWriter(j))
	if err != nil {
		n.mux.remove(in)
		return err
	}
	n.mu.Lock()
	n.logs[e.name] = &localLog{log: l, in: in, entry: e, jid: jid}
	n.mu.Unlock()
	n.logger.Debug("log opened", "log", e.name, "replicas", e.spec.Replicas)
	return nil
}

// spareDirs is how many empty log directories a node that holds named
// logs keeps made ahead: a creation then waits for a rename, not for a
// directory's files and their fsyncs. Four, made two at a time
// (spareMakers), keep up with creations one after another; many at once
// make the rest themselves.
const spareDirs = 4

// spareMakers is how many spares a node makes at once: each takes a
// handful of fsyncs one after another, which one maker alone does more
// slowly than creations one after another take them.
const spareMakers = 2

// spareDirPrefix starts a spare directory's name under <Dir>/logs (a
// name no log has: log names do not start with '.').
const spareDirPrefix = ".spare-"

// takeSpare renames a spare directory to dir and makes the rename
// durable; took is false when no spare is ready. The first call starts
// the spare maker: a node that never holds a named log makes none.
func (n *Node) takeSpare(dir string) (took bool, err error) {
	n.mu.Lock()
	if !n.spareOn {
		n.spareOn = true
		n.wg.Add(1)
		go n.spareMaker()
	}
	var p string
	if len(n.spares) > 0 {
		p, n.spares = n.spares[0], n.spares[1:]
	}
	n.mu.Unlock()
	select {
	case n.spareWake <- struct{}{}:
	default:
	}
	if p == "" {
		return false, nil
	}
	if err := os.Rename(p, dir); err != nil {
		_ = os.RemoveAll(p)
		return false, fmt.Errorf("replog: take a spare log directory: %w", err)
	}
	if err := n.syncDirectory(filepath.Dir(dir)); err != nil {
		// Not durable: the directory must not be opened as if it were.
		_ = os.RemoveAll(dir)
		return false, fmt.Errorf("replog: take a spare log directory: %w", err)
	}
	return true, nil
}

// spareMaker keeps spareDirs spare directories made (storage.CreateDir,
// with this node's identity, on the shared journal under a log ID of
// their own), waking when one is taken. It first removes the spares a
// previous run left: they are made again rather than trusted across
// options that may have changed. One goroutine per node, from its first
// named log on.
func (n *Node) spareMaker() {
	// makeSpares, called last, ends this goroutine's share of n.wg.
	logs := filepath.Join(n.opts.Dir, logsDirName)
	if ents, err := os.ReadDir(logs); err == nil {
		for _, d := range ents {
			// Spares, and spares a crash stopped in the making.
			if of, _ := storage.IsCreatingDir(d.Name()); strings.HasPrefix(of, spareDirPrefix) || strings.HasPrefix(d.Name(), spareDirPrefix) {
				_ = os.RemoveAll(filepath.Join(logs, d.Name()))
			}
		}
	}
	for range spareMakers - 1 {
		n.wg.Add(1)
		go n.makeSpares()
	}
	n.makeSpares()
}

// makeSpares is one of the spare maker's spareMakers goroutines: it makes
// spares while fewer than spareDirs are ready or being made, and waits
// for a wake-up otherwise (passing it on while more are needed than it
// makes, so that creations one after another find them made side by
// side: one maker's fsyncs, one after another, fall behind).
func (n *Node) makeSpares() {
	defer n.wg.Done()
	for {
		n.mu.Lock()
		need := spareDirs - len(n.spares) - n.spareMaking
		if need > 0 {
			n.spareMaking++
		}
		n.mu.Unlock()
		if need > 1 {
			select {
			case n.spareWake <- struct{}{}:
			default:
			}
		}
		if need > 0 {
			p, err := n.makeSpare()
			n.mu.Lock()
			n.spareMaking--
			if err == nil {
				n.spares = append(n.spares, p)
			}
			n.mu.Unlock()
			if err == nil {
				continue
			}
			if !errors.Is(err, ErrClosed) {
				n.logger.Warn("making a spare log directory (new logs make their own)", "error", err)
			}
		}
		select {
		case <-n.closing:
			return
		case <-n.spareWake:
		}
	}
}

// makeSpare makes one spare directory and returns its path.
func (n *Node) makeSpare() (string, error) {
	select {
	case <-n.closing:
		return "", ErrClosed
	default:
	}
	j, err := n.sharedJournal()
	if err != nil {
		return "", err
	}
	n.mu.Lock()
	n.spareSeq++
	seq := n.spareSeq
	n.mu.Unlock()
	// Named by the time too: never a name a previous run's spare had.
	path := filepath.Join(n.opts.Dir, logsDirName, fmt.Sprintf("%s%d-%d", spareDirPrefix, time.Now().UnixNano(), seq))
	cfgs := n.opts.components(n.logger)
	cfgs.store.Journal = false
	cfgs.store.SharedJournal = j
	if cfgs.store.JournalLogID, err = n.journalID(j, path, seq); err != nil {
		return "", err
	}
	if err := storage.CreateDir(path, cfgs.identity, cfgs.store); err != nil {
		return "", err
	}
	return path, nil
}

// syncDirectory makes dir's entries (a rename) durable, unless NoSync.
func (n *Node) syncDirectory(dir string) error {
	if n.opts.NoSync {
		return nil
	}
	return storage.SyncDir(dir)
}

// namedOptions are the Options of catalog entry e's log on this node:
// the node's, with the per-log fields from the catalog, its own
// directory and its replicas as its voters.
func (n *Node) namedOptions(e catalogEntry) Options {
	o := n.opts
	e.spec.Options.applyTo(&o)
	o.Dir = filepath.Join(n.opts.Dir, logsDirName, logDirName(e.name, e.incarnation))
	o.Voters = slices.Clone(e.spec.Replicas)
	o.Listener = nil
	return o.withDefaults()
}

// sharedJournal returns the named logs' journal, opening it first.
func (n *Node) sharedJournal() (*storage.Journal, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.journal != nil {
		return n.journal, nil
	}
	dir := filepath.Join(n.opts.Dir, logsDirName)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("replog: create %s: %w", dir, err)
	}
	j, err := storage.OpenJournal(filepath.Join(dir, sharedJournalName), storage.JournalOptions{NoSync: n.opts.NoSync})
	if err != nil {
		return nil, fmt.Errorf("replog: open the named logs' journal: %w", err)
	}
	n.journal = j
	return j, nil
}

// groupWriter returns the named logs' writer on the shared journal j,
// starting it first.
func (n *Node) groupWriter(j *storage.Journal) *groupWriter {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.writer == nil {
		n.writer = newGroupWriter(j, n.logger.Named("writer"))
	}
	return n.writer
}

// journalID is the log ID on the shared journal j of the store in dir, a
// log of incarnation inc: the one its journal reference records, else
// (a new directory) one no store, batch or other directory under
// <Dir>/logs has, journalLogID(inc) first. The ID belongs to the
// directory, not to the incarnation: two incarnations that fold alike
// into 32 bits would otherwise share it, the second could not attach, and
// after a restart whichever opened first would replay the other's batches
// as its own. Logs open side by side (opener), so the IDs the
// directories hold are kept in n.jids, read from them once and added to
// as each new directory is given its ID here, before its reference is
// written: two new directories never get the same one, and N creations
// read N references, not N².
func (n *Node) journalID(j *storage.Journal, dir string, inc uint64) (uint32, error) {
	if id, ok, err := storage.JournalLogIDOf(dir); err != nil || ok {
		if err == nil {
			n.mu.Lock()
			if n.jids != nil {
				n.jids[id] = true
			}
			n.mu.Unlock()
		}
		return id, err
	}
	n.mu.Lock()
	scanned := n.jids != nil
	n.mu.Unlock()
	if !scanned {
		taken, err := n.scanJournalIDs()
		if err != nil {
			return 0, err
		}
		n.mu.Lock()
		if n.jids == nil {
			n.jids = taken
		} else {
			maps.Copy(n.jids, taken)
		}
		n.mu.Unlock()
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for id := journalLogID(inc); ; id = journalLogID(uint64(id) + 1) {
		if !n.jids[id] && !j.InUse(id) {
			n.jids[id] = true
			return id, nil
		}
	}
}

// scanJournalIDs reads the log IDs the directories under <Dir>/logs
// record.
func (n *Node) scanJournalIDs() (map[uint32]bool, error) {
	logs := filepath.Join(n.opts.Dir, logsDirName)
	taken := map[uint32]bool{}
	ents, err := os.ReadDir(logs)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("replog: read %s: %w", logs, err)
	}
	for _, d := range ents {
		if !d.IsDir() {
			continue
		}
		// A damaged reference keeps its directory from opening at all;
		// what the journal holds of it, InUse sees.
		if id, ok, err := storage.JournalLogIDOf(filepath.Join(logs, d.Name())); err == nil && ok {
			taken[id] = true
		}
	}
	return taken, nil
}

// removeStale removes the directories under <Dir>/logs of logs the
// catalog no longer holds: deleted while this node was down. Only those
// whose creation the catalog has passed (incarnation below its HW): a
// node whose committed catalog is behind must not take a newer log for a
// deleted one. Each is opened once on the shared journal first, so that
// its batches still there are checkpointed and leave the journal.
func (n *Node) removeStale(c *catalog) {
	dir := filepath.Join(n.opts.Dir, logsDirName)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, d := range ents {
		if !d.IsDir() {
			continue
		}
		if of, ok := storage.IsCreatingDir(d.Name()); ok {
			// A spare's is the spare maker's: it may be building it now.
			if !strings.HasPrefix(of, spareDirPrefix) {
				n.removeCreating(dir, d.Name(), of)
			}
			continue
		}
		i := strings.LastIndexByte(d.Name(), '-')
		if i < 0 {
			continue
		}
		name := d.Name()[:i]
		inc, err := strconv.ParseUint(d.Name()[i+1:], 10, 64)
		if err != nil || protocol.ValidLogName(name) != nil {
			continue
		}
		e, ok := c.logs[name]
		u, undecoded := c.undecoded[name] // held, whatever its spec says
		n.mu.Lock()
		o, opening := n.opening[name]
		n.mu.Unlock()
		if opening && o == inc {
			continue // an opener has it: the next pass decides
		}
		if inc >= c.hw || undecoded && u == inc || ok && e.incarnation == inc && slices.Contains(e.spec.Replicas, n.opts.NodeID) {
			continue
		}
		path := filepath.Join(dir, d.Name())
		jid, onJournal, _ := storage.JournalLogIDOf(path)
		if err := n.drainDir(path, inc); err != nil {
			n.logger.Warn("a deleted log's directory could not be drained from the journal; removing it anyway", "dir", path, "error", err)
		}
		n.logger.Info("removing the directory of a log deleted while this node was down", "dir", path)
		if err := os.RemoveAll(path); err != nil {
			n.logger.Warn("removing a deleted log's directory", "dir", path, "error", err)
			continue
		}
		if onJournal {
			n.forgetJournal(jid, path)
		}
	}
}

// removeCreating removes name, in dir (<Dir>/logs), the temporary
// directory storage.CreateDir left building the directory of log
// directory of: a crash stopped it before its rename, so nothing in it
// was ever used. Not while an opener may be building it now.
func (n *Node) removeCreating(dir, name, of string) {
	n.mu.Lock()
	busy := len(n.opening) > 0
	n.mu.Unlock()
	if busy {
		return
	}
	path := filepath.Join(dir, name)
	n.logger.Info("removing a log directory whose creation did not finish", "dir", path, "for", of)
	if err := os.RemoveAll(path); err != nil {
		n.logger.Warn("removing an unfinished log directory", "dir", path, "error", err)
	}
}

// forgetJournal drops what the shared journal still holds of log id,
// whose directory dir is gone (its store failed, or could not be drained,
// before it checkpointed): nothing will claim those batches, and they
// would keep the journal from being cut past them, stalling every named
// log's writes once its ring is full.
func (n *Node) forgetJournal(id uint32, dir string) {
	j, err := n.sharedJournal()
	if err == nil {
		err = j.Forget(id)
	}
	if err != nil {
		n.logger.Warn("dropping a deleted log's batches from the shared journal", "dir", dir, "error", err)
	}
}

// drainDir opens the store in dir (a log of incarnation inc) on the
// shared journal and closes it: what the journal held of it goes to its
// segments, and the journal can cut past it.
func (n *Node) drainDir(dir string, inc uint64) error {
	j, err := n.sharedJournal()
	if err != nil {
		return err
	}
	o := n.opts
	o.Dir = dir
	cfgs := o.components(n.logger)
	cfgs.store.Journal = false
	cfgs.store.SharedJournal = j
	if cfgs.store.JournalLogID, err = n.journalID(j, dir, inc); err != nil {
		return err
	}
	s, _, err := openStore(dir, cfgs.identity, cfgs.store)
	if err != nil {
		return err
	}
	return s.Close()
}

// balancer moves the leadership of each named log this node leads to the
// log's preferred leader when that is a voter caught up with it (Kafka's
// preferred leader election): leaders stay spread as placement spread
// them, and come back after a restart. A log whose preferred leader is
// gone or behind stays where it is. It runs a pass every
// balanceInterval, at once when a peer comes back (R107), and passes
// back to back while the last one moved something: a peer that comes
// back has its logs caught up one after another, and each pass moves
// those ready.
func (n *Node) balancer() {
	defer n.wg.Done()
	t := time.NewTicker(balanceInterval)
	defer t.Stop()
	for {
		select {
		case <-n.closing:
			return
		case <-t.C:
		case <-n.peerBack:
		}
		for n.balancePass() > 0 {
			select {
			case <-n.closing:
				return
			default:
			}
		}
	}
}

// peerReturned wakes the balancer for a pass at once (R107): a node that
// joined or came back is a preferred leader to hand logs back to, and
// waiting for the next tick would leave its logs on the others.
func (n *Node) peerReturned() {
	select {
	case n.peerBack <- struct{}{}:
	default:
	}
}

// balancePass hands each named log this node leads over to its preferred
// leader where balance says so, up to balanceConcurrency at once, and
// returns how many moved.
func (n *Node) balancePass() int {
	n.mu.Lock()
	lead := make([]*localLog, 0, len(n.logs))
	for _, ll := range n.logs {
		lead = append(lead, ll)
	}
	n.mu.Unlock()
	return runBalancePass(lead, balanceConcurrency, n.closing, n.balance)
}

// runBalancePass calls move for each of logs, at most limit at once, and
// returns how many it reported moved; it starts none once closing is
// closed, and returns when those started have. Each log is in one call
// at most, and the pass returns only when they have all ended, so a
// log's balanceState is never touched by two goroutines at once.
func runBalancePass(logs []*localLog, limit int, closing <-chan struct{}, move func(*localLog) bool) int {
	var moved atomic.Int32
	var wg sync.WaitGroup
	sem := make(chan struct{}, limit)
start:
	for _, ll := range logs {
		select {
		case <-closing: // checked before a free slot, which select might pick
			break start
		default:
		}
		select {
		case <-closing:
			break start
		case sem <- struct{}{}:
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if move(ll) {
				moved.Add(1)
			}
		}()
	}
	wg.Wait()
	return int(moved.Load())
}

// balance transfers ll's leadership to its preferred leader if this node
// leads it, the preferred leader is a caught-up voter and the log's
// backoff allows (balanceState); it reports whether the leadership moved.
func (n *Node) balance(ll *localLog) bool {
	pref := ll.entry.spec.Leader
	st := ll.log.Status()
	if st.Role != RoleLeader || pref == "" || pref == n.opts.NodeID {
		return false
	}
	caughtUp := false
	for _, v := range st.Voters {
		if v.ID == pref {
			caughtUp = st.RemoteLEO[pref] >= st.LEO
		}
	}
	if !caughtUp || !ll.bal.due(time.Now()) {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), balanceTransferMax)
	defer cancel()
	go func() {
		select {
		case <-n.closing:
			cancel()
		case <-ctx.Done():
		}
	}()
	if err := ll.log.TransferLeadership(ctx, pref); err != nil {
		n.logger.Debug("moving a log's leadership to its preferred leader", "log", ll.entry.name, "to", pref, "error", err)
		return false
	}
	ll.bal.moved(time.Now())
	n.logger.Debug("log's leadership moved to its preferred leader", "log", ll.entry.name, "to", pref, "hold_next", max(ll.bal.backoff, balanceBackoffMin))
	return true
}

// Close closes the node: its named logs (each leader first hands its
// leadership over, as Log.Close does), then the default log, then the
// journal, gossip and the transport. Later calls return the first call's
// result.
func (n *Node) Close() error {
	n.closeOnce.Do(func() { n.closeErr = n.shutdown(true) })
	return n.closeErr
}

// crash stops the node the way a killed process looks to its peers (see
// Log.crash). For in-process tests.
func (n *Node) crash() {
	n.closeOnce.Do(func() { n.closeErr = n.shutdown(false) })
}

func (n *Node) shutdown(graceful bool) error {
	close(n.closing)
	n.wg.Wait()
	n.mu.Lock()
	logs := n.logs
	n.logs = map[string]*localLog{}
	n.mu.Unlock()
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for _, ll := range logs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			if graceful {
				err = ll.log.Close()
			} else {
				ll.log.crash()
			}
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if graceful {
		errs = append(errs, n.def.Close())
	} else {
		n.def.crash()
	}
	errs = append(errs, n.closeShared(graceful))
	return errors.Join(errs...)
}

// closeShared closes what the node's logs share: the journal, the
// router, gossip (leaving first when graceful) and the transport.
func (n *Node) closeShared(graceful bool) error {
	var errs []error
	if n.writer != nil {
		n.writer.stop() // every named log's writer has stopped
	}
	if n.journal != nil {
		errs = append(errs, n.journal.Close())
	}
	if n.ml != nil {
		if graceful {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			if err := n.ml.Leave(ctx); err != nil {
				n.logger.Debug("gossip leave", "error", err)
			}
			cancel()
		}
		errs = append(errs, n.ml.Close())
	}
	if n.tcp != nil {
		errs = append(errs, n.tcp.Close())
	}
	if n.mux != nil {
		n.mux.close()
	}
	return errors.Join(errs...)
}

// NodeStats are a Node's own counters (each log has its Stats).
type NodeStats struct {
	// OpenLogs is how many named logs are open on this node.
	OpenLogs int `json:"open_logs"`
	// UnknownLogMessages counts the messages received for a log not open
	// on this node (not created yet here, deleted, another incarnation),
	// dropped (R84).
	UnknownLogMessages uint64 `json:"unknown_log_messages"`
	// InboxFullDrops counts the messages, lost peers and hints dropped
	// because their log's inbox was full (a log whose loop fell behind).
	InboxFullDrops uint64 `json:"inbox_full_drops"`
	// The node's contact with its peers (docs/protocol.md R98-R100), from
	// its transport: FetchesSent counts the fetch requests it sent (every
	// log's), HeartbeatsSent and HeartbeatsReceived its heartbeats,
	// ContactResyncs the resyncs a lost quiescent message asked for, and
	// PeersSilent the peers it heard nothing from for FetchTimeout. All 0
	// on a single node.
	FetchesSent        uint64 `json:"fetches_sent"`
	HeartbeatsSent     uint64 `json:"heartbeats_sent"`
	HeartbeatsReceived uint64 `json:"heartbeats_received"`
	ContactResyncs     uint64 `json:"contact_resyncs"`
	PeersSilent        uint64 `json:"peers_silent"`
}

// Stats returns the Node's counters.
func (n *Node) Stats() NodeStats {
	n.mu.Lock()
	open := len(n.logs)
	n.mu.Unlock()
	st := NodeStats{OpenLogs: open, UnknownLogMessages: n.mux.unknown.Load(), InboxFullDrops: n.mux.full.Load()}
	if n.tcp != nil {
		ts := n.tcp.Stats()
		st.FetchesSent, st.HeartbeatsSent, st.HeartbeatsReceived = ts.FetchesSent, ts.HeartbeatsSent, ts.HeartbeatsReceived
		st.ContactResyncs, st.PeersSilent = ts.ContactResyncs, ts.PeersSilent
	}
	return st
}
