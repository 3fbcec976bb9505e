package transport

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
)

// TCPConfig configures a TCP transport. Zero values take the defaults named
// on each field.
type TCPConfig struct {
	// NodeID is this node's ID, sent in every handshake. Required, at most
	// 255 bytes.
	NodeID string
	// ClusterID names the cluster; peers with another cluster ID are
	// refused (ErrWrongCluster). At most 255 bytes; "" is a valid ID.
	ClusterID string
	// ListenAddr is the "host:port" to listen on; port 0 picks a free port
	// (see Addr). Required.
	ListenAddr string
	// Resolver maps node IDs to addresses. It is called by Send (to answer
	// ErrUnknownPeer) and before every (re)connect. Required.
	Resolver Resolver
	// TLS, if set, secures every connection: the listener uses it as a
	// server config (set Certificates, and ClientAuth/ClientCAs for mutual
	// TLS), the dialer as a client config (set RootCAs, and Certificates
	// for mutual TLS). When ServerName is empty the dialer uses the host of
	// the resolved address. nil means plain TCP.
	TLS *tls.Config
	// VerifyPeer, if set, is called on the accepting side for every inbound
	// connection once the peer has named itself, with the TLS state (nil
	// without TLS). An error refuses the connection. With mutual TLS it
	// ties the certificate to the node ID (see VerifyCertNamesNode), so
	// that one node's certificate cannot speak for another node.
	VerifyPeer func(nodeID string, cs *tls.ConnectionState) error
	// MaxFrameSize bounds every frame sent or received, in bytes. Default
	// DefaultMaxFrameSize (16 MiB). An outbound message above it is dropped
	// and logged; an inbound one closes the connection.
	MaxFrameSize int
	// DialTimeout bounds one TCP connect (and TLS handshake). Default 5s.
	DialTimeout time.Duration
	// HandshakeTimeout bounds the replog handshake on both sides. Default 10s.
	HandshakeTimeout time.Duration
	// WriteTimeout bounds a write to a peer that stopped reading; the
	// connection is then closed and redialled. Default 10s.
	WriteTimeout time.Duration
	// BackoffMin and BackoffMax bound the exponential backoff between
	// failed connects to one peer (doubling, jittered to [d/2, d]).
	// Defaults 50ms and 2s.
	BackoffMin time.Duration
	BackoffMax time.Duration
	// QueueSize is the capacity of each per-peer outbound queue (there are
	// two per peer: fetch traffic and the rest). Send drops a message whose
	// queue is full. Default 256.
	QueueSize int
	// ReceiveQueueSize is the capacity of the Receive channel. Default 4096.
	ReceiveQueueSize int
	// ReceiveTimeout is how long a connection's reader waits for room in a
	// full Receive channel before it drops the message (logged at Warn).
	// Waiting pushes back on the sender through TCP instead of dropping at
	// the first burst; the bound keeps a stalled consumer from stalling
	// peers forever. Default 1s.
	ReceiveTimeout time.Duration
	// Logger receives the transport's logs (Named "transport"). Default
	// hclog.NewNullLogger().
	Logger hclog.Logger
}

func (c *TCPConfig) setDefaults() {
	if c.MaxFrameSize <= 0 {
		c.MaxFrameSize = DefaultMaxFrameSize
	}
	if c.DialTimeout <= 0 {
		c.DialTimeout = 5 * time.Second
	}
	if c.HandshakeTimeout <= 0 {
		c.HandshakeTimeout = 10 * time.Second
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = 10 * time.Second
	}
	if c.BackoffMin <= 0 {
		c.BackoffMin = 50 * time.Millisecond
	}
	if c.BackoffMax <= 0 {
		c.BackoffMax = 2 * time.Second
	}
	if c.BackoffMax < c.BackoffMin {
		c.BackoffMax = c.BackoffMin
	}
	if c.QueueSize <= 0 {
		c.QueueSize = 256
	}
	if c.ReceiveQueueSize <= 0 {
		c.ReceiveQueueSize = 4096
	}
	if c.ReceiveTimeout <= 0 {
		c.ReceiveTimeout = time.Second
	}
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
}

// TCPStats counts messages since the transport started.
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
	// for ReceiveTimeout, or From/To did not match the connection.
	DroppedInbound uint64
	// PeerClosed counts outbound connections that the peer closed (or that
	// broke) while this side was not writing; the next message redials.
	PeerClosed uint64
	// BadConns counts inbound connections closed for a failed handshake or
	// a malformed, oversized or unexpected frame.
	BadConns uint64
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
// for longer than one backoff interval.
//
// Inbound, one reader goroutine per connection decodes frames and delivers
// them to Receive (see TCPConfig.ReceiveTimeout). A malformed, oversized or
// unexpected frame (a control message on the fetch connection or the
// reverse) closes that connection, logged at Warn; a message whose From is
// not the node that opened the connection, or whose To is not this node, is
// dropped and logged.
type TCP struct {
	cfg  TCPConfig
	log  hclog.Logger
	ln   net.Listener
	recv chan Message

	done   chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	closed bool
	peers  map[string]*peer
	conns  map[net.Conn]struct{}

	closeOnce sync.Once

	sent, received, droppedQueue, droppedNoConn, droppedInbound, peerClosed, badConns atomic.Uint64
}

var _ Transport = (*TCP)(nil)

// NewTCP starts a TCP transport listening on cfg.ListenAddr.
func NewTCP(cfg TCPConfig) (*TCP, error) {
	cfg.setDefaults()
	if cfg.NodeID == "" {
		return nil, errors.New("replog: TCPConfig.NodeID is required")
	}
	if cfg.ListenAddr == "" {
		return nil, errors.New("replog: TCPConfig.ListenAddr is required")
	}
	if cfg.Resolver == nil {
		return nil, errors.New("replog: TCPConfig.Resolver is required")
	}
	if err := checkHandshakeFields(handshake{NodeID: cfg.NodeID, ClusterID: cfg.ClusterID}); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.ListenAddr)
	if err != nil {
		return nil, fmt.Errorf("replog: transport listen: %w", err)
	}
	if cfg.TLS != nil {
		ln = tls.NewListener(ln, cfg.TLS)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t := &TCP{
		cfg:    cfg,
		log:    cfg.Logger.Named("transport"),
		ln:     ln,
		recv:   make(chan Message, cfg.ReceiveQueueSize),
		done:   make(chan struct{}),
		ctx:    ctx,
		cancel: cancel,
		peers:  map[string]*peer{},
		conns:  map[net.Conn]struct{}{},
	}
	t.wg.Add(1)
	go t.acceptLoop()
	t.log.Debug("listening", "addr", ln.Addr().String(), "tls", cfg.TLS != nil)
	return t, nil
}

// Addr returns the address the transport listens on ("host:port"), with
// the actual port when ListenAddr asked for port 0.
func (t *TCP) Addr() string { return t.ln.Addr().String() }

// Stats returns the transport's counters.
func (t *TCP) Stats() TCPStats {
	return TCPStats{
		Sent:             t.sent.Load(),
		Received:         t.received.Load(),
		DroppedQueueFull: t.droppedQueue.Load(),
		DroppedNoConn:    t.droppedNoConn.Load(),
		DroppedInbound:   t.droppedInbound.Load(),
		PeerClosed:       t.peerClosed.Load(),
		BadConns:         t.badConns.Load(),
	}
}

// laneOf returns the connection class a message kind travels on.
func laneOf(k Kind) uint8 {
	if k == KindFetchRequest || k == KindFetchResponse {
		return laneData
	}
	return laneControl
}

// Send implements Transport. An empty m.From is set to this node's ID; a
// different one is an error (the receiver would drop it). A message to this
// node itself is delivered straight to Receive.
func (t *TCP) Send(m Message) error {
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
	select {
	case l.q <- m:
	default:
		t.droppedQueue.Add(1)
		t.log.Debug("outbound queue full, dropping message", "peer", m.To, "msg", m.Body)
	}
	return nil
}

// Receive implements Transport.
func (t *TCP) Receive() <-chan Message { return t.recv }

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
		l := &lane{t: t, peer: id, kind: uint8(i), q: make(chan Message, t.cfg.QueueSize)}
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
	q    chan Message
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
	// unflushed counts messages written since the last successful flush:
	// those a broken connection may have lost.
	unflushed uint64
}

// maxKeptBuffer caps the encode buffer a lane keeps between frames.
const maxKeptBuffer = 4 << 20

func (l *lane) run() {
	t := l.t
	defer t.wg.Done()
	defer l.disconnect()
	for {
		var m Message
		select {
		case <-t.done:
			return
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
		}
	}
	err := l.dial()
	if err == nil {
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
	if errors.Is(err, ErrWrongCluster) {
		l.log.Warn("peer refused us: wrong cluster or version", "error", err, "retry_in", wait, "dropped", dropped)
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
	if err := l.handshake(conn, addr); err != nil {
		t.untrack(conn)
		return err
	}
	l.conn = conn
	l.peerGone = make(chan struct{})
	t.wg.Add(1)
	go t.watch(conn, l.peerGone)
	if l.bw == nil {
		l.bw = bufio.NewWriterSize(conn, 64<<10)
	} else {
		l.bw.Reset(conn)
	}
	l.deadline = time.Time{}
	l.unflushed = 0
	return nil
}

func (l *lane) handshake(conn net.Conn, addr string) error {
	t := l.t
	_ = conn.SetDeadline(time.Now().Add(t.cfg.HandshakeTimeout))
	hello := appendHandshake(nil, handshake{
		Version: ProtocolVersion, Type: hsHello, Lane: l.kind,
		ClusterID: t.cfg.ClusterID, NodeID: t.cfg.NodeID,
	})
	if _, err := conn.Write(hello); err != nil {
		return fmt.Errorf("handshake with %s: %w", addr, err)
	}
	h, err := readHandshake(conn)
	if err != nil {
		return fmt.Errorf("handshake with %s: %w", addr, err)
	}
	switch {
	case h.Type == hsRefuseCluster:
		return fmt.Errorf("%w: %s refused: %s", ErrWrongCluster, addr, h.Reason)
	case h.Type == hsRefuse:
		return fmt.Errorf("replog: %s refused: %s", addr, h.Reason)
	case h.Type != hsAccept:
		return fmt.Errorf("%w: handshake answer of type %d from %s", ErrBadFrame, h.Type, addr)
	case h.ClusterID != t.cfg.ClusterID:
		return fmt.Errorf("%w: %s is in cluster %q, we are in %q", ErrWrongCluster, addr, h.ClusterID, t.cfg.ClusterID)
	case h.NodeID != l.peer:
		return fmt.Errorf("replog: dialled %s at %s but reached %s", l.peer, addr, h.NodeID)
	case h.Lane != l.kind:
		return fmt.Errorf("%w: handshake answer for lane %d, want %d", ErrBadFrame, h.Lane, l.kind)
	}
	_ = conn.SetDeadline(time.Time{})
	return nil
}

// write encodes m into the buffered connection. Only connection errors are
// returned; a message too large for MaxFrameSize is dropped and logged.
func (l *lane) write(m Message) error {
	t := l.t
	if size := EncodedSize(m); size > t.cfg.MaxFrameSize {
		t.droppedQueue.Add(1)
		l.log.Warn("message above MaxFrameSize, dropped", "msg", m.Body, "size", size, "limit", t.cfg.MaxFrameSize)
		return nil
	}
	buf, err := AppendFrame(l.buf[:0], m)
	if err != nil {
		l.log.Warn("cannot encode message, dropped", "msg", m.Body, "error", err)
		return nil
	}
	// Refreshing the deadline costs a clock read and a poller update; do
	// it only when a quarter of the timeout has passed.
	if now := time.Now(); l.deadline.Sub(now) < t.cfg.WriteTimeout*3/4 {
		l.deadline = now.Add(t.cfg.WriteTimeout)
		_ = l.conn.SetWriteDeadline(l.deadline)
	}
	_, err = l.bw.Write(buf)
	if cap(buf) <= maxKeptBuffer {
		l.buf = buf
	} else {
		l.buf = nil
	}
	if err == nil {
		t.sent.Add(1)
		l.unflushed++
	}
	return err
}

// watch reads from an outbound connection, on which the acceptor never
// sends anything after the handshake, so the read returns only when the
// connection ends (or the peer misbehaves): then it closes gone. This
// notices a peer that closed the connection while it was idle, before the
// next message is written into it and lost.
func (t *TCP) watch(c net.Conn, gone chan struct{}) {
	defer t.wg.Done()
	var b [1]byte
	_, err := c.Read(b[:])
	if !errors.Is(err, net.ErrClosed) {
		t.peerClosed.Add(1)
	}
	close(gone)
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
		if !t.track(c) {
			_ = c.Close()
			return
		}
		t.wg.Add(1)
		go t.serve(c)
	}
}

// serve runs the acceptor's handshake on c, then reads frames until the
// connection ends or misbehaves.
func (t *TCP) serve(c net.Conn) {
	defer t.wg.Done()
	defer t.untrack(c)
	remote := c.RemoteAddr().String()
	log := t.log.With("remote", remote)
	_ = c.SetDeadline(time.Now().Add(t.cfg.HandshakeTimeout))
	br := bufio.NewReaderSize(c, 64<<10)
	h, err := readHandshake(br)
	refuse := func(typ uint8, reason string) {
		_, _ = c.Write(appendHandshake(nil, handshake{
			Version: ProtocolVersion, Type: typ, Lane: h.Lane,
			ClusterID: t.cfg.ClusterID, NodeID: t.cfg.NodeID, Reason: truncate(reason, maxIDLen),
		}))
	}
	if err != nil {
		if t.isClosed() {
			return
		}
		t.badConns.Add(1)
		if errors.Is(err, ErrWrongCluster) {
			refuse(hsRefuseCluster, err.Error())
		}
		log.Warn("inbound handshake failed, closing", "error", err)
		return
	}
	switch {
	case h.Type != hsHello:
		err = fmt.Errorf("%w: handshake of type %d, want hello", ErrBadFrame, h.Type)
	case h.ClusterID != t.cfg.ClusterID:
		err = fmt.Errorf("%w: peer %q is in cluster %q, we are in %q", ErrWrongCluster, h.NodeID, h.ClusterID, t.cfg.ClusterID)
		refuse(hsRefuseCluster, fmt.Sprintf("cluster ID %q, want %q", h.ClusterID, t.cfg.ClusterID))
	case h.NodeID == "" || h.NodeID == t.cfg.NodeID:
		err = fmt.Errorf("replog: peer announced node ID %q", h.NodeID)
		refuse(hsRefuse, fmt.Sprintf("node ID %q not allowed here", h.NodeID))
	case t.cfg.VerifyPeer != nil:
		var cs *tls.ConnectionState
		if tc, ok := c.(*tls.Conn); ok {
			st := tc.ConnectionState()
			cs = &st
		}
		if verr := t.cfg.VerifyPeer(h.NodeID, cs); verr != nil {
			err = fmt.Errorf("%w: peer %q: %w", ErrPeerNotVerified, h.NodeID, verr)
			refuse(hsRefuse, truncate(verr.Error(), maxIDLen))
		}
	}
	if err != nil {
		t.badConns.Add(1)
		log.Warn("inbound handshake refused, closing", "error", err)
		return
	}
	accept := appendHandshake(nil, handshake{
		Version: ProtocolVersion, Type: hsAccept, Lane: h.Lane,
		ClusterID: t.cfg.ClusterID, NodeID: t.cfg.NodeID,
	})
	if _, err := c.Write(accept); err != nil {
		log.Debug("inbound handshake: answer failed", "error", err)
		return
	}
	// Idle connections are fine (TCP keepalive finds dead peers); only the
	// handshake had a deadline.
	_ = c.SetDeadline(time.Time{})
	log = log.With("peer", h.NodeID, "lane", laneName(h.Lane))
	log.Debug("inbound connection")
	r := NewReader(br, t.cfg.MaxFrameSize)
	var timer *time.Timer
	for {
		m, err := r.Read()
		if err != nil {
			if t.isClosed() || errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
				log.Debug("inbound connection ended", "error", err)
				return
			}
			if errors.Is(err, ErrBadFrame) || errors.Is(err, ErrFrameTooLarge) {
				t.badConns.Add(1)
				log.Warn("bad frame, closing connection", "error", err)
			} else {
				log.Debug("inbound connection ended", "error", err)
			}
			return
		}
		if k := m.Body.Kind(); laneOf(k) != h.Lane {
			t.badConns.Add(1)
			log.Warn("unexpected frame on this connection, closing", "kind", k)
			return
		}
		if m.From != h.NodeID || m.To != t.cfg.NodeID {
			t.droppedInbound.Add(1)
			log.Warn("message with wrong From/To dropped", "from", m.From, "to", m.To)
			continue
		}
		select {
		case t.recv <- m:
			t.received.Add(1)
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
			log.Warn("receive queue full, message dropped", "msg", m.Body)
		case <-t.done:
			return
		}
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

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
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
