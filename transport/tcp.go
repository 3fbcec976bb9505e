package transport

import (
	"bufio"
	"context"
	cryptorand "crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/replog-io/replog/protocol"
)

// TCPStats counts messages and connections since the transport started.
type TCPStats struct {
	// Sent is the number of frames written to connections (buffered; a
	// frame written just before a connection breaks may still be lost).
	Sent uint64
	// Received is the number of messages delivered to Receive.
	Received uint64
	// DroppedQueueFull counts messages Send dropped because the peer's
	// outbound queue was full, and messages above MaxFrameSize.
	DroppedQueueFull uint64
	// DroppedNoConn counts queued messages dropped because a connect
	// failed, or lost with a broken connection's unflushed batch.
	DroppedNoConn uint64
	// DroppedInbound counts inbound messages dropped: Receive stayed full
	// for ReceiveTimeout, or From/To did not match the connection (which
	// is then closed).
	DroppedInbound uint64
	// PeerClosed counts outbound connections that the peer closed (or that
	// broke) while this side was not writing; the next message redials.
	PeerClosed uint64
	// BadConns counts inbound connections closed for a failed or refused
	// handshake or a malformed, oversized, unexpected or misaddressed
	// frame.
	BadConns uint64
	// Unauthenticated counts inbound handshakes that failed
	// authentication (also counted in BadConns): with a Secret, a dialer
	// without it or with a wrong proof; without one, a dialer offering
	// one.
	Unauthenticated uint64
	// RefusedConns counts inbound connections closed at once for
	// MaxInboundConns or MaxInboundConnsPerIP.
	RefusedConns uint64
	// IdleClosed counts inbound connections closed by IdleTimeout.
	IdleClosed uint64
	// Replaced counts inbound connections closed because the same node
	// opened a newer one on the same lane.
	Replaced uint64
	// BudgetCuts counts inbound connections cut to keep
	// PartialFrameBudget.
	BudgetCuts uint64
	// PartialFrameBytes is the number of bytes charged to
	// PartialFrameBudget now, and PartialFramePeak the most ever charged
	// at once: neither exceeds the budget.
	PartialFrameBytes int64
	PartialFramePeak  int64
	// InboundConns is the number of inbound connections open now
	// (handshaking or established).
	InboundConns int
	// KeepalivesSent counts keepalives written on idle outbound
	// connections.
	KeepalivesSent uint64
	// UnknownMessages counts inbound frames dropped, their connection
	// kept, because they carry a message kind or wire version this node
	// does not know (protocol.ErrUnknownMessage): what a newer peer may
	// send; the feature is absent here.
	UnknownMessages uint64
	// HangUpsLive counts hang-ups of peers not reported on PeerDown
	// because their address still took a connection (the peer lives on).
	HangUpsLive uint64
	// EmptyConns counts inbound connections closed by the dialer before
	// their first byte: another node's hang-up probe (PeerDown), or a
	// port check. They are not BadConns.
	EmptyConns uint64
	// DroppedNamedLog counts messages of a named log (Message.Log set)
	// not sent because their connection negotiated a wire version below
	// protocol.LogNameVersion: the peer runs a release without named logs,
	// which would read the message as the default log's. It rises while
	// a cluster is mixed only if a named log exists, which needs feature
	// level protocol.FeatureLevelNamedLogs and so every node upgraded.
	DroppedNamedLog uint64
	// FetchesSent counts FetchRequest frames written: with
	// HeartbeatsSent, what an idle node costs its peers (R99).
	FetchesSent uint64
	// HeartbeatsSent and HeartbeatsReceived count heartbeats (R98);
	// ContactResyncs the resyncs the heartbeats' counts or a dropped
	// quiescent message asked for (R100); PeersSilent the peers reported
	// on Silent. All 0 without HeartbeatInterval.
	HeartbeatsSent, HeartbeatsReceived, ContactResyncs, PeersSilent uint64
}

// TCP is the TCP (optionally TLS) Transport.
//
// Each peer gets two outbound connections, dialled lazily on the first
// message and redialled with backoff after failures: one carries fetch
// traffic (FetchRequest, FetchResponse), the other everything else, so a
// multi-megabyte fetch response never delays a vote, BeginEpoch or append
// behind it. As a consequence, order is preserved per pair of nodes within
// each class, not between a fetch message and a control message. Each
// connection carries frames one way only (dialer to acceptor): a node
// answers over its own connection to the other node.
//
// Send never blocks: it queues the message (dropping it when the queue is
// full), and a writer goroutine per connection batches the queue into the
// socket, flushing when the queue is empty. A connect failure drops what
// is queued at that moment, so messages never pile up behind a dead peer
// for longer than one backoff interval. A connection with nothing to send
// for IdleTimeout/4 carries a keepalive. Every frame is encoded in the
// wire version its connection negotiated; a message of a named log
// (Message.Log set) on a connection below protocol.LogNameVersion is
// dropped (TCPStats.DroppedNamedLog), never sent without its name, which
// the peer would read as its default log's (docs/protocol.md R79).
//
// Authentication. Every connection opens with a handshake (handshake.go).
// With TCPConfig.Secret set, both ends prove they hold the secret by
// challenge-response over fresh nonces from both sides, bound to the
// protocol version, cluster ID, both node IDs, lane and direction, so a
// recorded transcript can be neither replayed nor reflected; the acceptor
// says nothing but a nonce until the dialer's proof checks out, and a
// refusal (in any mode) carries no cluster ID, node ID or reason. A node
// with a Secret talks only to nodes that prove it. Without a Secret,
// peers are identified by the node ID they claim, which is only as good
// as the network (or mutual TLS with VerifyPeer) makes it.
//
// Inbound, one reader goroutine per connection decodes frames and delivers
// them to Receive (see TCPConfig.ReceiveTimeout). Every message delivered
// carries From = the node ID its connection handshook (with a Secret:
// authenticated) as: a frame claiming another From, or addressed to
// another node, is dropped and its connection closed. A malformed,
// oversized or unexpected frame (a control message on the fetch
// connection or the reverse) closes that connection too.
//
// Limits, each in TCPConfig with its default: inbound connections above
// MaxInboundConns, or MaxInboundConnsPerIP from one address, are closed at
// once; a handshake must finish within HandshakeTimeout; an established
// inbound connection that sends nothing for IdleTimeout is closed, and a
// newer connection from the same node on the same lane replaces it; the
// buffers of partly received frames over all inbound connections stay
// within PartialFrameBudget (the slowest senders are cut, never the
// process). Refused and misbehaving inbound connections are logged at
// Warn at most once per RefusalLogInterval per reason, with the number of
// lines suppressed.
type TCP struct {
	cfg     TCPConfig
	log     hclog.Logger
	ln      net.Listener
	addr    string // ln's address, formatted once: the loop asks every round
	recv    chan protocol.Message
	down    chan string
	authKey []byte
	rand    io.Reader
	budget  *frameBudget
	logLim  *logLimiter

	done   chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	closed  bool
	peers   map[string]*peer
	conns   map[net.Conn]struct{}
	inbound int
	perIP   map[string]int
	// lanesIn maps an established inbound connection's node and lane to
	// it, so a newer one replaces it.
	lanesIn map[inboundKey]net.Conn

	closeOnce sync.Once

	sent, received, droppedQueue, droppedNoConn, droppedInbound, peerClosed, badConns atomic.Uint64
	unauthenticated, refusedConns, idleClosed, replaced, keepalives, unknownMessages  atomic.Uint64
	hangUpsLive, emptyConns, droppedNamedLog, fetchesSent                             atomic.Uint64
	// probing holds the peers whose hang-up is being probed (peerDown).
	probing map[string]bool
	// nextKey is deriveAuthKey(NextSecret), or nil.
	nextKey []byte
	// contact is the node's contact with its peers (contact.go), nil
	// without HeartbeatInterval.
	contact *peerContact
}

type inboundKey struct {
	node string
	lane uint8
}

var _ Transport = (*TCP)(nil)

// NewTCP starts a TCP transport listening on cfg.ListenAddr, or serving
// cfg.Listener (which it then owns, and closes on failure too). Errors
// wrap ErrInvalidConfig (see TCPConfig.Validate), or are the listener's.
func NewTCP(cfg TCPConfig) (*TCP, error) {
	if err := cfg.Validate(); err != nil {
		if cfg.Listener != nil {
			_ = cfg.Listener.Close()
		}
		return nil, err
	}
	cfg.EnsureDefaults() // cfg is NewTCP's copy
	var key []byte
	if len(cfg.Secret) > 0 {
		key = deriveAuthKey(cfg.Secret)
	}
	var nextKey []byte
	if len(cfg.NextSecret) > 0 {
		nextKey = deriveAuthKey(cfg.NextSecret)
	}
	cfg.Secret, cfg.NextSecret = nil, nil // only the derived keys are kept
	ln := cfg.Listener
	cfg.Listener = nil // ln is the one kept
	if ln == nil {
		var err error
		ln, err = net.Listen("tcp", cfg.ListenAddr)
		if err != nil {
			return nil, fmt.Errorf("replog: transport listen: %w", err)
		}
	}
	if cfg.TLS != nil {
		ln = tls.NewListener(ln, cfg.TLS)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t := &TCP{
		cfg:     cfg,
		log:     cfg.Logger.Named("transport"),
		ln:      ln,
		addr:    ln.Addr().String(),
		recv:    make(chan protocol.Message, cfg.ReceiveQueueSize),
		down:    make(chan string, peerDownQueue),
		authKey: key,
		nextKey: nextKey,
		rand:    cryptorand.Reader,
		budget:  newFrameBudget(cfg.PartialFrameBudget),
		logLim:  newLogLimiter(cfg.RefusalLogInterval),
		done:    make(chan struct{}),
		ctx:     ctx,
		cancel:  cancel,
		peers:   map[string]*peer{},
		conns:   map[net.Conn]struct{}{},
		perIP:   map[string]int{},
		lanesIn: map[inboundKey]net.Conn{},
	}
	if cfg.HeartbeatInterval > 0 {
		t.contact = newPeerContact(cfg)
		t.wg.Add(1)
		go t.contactLoop()
	}
	t.wg.Add(1)
	go t.acceptLoop()
	t.log.Debug("listening", "addr", ln.Addr().String(), "tls", cfg.TLS != nil, "authenticated", key != nil)
	return t, nil
}

// Addr returns the address the transport listens on ("host:port"), with
// the actual port when ListenAddr asked for port 0 (Listener's address
// when one was given).
func (t *TCP) Addr() string { return t.addr }

// Stats returns the transport's counters.
func (t *TCP) Stats() TCPStats {
	used, peak, cuts := t.budget.stats()
	t.mu.Lock()
	inbound := t.inbound
	t.mu.Unlock()
	st := TCPStats{
		Sent:              t.sent.Load(),
		Received:          t.received.Load(),
		DroppedQueueFull:  t.droppedQueue.Load(),
		DroppedNoConn:     t.droppedNoConn.Load(),
		DroppedInbound:    t.droppedInbound.Load(),
		PeerClosed:        t.peerClosed.Load(),
		BadConns:          t.badConns.Load(),
		Unauthenticated:   t.unauthenticated.Load(),
		RefusedConns:      t.refusedConns.Load(),
		IdleClosed:        t.idleClosed.Load(),
		Replaced:          t.replaced.Load(),
		BudgetCuts:        cuts,
		PartialFrameBytes: used,
		PartialFramePeak:  peak,
		InboundConns:      inbound,
		KeepalivesSent:    t.keepalives.Load(),
		UnknownMessages:   t.unknownMessages.Load(),
		HangUpsLive:       t.hangUpsLive.Load(),
		EmptyConns:        t.emptyConns.Load(),
		DroppedNamedLog:   t.droppedNamedLog.Load(),
		FetchesSent:       t.fetchesSent.Load(),
	}
	t.contactStats(&st)
	return st
}

// warnLimited logs a Warn line about an inbound connection, at most once
// per RefusalLogInterval per reason (a fixed string).
func (t *TCP) warnLimited(log hclog.Logger, reason, msg string, args ...any) {
	ok, suppressed := t.logLim.allow(reason)
	if !ok {
		return
	}
	if suppressed > 0 {
		args = append(args, "suppressed", suppressed)
	}
	log.Warn(msg, args...)
}

// laneOf returns the connection class a message kind travels on. A
// snapshot chunk is as large as a fetch answer: it travels on the data
// lane too, so that it never holds up a vote.
func laneOf(k protocol.Kind) uint8 {
	switch k {
	case protocol.KindFetchRequest, protocol.KindFetchResponse, protocol.KindSnapshotRequest, protocol.KindSnapshotResponse:
		return laneData
	}
	return laneControl
}

// Send implements Transport. An empty m.From is set to this node's ID; a
// different one is an error (the receiver would drop it). A message to this
// node itself is delivered straight to Receive.
func (t *TCP) Send(m protocol.Message) error {
	if m.Body == nil {
		return fmt.Errorf("replog: message to %s has no body", m.To)
	}
	if m.From == "" {
		m.From = t.cfg.NodeID
	} else if m.From != t.cfg.NodeID {
		return fmt.Errorf("replog: node %s cannot send as %s", t.cfg.NodeID, m.From)
	}
	if m.To != t.cfg.NodeID {
		if _, ok := t.cfg.Resolver(m.To); !ok {
			t.mu.Lock()
			closed := t.closed
			t.mu.Unlock()
			if closed {
				return ErrClosed
			}
			return fmt.Errorf("%w: %s", ErrUnknownPeer, m.To)
		}
	}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return ErrClosed
	}
	if m.To == t.cfg.NodeID {
		// Under t.mu, so Close cannot close recv meanwhile.
		select {
		case t.recv <- m:
			t.received.Add(1)
		default:
			t.droppedInbound.Add(1)
			t.log.Debug("receive queue full, dropping message to self", "msg", m.Body)
		}
		t.mu.Unlock()
		return nil
	}
	p := t.peers[m.To]
	if p == nil {
		p = t.newPeerLocked(m.To)
	}
	t.mu.Unlock()
	l := p.lanes[laneOf(m.Body.Kind())]
	t.noteSent(m)
	select {
	case l.q <- m:
	default:
		t.droppedQueue.Add(1)
		t.log.Debug("outbound queue full, dropping message", "peer", m.To, "msg", m.Body)
	}
	return nil
}

// Receive implements Transport.
func (t *TCP) Receive() <-chan protocol.Message { return t.recv }

// peerDownQueue is PeerDown's buffer. Reports beyond it are dropped: the
// receiver acts on the first one for a peer, and the fetch timeout still
// notices a peer that is gone.
const peerDownQueue = 64

// PeerDown returns the channel of peers whose established connection, in
// or out, this transport saw end by the peer's doing (end of stream or a
// reset) and whose address then no longer takes connections: its process
// ended, or it closed its transport. A connection that only goes quiet (a
// partition, a paused process) is not reported, nor one this transport
// closed itself (Close, a newer connection from the same peer, a
// misbehaving peer cut), nor a hang-up after which the peer's address
// still takes a connection and keeps it open for hangUpProbeWait (a reset
// by a middlebox or a flapping link, or an impostor's hang-up: the peer
// lives on; HangUpsLive counts them). Each ended connection is at most one
// report, so a peer that dies is usually reported more than once; reports
// the receiver does not take in time are dropped. The channel is closed by
// Close. The root feeds it to the core (replica.Replica.PeerDown,
// docs/protocol.md R69).
func (t *TCP) PeerDown() <-chan string { return t.down }

// hangUpProbeWait is how long a hang-up probe's connection must stay open,
// with nothing read, for the peer to count as alive. A dead peer's address
// refuses the connect (no process listens) or, behind a proxy or load
// balancer, closes it at once; a live node's acceptor waits for a
// handshake and sends nothing. It bounds the probe in the live case only:
// a dead peer is reported as soon as its address refuses.
const hangUpProbeWait = 100 * time.Millisecond

// peerDown probes peer, which ended a connection, and reports it on
// PeerDown if its address no longer takes connections. One probe per peer
// runs at a time: the hang-ups of one death (every connection ends at
// once) make one report.
func (t *TCP) peerDown(peer string) {
	t.mu.Lock()
	if t.closed || t.probing[peer] {
		t.mu.Unlock()
		return
	}
	if t.probing == nil {
		t.probing = make(map[string]bool)
	}
	t.probing[peer] = true
	t.wg.Add(1)
	t.mu.Unlock()
	go func() {
		defer t.wg.Done()
		alive := t.probeAlive(peer)
		t.mu.Lock()
		delete(t.probing, peer)
		t.mu.Unlock()
		if alive {
			t.hangUpsLive.Add(1)
			t.log.Debug("a peer hung up but still takes connections: not reported down", "peer", peer)
			return
		}
		if t.isClosed() {
			return
		}
		select {
		case t.down <- peer:
		default:
		}
	}()
}

// probeAlive reports whether peer's address takes a TCP connection and
// keeps it open, silent, for hangUpProbeWait. It sends nothing (the
// acceptor takes a connection closed before its first byte for a probe),
// and a peer it cannot resolve counts as down.
func (t *TCP) probeAlive(peer string) bool {
	addr, ok := t.cfg.Resolver(peer)
	if !ok {
		return false
	}
	ctx, cancel := context.WithTimeout(t.ctx, t.cfg.DialTimeout)
	defer cancel()
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return false
	}
	if !t.track(c) {
		_ = c.Close()
		return false
	}
	defer t.untrack(c)
	_ = c.SetReadDeadline(time.Now().Add(hangUpProbeWait))
	var b [1]byte
	_, err = c.Read(b[:])
	// Silent until the deadline: a live acceptor. Anything read means
	// something answers there; only an end of stream or a reset (a proxy
	// whose backend is gone) is a dead peer.
	return err == nil || errors.Is(err, os.ErrDeadlineExceeded)
}

// hungUp reports whether a read error means the peer ended the connection
// (end of stream, reset), not this side's close, a deadline or a bad frame.
func hungUp(err error) bool {
	return err != nil && !errors.Is(err, net.ErrClosed) && !errors.Is(err, os.ErrDeadlineExceeded) &&
		!errors.Is(err, ErrBadFrame) && !errors.Is(err, ErrFrameTooLarge)
}

// Close implements Transport: it stops the listener, closes every
// connection, waits for every goroutine and closes Receive. Messages still
// queued are dropped.
func (t *TCP) Close() error {
	t.closeOnce.Do(func() {
		t.mu.Lock()
		t.closed = true
		close(t.done)
		t.cancel()
		conns := make([]net.Conn, 0, len(t.conns))
		for c := range t.conns {
			conns = append(conns, c)
		}
		t.mu.Unlock()
		_ = t.ln.Close()
		for _, c := range conns {
			_ = c.Close()
		}
		t.wg.Wait()
		close(t.recv)
		close(t.down)
		t.log.Debug("closed")
	})
	return nil
}

// track registers c so Close can close it; false if already closed.
func (t *TCP) track(c net.Conn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	t.conns[c] = struct{}{}
	return true
}

func (t *TCP) untrack(c net.Conn) {
	t.mu.Lock()
	delete(t.conns, c)
	t.mu.Unlock()
	_ = c.Close()
}

// peer holds the two outbound lanes to one node.
type peer struct {
	lanes [2]*lane
}

// newPeerLocked creates a peer and starts its writers. t.mu is held and t
// is not closed, so the wg.Add happens before Close's Wait.
func (t *TCP) newPeerLocked(id string) *peer {
	p := &peer{}
	for i := range p.lanes {
		l := &lane{t: t, peer: id, kind: uint8(i), q: make(chan protocol.Message, t.cfg.QueueSize), kick: make(chan struct{}, 1)}
		l.log = t.log.With("peer", id, "lane", laneName(l.kind))
		p.lanes[i] = l
		t.wg.Add(1)
		go l.run()
	}
	t.peers[id] = p
	return p
}

func laneName(k uint8) string {
	if k == laneData {
		return "fetch"
	}
	return "control"
}

// lane is one outbound connection to a peer and its queue; run is its
// writer goroutine and the only user of the connection.
type lane struct {
	t    *TCP
	peer string
	kind uint8
	q    chan protocol.Message
	log  hclog.Logger

	conn     net.Conn
	bw       *bufio.Writer
	buf      []byte
	backoff  time.Duration
	nextDial time.Time
	deadline time.Time
	// peerGone is closed when the current connection's watcher sees it
	// end.
	peerGone chan struct{}
	// kick ends a backoff early: the peer just dialed us, so it is up
	// (a node that starts last is reached at once, not after a backoff
	// of up to BackoffMax grown while it was down).
	kick chan struct{}
	// unflushed counts messages written since the last successful flush:
	// those a broken connection may have lost.
	unflushed uint64
	// wire is the wire version the connection's handshake negotiated:
	// every frame on it is encoded in it.
	wire uint8
	// namedDropLogged: this connection has logged a named log's message
	// it could not carry (one Debug line per connection: the next one may
	// reach an upgraded peer).
	namedDropLogged bool
}

// maxKeptBuffer caps the encode buffer a lane keeps between frames.
const maxKeptBuffer = 4 << 20

func (l *lane) run() {
	t := l.t
	defer t.wg.Done()
	defer l.disconnect()
	// The keepalive timer runs while a connection is up and restarts after
	// every batch, so only a connection idle for IdleTimeout/4 gets one.
	keepalive := t.cfg.IdleTimeout / 4
	ka := time.NewTimer(keepalive)
	defer ka.Stop()
	for {
		var kaC <-chan time.Time
		if l.conn != nil {
			ka.Reset(keepalive)
			kaC = ka.C
		}
		var m protocol.Message
		select {
		case <-t.done:
			return
		case <-kaC:
			l.keepalive()
			continue
		case m = <-l.q:
		}
		if l.conn != nil {
			select {
			case <-l.peerGone:
				// Redial now rather than write into a connection the
				// peer has closed (say, it restarted), where the
				// message would be lost.
				l.log.Debug("peer closed the connection, redialling")
				l.disconnect()
			default:
			}
		}
		if l.conn == nil && !l.connect() {
			continue
		}
		err := l.write(m)
		for err == nil && len(l.q) > 0 {
			select {
			case m = <-l.q:
				err = l.write(m)
			default:
			}
		}
		if err == nil {
			err = l.bw.Flush()
		}
		if err == nil {
			l.unflushed = 0
		}
		if err != nil {
			select {
			case <-t.done:
				return
			default:
			}
			l.log.Warn("connection lost, will redial", "error", err)
			t.droppedNoConn.Add(l.unflushed)
			l.disconnect()
		}
	}
}

// keepalive writes a keepalive on the idle connection, so the acceptor's
// IdleTimeout does not cut it; a connection the peer has closed is
// dropped instead (the next message redials).
func (l *lane) keepalive() {
	select {
	case <-l.peerGone:
		l.log.Debug("peer closed the idle connection")
		l.disconnect()
		return
	default:
	}
	l.refreshWriteDeadline()
	_, err := l.bw.Write(keepaliveFrame[:])
	if err == nil {
		err = l.bw.Flush()
	}
	if err != nil {
		l.log.Debug("keepalive failed, will redial", "error", err)
		l.disconnect()
		return
	}
	l.t.keepalives.Add(1)
}

// connect waits out the backoff, then dials. On failure it drops whatever
// is queued (stale by the time a later connect succeeds) and backs off.
func (l *lane) connect() bool {
	t := l.t
	if wait := time.Until(l.nextDial); wait > 0 {
		timer := time.NewTimer(wait)
		select {
		case <-t.done:
			timer.Stop()
			return false
		case <-timer.C:
		case <-l.kick:
			timer.Stop()
		}
	}
	err := l.dial()
	if err == nil {
		select {
		case <-l.kick: // stale: we are connected
		default:
		}
		l.backoff = 0
		l.log.Debug("connected", "addr", l.conn.RemoteAddr().String())
		return true
	}
	if l.backoff == 0 {
		l.backoff = t.cfg.BackoffMin
	} else {
		l.backoff = min(2*l.backoff, t.cfg.BackoffMax)
	}
	wait := l.backoff/2 + rand.N(l.backoff/2+1)
	l.nextDial = time.Now().Add(wait)
	dropped := 1
	for len(l.q) > 0 {
		select {
		case <-l.q:
			dropped++
		default:
		}
	}
	t.droppedNoConn.Add(uint64(dropped))
	select {
	case <-t.done:
		return false
	default:
	}
	if errors.Is(err, ErrWrongCluster) || errors.Is(err, ErrUnauthenticated) {
		// At most one line per RefusalLogInterval: an impostor at a
		// peer's address must not flood the log either.
		t.warnLimited(l.log, "dial-refused", "peer refused us, or failed to authenticate", "error", err, "retry_in", wait, "dropped", dropped)
	} else {
		l.log.Debug("connect failed", "error", err, "retry_in", wait, "dropped", dropped)
	}
	return false
}

// dial resolves the peer, connects, runs TLS and the replog handshake.
func (l *lane) dial() error {
	t := l.t
	addr, ok := t.cfg.Resolver(l.peer)
	if !ok {
		return fmt.Errorf("%w: %s", ErrUnknownPeer, l.peer)
	}
	ctx, cancel := context.WithTimeout(t.ctx, t.cfg.DialTimeout)
	defer cancel()
	nd := &net.Dialer{}
	var conn net.Conn
	var err error
	if t.cfg.TLS != nil {
		td := &tls.Dialer{NetDialer: nd, Config: t.cfg.TLS}
		conn, err = td.DialContext(ctx, "tcp", addr)
	} else {
		conn, err = nd.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return err
	}
	if !t.track(conn) {
		_ = conn.Close()
		return ErrClosed
	}
	err = l.handshake(conn, addr, ProtocolVersion)
	if errors.Is(err, errOlderHandshake) {
		// A node of an earlier release: it closed the connection after
		// refusing our handshake version, so dial again in its version.
		t.untrack(conn)
		if t.cfg.TLS != nil {
			conn, err = (&tls.Dialer{NetDialer: nd, Config: t.cfg.TLS}).DialContext(ctx, "tcp", addr)
		} else {
			conn, err = nd.DialContext(ctx, "tcp", addr)
		}
		if err != nil {
			return err
		}
		if !t.track(conn) {
			_ = conn.Close()
			return ErrClosed
		}
		err = l.handshake(conn, addr, minProtocolVersion)
	}
	if err != nil {
		t.untrack(conn)
		return err
	}
	l.conn = conn
	l.peerGone = make(chan struct{})
	t.wg.Add(1)
	go t.watch(conn, l.peer, l.peerGone)
	if l.bw == nil {
		l.bw = bufio.NewWriterSize(conn, 64<<10)
	} else {
		l.bw.Reset(conn)
	}
	l.deadline = time.Time{}
	l.unflushed = 0
	l.namedDropLogged = false
	return nil
}

// handshake runs the dialer's handshake in the given version and records
// the wire version negotiated.
func (l *lane) handshake(conn net.Conn, addr string, version uint8) error {
	t := l.t
	_ = conn.SetDeadline(time.Now().Add(t.cfg.HandshakeTimeout))
	side := hsSide{key: t.authKey, clusterID: t.cfg.ClusterID, nodeID: t.cfg.NodeID, lane: l.kind, version: version, rand: t.rand}
	wire, err := dialHandshake(conn, side, l.peer)
	if err != nil {
		return fmt.Errorf("handshake with %s at %s: %w", l.peer, addr, err)
	}
	l.wire = wire
	t.enableContact(l.peer, wire)
	_ = conn.SetDeadline(time.Time{})
	return nil
}

// write encodes m into the buffered connection. Only connection errors are
// returned; a message too large for MaxFrameSize is dropped and logged, and
// so is a named log's message the connection's wire version cannot carry
// (counted in DroppedNamedLog): encoded without its name, it would reach
// the peer as a message of the default log.
func (l *lane) write(m protocol.Message) error {
	t := l.t
	if size := EncodedSizeAt(m, l.wire); size > t.cfg.MaxFrameSize {
		t.droppedQueue.Add(1)
		l.log.Warn("message above MaxFrameSize, dropped", "msg", m.Body, "size", size, "limit", t.cfg.MaxFrameSize)
		return nil
	}
	buf, err := AppendFrameAt(l.buf[:0], m, l.wire)
	if errors.Is(err, protocol.ErrLogNameVersion) {
		t.droppedNamedLog.Add(1)
		if !l.namedDropLogged {
			l.namedDropLogged = true
			l.log.Debug("peer speaks a wire version without log names: named logs' messages to it are dropped (logged once per connection)",
				"log", m.Log, "msg", m.Body, "wire", l.wire, "needs", protocol.LogNameVersion)
		}
		return nil
	}
	if _, hb := m.Body.(*protocol.Heartbeat); hb && errors.Is(err, protocol.ErrVersion) {
		// This lane's peer is older than the other lane's said: a
		// heartbeat is only contact, and contact is all it loses.
		return nil
	}
	if err != nil {
		l.log.Warn("cannot encode message, dropped", "msg", m.Body, "error", err)
		return nil
	}
	l.refreshWriteDeadline()
	_, err = l.bw.Write(buf)
	if cap(buf) <= maxKeptBuffer {
		l.buf = buf
	} else {
		l.buf = nil
	}
	if err == nil {
		t.sent.Add(1)
		if m.Body.Kind() == protocol.KindFetchRequest {
			t.fetchesSent.Add(1)
		}
		l.unflushed++
	}
	return err
}

// refreshWriteDeadline extends the write deadline. Refreshing costs a
// clock read and a poller update; do it only when a quarter of the timeout
// has passed.
func (l *lane) refreshWriteDeadline() {
	if now := time.Now(); l.deadline.Sub(now) < l.t.cfg.WriteTimeout*3/4 {
		l.deadline = now.Add(l.t.cfg.WriteTimeout)
		_ = l.conn.SetWriteDeadline(l.deadline)
	}
}

// watch reads from an outbound connection, on which the acceptor never
// sends anything after the handshake, so the read returns only when the
// connection ends (or the peer misbehaves): then it closes gone. This
// notices a peer that closed the connection while it was idle, before the
// next message is written into it and lost, and reports a peer that hung
// up (PeerDown).
func (t *TCP) watch(c net.Conn, peer string, gone chan struct{}) {
	defer t.wg.Done()
	var b [1]byte
	_, err := c.Read(b[:])
	if !errors.Is(err, net.ErrClosed) {
		t.peerClosed.Add(1)
	}
	close(gone)
	if hungUp(err) {
		t.peerDown(peer)
	}
}

func (l *lane) disconnect() {
	if l.conn != nil {
		l.t.untrack(l.conn)
		l.conn = nil
	}
}

func (t *TCP) acceptLoop() {
	defer t.wg.Done()
	var delay time.Duration
	for {
		c, err := t.ln.Accept()
		if err != nil {
			select {
			case <-t.done:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors and the like: back off and retry.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			t.log.Warn("accept failed", "error", err, "retry_in", delay)
			timer := time.NewTimer(delay)
			select {
			case <-t.done:
				timer.Stop()
				return
			case <-timer.C:
			}
			continue
		}
		delay = 0
		ip := remoteIP(c)
		switch reason := t.trackInbound(c, ip); reason {
		case "":
		case "closed":
			_ = c.Close()
			return
		default:
			_ = c.Close()
			t.refusedConns.Add(1)
			t.warnLimited(t.log, reason, "inbound connection refused: "+reason, "remote", c.RemoteAddr().String())
			continue
		}
		t.wg.Add(1)
		go t.serve(c, ip)
	}
}

// remoteIP returns the IP of c's remote address (the whole address if it
// has no port).
func remoteIP(c net.Conn) string {
	addr := c.RemoteAddr().String()
	if host, _, err := net.SplitHostPort(addr); err == nil {
		return host
	}
	return addr
}

// trackInbound registers an accepted connection, or returns why not:
// "closed", or the cap it would exceed.
func (t *TCP) trackInbound(c net.Conn, ip string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.closed:
		return "closed"
	case t.inbound >= t.cfg.MaxInboundConns:
		return "MaxInboundConns reached"
	case t.perIP[ip] >= t.cfg.MaxInboundConnsPerIP:
		return "MaxInboundConnsPerIP reached"
	}
	t.inbound++
	t.perIP[ip]++
	t.conns[c] = struct{}{}
	return ""
}

func (t *TCP) untrackInbound(c net.Conn, ip string) {
	t.mu.Lock()
	delete(t.conns, c)
	t.inbound--
	if t.perIP[ip]--; t.perIP[ip] <= 0 {
		delete(t.perIP, ip)
	}
	t.mu.Unlock()
	_ = c.Close()
}

// establish records c as node's connection on lane, replacing (closing)
// an older one.
func (t *TCP) establish(c net.Conn, k inboundKey) {
	t.mu.Lock()
	old := t.lanesIn[k]
	t.lanesIn[k] = c
	t.mu.Unlock()
	if old != nil {
		t.replaced.Add(1)
		_ = old.Close()
	}
}

// peerUp ends the backoff of node's lanes that wait to redial: it just
// dialed us.
func (t *TCP) peerUp(node string) {
	t.mu.Lock()
	p := t.peers[node]
	t.mu.Unlock()
	if p == nil {
		return
	}
	for _, l := range p.lanes {
		select {
		case l.kick <- struct{}{}:
		default:
		}
	}
}

func (t *TCP) disestablish(c net.Conn, k inboundKey) {
	t.mu.Lock()
	if t.lanesIn[k] == c {
		delete(t.lanesIn, k)
	}
	t.mu.Unlock()
}

// handshakeFailure classifies an inbound handshake error for the
// rate-limited log.
func handshakeFailure(err error) string {
	switch {
	case errors.Is(err, ErrUnauthenticated):
		return "inbound handshake: not authenticated"
	case errors.Is(err, ErrWrongCluster):
		return "inbound handshake: wrong cluster or version"
	case errors.Is(err, ErrPeerNotVerified):
		return "inbound handshake: node ID refused"
	case errors.Is(err, ErrBadFrame):
		return "inbound handshake: malformed"
	}
	return "inbound handshake: failed"
}

// serve runs the acceptor's handshake on c, then reads frames until the
// connection ends or misbehaves.
func (t *TCP) serve(c net.Conn, ip string) {
	defer t.wg.Done()
	defer t.untrackInbound(c, ip)
	remote := c.RemoteAddr().String()
	log := t.log.With("remote", remote)
	_ = c.SetDeadline(time.Now().Add(t.cfg.HandshakeTimeout))
	check := func(nodeID string) error {
		if t.cfg.VerifyPeer == nil {
			return nil
		}
		var cs *tls.ConnectionState
		if tc, ok := c.(*tls.Conn); ok {
			st := tc.ConnectionState()
			cs = &st
		}
		return t.cfg.VerifyPeer(nodeID, cs)
	}
	side := hsSide{key: t.authKey, nextKey: t.nextKey, clusterID: t.cfg.ClusterID, nodeID: t.cfg.NodeID, rand: t.rand}
	h, err := acceptHandshake(c, side, check)
	if err != nil {
		if t.isClosed() {
			return
		}
		if errors.Is(err, errEmptyConn) {
			// Closed before its first byte: a hang-up probe or a port
			// check, not a failed handshake.
			t.emptyConns.Add(1)
			log.Trace("inbound connection closed before its first byte")
			return
		}
		t.badConns.Add(1)
		if errors.Is(err, ErrUnauthenticated) {
			t.unauthenticated.Add(1)
		}
		reason := handshakeFailure(err)
		t.warnLimited(log, reason, reason+", closing", "error", err)
		return
	}
	key := inboundKey{h.NodeID, h.Lane}
	t.establish(c, key)
	t.peerUp(h.NodeID)
	defer t.disestablish(c, key)
	_ = c.SetDeadline(time.Time{})
	log = log.With("peer", h.NodeID, "lane", laneName(h.Lane))
	log.Debug("inbound connection")
	hold := t.budget.register(func() {
		t.warnLimited(log, "partial-frame budget", "partial-frame budget exhausted: cutting the slowest inbound connection", "budget", t.cfg.PartialFrameBudget)
		_ = c.Close()
	})
	defer hold.unregister()
	fr := &frameReader{
		r:       bufio.NewReaderSize(&idleReader{c: c, timeout: t.cfg.IdleTimeout}, 64<<10),
		maxSize: t.cfg.MaxFrameSize,
		hold:    hold,
	}
	var timer *time.Timer
	for {
		m, err := fr.read()
		if errors.Is(err, protocol.ErrUnknownMessage) {
			// Framed and checksummed, so the stream is in step: a newer
			// peer's message this node cannot read is dropped like a lost
			// one, and the connection (and the peer) stays.
			t.unknownMessages.Add(1)
			t.warnLimited(log, "unknown message", "message of an unknown kind or wire version dropped (a newer peer?); connection kept", "error", err)
			continue
		}
		if err != nil {
			switch {
			case t.isClosed():
			case errors.Is(err, os.ErrDeadlineExceeded):
				t.idleClosed.Add(1)
				log.Debug("inbound connection idle for IdleTimeout, closing", "idle_timeout", t.cfg.IdleTimeout)
			case errors.Is(err, ErrBadFrame) || errors.Is(err, ErrFrameTooLarge):
				t.badConns.Add(1)
				t.warnLimited(log, "bad frame", "bad frame, closing connection", "error", err)
			default:
				log.Debug("inbound connection ended", "error", err)
				if hungUp(err) {
					t.peerDown(h.NodeID)
				}
			}
			return
		}
		if k := m.Body.Kind(); laneOf(k) != h.Lane {
			t.badConns.Add(1)
			t.warnLimited(log, "wrong lane", "unexpected frame on this connection, closing", "kind", k)
			return
		}
		if m.From != h.NodeID || m.To != t.cfg.NodeID {
			// Every message on this connection comes from the node it
			// handshook as, to this node; anything else is an attempt to
			// speak for another node (or a badly broken peer).
			t.droppedInbound.Add(1)
			t.badConns.Add(1)
			t.warnLimited(log, "wrong From/To", "message with wrong From/To, dropped; closing connection", "from", m.From, "to", m.To)
			return
		}
		if t.noteHeard(m) {
			hold.release()
			continue // a heartbeat: the node's, no log sees it
		}
		// Once delivered (or dropped) the frame's buffer is the
		// receiver's (or garbage), no longer this connection's.
		select {
		case t.recv <- m:
			t.received.Add(1)
			hold.release()
			continue
		default:
		}
		if timer == nil {
			timer = time.NewTimer(t.cfg.ReceiveTimeout)
		} else {
			timer.Reset(t.cfg.ReceiveTimeout)
		}
		select {
		case t.recv <- m:
			t.received.Add(1)
		case <-timer.C:
			t.droppedInbound.Add(1)
			t.LostQuiescent(m)
			t.warnLimited(log, "receive queue full", "receive queue full, message dropped", "msg", m.Body)
		case <-t.done:
			return
		}
		hold.release()
		timer.Stop()
	}
}

func (t *TCP) isClosed() bool {
	select {
	case <-t.done:
		return true
	default:
		return false
	}
}

// VerifyCertNamesNode is a VerifyPeer for mutual TLS: the peer's verified
// certificate must name the node ID it claims, as a DNS name or as its
// common name.
func VerifyCertNamesNode(nodeID string, cs *tls.ConnectionState) error {
	if cs == nil || len(cs.PeerCertificates) == 0 {
		return errors.New("no client certificate")
	}
	leaf := cs.PeerCertificates[0]
	if leaf.Subject.CommonName == nodeID || slices.Contains(leaf.DNSNames, nodeID) {
		return nil
	}
	return fmt.Errorf("certificate names %q %v, not node %q", leaf.Subject.CommonName, leaf.DNSNames, nodeID)
}
