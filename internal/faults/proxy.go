package faults

import (
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"time"
)

// BlockMode says how a blocked direction behaves.
type BlockMode uint8

const (
	// Refuse cuts existing connections and closes new ones at once: the
	// sender sees errors quickly (a crashed peer, a firewall REJECT).
	Refuse BlockMode = iota + 1
	// Drop silently discards the blocked direction's bytes while keeping
	// connections open (a firewall DROP): the sender sees nothing until its
	// own timeouts fire. Connections that lost bytes are cut when the
	// direction is healed, because their byte stream is no longer whole.
	Drop
)

// String names the mode.
func (m BlockMode) String() string {
	switch m {
	case Refuse:
		return "refuse"
	case Drop:
		return "drop"
	}
	return "none"
}

// Proxy is a TCP proxy for one directed link: node From dials it to reach
// node To. The forward direction carries From's bytes to To, the backward
// direction To's replies to From. Each direction can be blocked on its own,
// so that the harness can cut A→B while B→A still flows.
//
// A Proxy is safe for concurrent use.
type Proxy struct {
	// From and To name the link's nodes.
	From, To string

	target string
	ln     net.Listener

	mu       sync.Mutex
	fwd      BlockMode // 0: passes
	back     BlockMode // 0: passes
	conns    map[*proxyConn]struct{}
	closed   bool
	accepted int
	dropped  int64
	delay    time.Duration // added before forwarding each chunk, both ways
	wg       sync.WaitGroup
	// loss is the share of chunks held for lossRTO, both ways (SetLoss).
	loss    float64
	lossRTO time.Duration
}

type proxyConn struct {
	client, server net.Conn
	once           sync.Once
	// tainted is set (under Proxy.mu) once a byte was dropped: the stream
	// is no longer whole and the connection must be cut at heal.
	tainted bool
}

func (c *proxyConn) cut() {
	c.once.Do(func() {
		_ = c.client.Close()
		if c.server != nil {
			_ = c.server.Close()
		}
	})
}

// NewProxy listens on a free loopback port and forwards every accepted
// connection to target. Close stops it.
func NewProxy(from, to, target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{From: from, To: to, target: target, ln: ln, conns: map[*proxyConn]struct{}{}}
	p.wg.Add(1)
	go p.acceptLoop()
	return p, nil
}

// Addr is the address From should dial to reach To.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Accepted returns how many connections the proxy has accepted.
func (p *Proxy) Accepted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted
}

// Dropped returns how many bytes the proxy has discarded or refused to
// forward.
func (p *Proxy) Dropped() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dropped
}

// Block blocks the forward (From→To) and/or backward (To→From) direction
// with mode. Refuse cuts existing connections at once; Drop keeps them
// open and discards the blocked bytes. A zero mode leaves a direction as
// it is.
func (p *Proxy) Block(fwd, back BlockMode) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if fwd != 0 {
		p.fwd = fwd
	}
	if back != 0 {
		p.back = back
	}
	if fwd == Refuse || back == Refuse {
		// Existing connections are cut either way; new ones are refused
		// only for a refused forward direction.
		for c := range p.conns {
			c.cut()
		}
	}
}

// SetDelay makes the link slow: every chunk, both ways, is held for d
// before it is forwarded (order is kept). Zero removes the delay. Heal
// removes it too.
func (p *Proxy) SetDelay(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.delay = d
}

// SetLoss makes the link lossy the way TCP sees a lossy network: each
// chunk, both ways, is held with probability p for rto before it is
// forwarded, with everything behind it (a lost segment is sent again
// after the retransmission timeout, and the stream waits for it; Linux's
// minimum RTO is 200ms). Bytes are never lost: the stream stays whole.
// Zero p removes it; Heal does not.
func (p *Proxy) SetLoss(prob float64, rto time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.loss, p.lossRTO = prob, rto
}

// Heal lets both directions pass again. Connections that dropped bytes
// while blocked are cut (the peers reconnect with a clean stream).
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fwd, p.back, p.delay = 0, 0, 0
	for c := range p.conns {
		if c.tainted {
			c.cut()
		}
	}
}

// CutAll cuts every open connection without changing the blocks.
func (p *Proxy) CutAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.cut()
	}
}

// Blocked reports the current modes of both directions (0: passes).
func (p *Proxy) Blocked() (fwd, back BlockMode) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.fwd, p.back
}

// Close stops accepting, cuts all connections and waits for the proxy's
// goroutines.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.cut()
	}
	p.mu.Unlock()
	err := p.ln.Close()
	p.wg.Wait()
	return err
}

func (p *Proxy) acceptLoop() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		p.mu.Lock()
		p.accepted++
		refuse := p.closed || p.fwd == Refuse
		p.mu.Unlock()
		if refuse {
			_ = client.Close()
			continue
		}
		p.wg.Add(1)
		go p.serve(client)
	}
}

func (p *Proxy) serve(client net.Conn) {
	defer p.wg.Done()
	server, err := net.DialTimeout("tcp", p.target, 2*time.Second)
	if err != nil {
		// The target is down: the dialer sees its connection closed, as
		// it would see a refused dial without the proxy.
		_ = client.Close()
		return
	}
	c := &proxyConn{client: client, server: server}
	p.mu.Lock()
	if p.closed || p.fwd == Refuse {
		p.mu.Unlock()
		c.cut()
		return
	}
	p.conns[c] = struct{}{}
	p.mu.Unlock()

	done := make(chan struct{}, 2)
	go func() { p.pump(c, server, client, true); done <- struct{}{} }()
	go func() { p.pump(c, client, server, false); done <- struct{}{} }()
	<-done
	c.cut()
	<-done
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// pump copies src to dst chunk by chunk, looking at the direction's block
// before each chunk so that a block takes effect on the next bytes.
func (p *Proxy) pump(c *proxyConn, dst io.Writer, src io.Reader, forward bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			mode := p.back
			if forward {
				mode = p.fwd
			}
			if mode != 0 {
				c.tainted = true
				p.dropped += int64(n)
			}
			delay := p.delay
			if p.loss > 0 && rand.Float64() < p.loss {
				delay += p.lossRTO
			}
			p.mu.Unlock()
			if delay > 0 && mode == 0 {
				time.Sleep(delay)
			}
			switch {
			case mode == 0:
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			case mode == Refuse && forward:
				return
			default:
				// Discarded: a dropping link, or replies on a link whose
				// backward direction is refused (new connections there are
				// accepted so that the forward direction still flows).
			}
		}
		if err != nil {
			return
		}
	}
}

// Network is the set of proxies between a fixed set of nodes: one Proxy
// per ordered pair. Node A reaches node B through Link(A, B).
type Network struct {
	nodes   []string
	proxies map[[2]string]*Proxy
}

// NewNetwork starts a proxy for every ordered pair of nodes; rpc maps each
// node to its real RPC listen address.
func NewNetwork(nodes []string, rpc map[string]string) (*Network, error) {
	n := &Network{nodes: append([]string(nil), nodes...), proxies: map[[2]string]*Proxy{}}
	for _, a := range nodes {
		for _, b := range nodes {
			if a == b {
				continue
			}
			p, err := NewProxy(a, b, rpc[b])
			if err != nil {
				_ = n.Close()
				return nil, err
			}
			n.proxies[[2]string{a, b}] = p
		}
	}
	return n, nil
}

// Link returns the proxy node from dials to reach node to.
func (n *Network) Link(from, to string) *Proxy { return n.proxies[[2]string{from, to}] }

// BlockDir stops traffic from node a to node b (a's requests to b and a's
// replies on b's connections), leaving b→a as it is.
func (n *Network) BlockDir(a, b string, mode BlockMode) {
	n.Link(a, b).Block(mode, 0)
	n.Link(b, a).Block(0, mode)
}

// Block cuts both directions between a and b.
func (n *Network) Block(a, b string, mode BlockMode) {
	n.BlockDir(a, b, mode)
	n.BlockDir(b, a, mode)
}

// HealAll removes every block.
func (n *Network) HealAll() {
	for _, p := range n.proxies {
		p.Heal()
	}
}

// Close stops every proxy.
func (n *Network) Close() error {
	var first error
	for _, p := range n.proxies {
		if err := p.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}
