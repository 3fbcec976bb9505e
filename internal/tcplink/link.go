// Package tcplink is a loopback TCP proxy that can hold or cut every
// connection through it: what the in-process clusters (replogtest, the
// bench's fail-over mode) put between two nodes to stop one as a killed
// process looks to its peers, or pause it.
package tcplink

import (
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// Mode is what a Link does with its connections.
type Mode uint8

const (
	// Pass forwards bytes both ways.
	Pass Mode = iota
	// Hold forwards nothing and keeps connections open: the bytes wait,
	// as they wait in socket buffers for a stopped process, and flow again
	// at Pass.
	Hold
	// Cut closes every connection and each new one at once, as a crashed
	// node's or a rejecting firewall's peers see it.
	Cut
)

// Link is the TCP proxy one node dials to reach another (its Peers
// address for that node): every byte between the two nodes crosses one
// link per direction of dialling, so that the cluster can hold or cut
// them. Its listening address is fixed when the cluster starts; its
// target, the other node's real RPC address, is set at each Open of that
// node.
type Link struct {
	ln net.Listener

	mu      sync.Mutex
	target  string // "" while the node behind it has not opened
	mode    Mode
	resumed chan struct{} // closed when a hold ends
	conns   map[*linkConn]struct{}
	closed  bool
	done    chan struct{} // closed by close
	wg      sync.WaitGroup
}

type linkConn struct {
	client, server net.Conn
	once           sync.Once
}

func (c *linkConn) close() {
	c.once.Do(func() {
		_ = c.client.Close()
		_ = c.server.Close()
	})
}

// New listens on a loopback port the kernel picks; the port is bound
// from here on, so no other process can take it before the nodes dial it.
func New() (*Link, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	l := &Link{ln: ln, resumed: make(chan struct{}), conns: map[*linkConn]struct{}{}, done: make(chan struct{})}
	l.wg.Add(1)
	go l.accept()
	return l, nil
}

// Addr is the address the dialling node has for the other.
func (l *Link) Addr() string { return l.ln.Addr().String() }

// SetTarget points the link at the node behind it (its real RPC
// address), for the connections dialled from now on.
func (l *Link) SetTarget(addr string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.target = addr
}

// SetMode applies m to the link: cut closes every connection now; leaving
// Hold lets the held bytes flow.
func (l *Link) SetMode(m Mode) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if m == l.mode {
		return
	}
	if l.mode == Hold {
		close(l.resumed)
		l.resumed = make(chan struct{})
	}
	l.mode = m
	if m == Cut {
		for c := range l.conns {
			c.close()
		}
	}
}

// Close stops the link and waits for its goroutines.
func (l *Link) Close() error {
	l.mu.Lock()
	if !l.closed {
		l.closed = true
		close(l.done)
		for c := range l.conns {
			c.close()
		}
	}
	l.mu.Unlock()
	err := l.ln.Close()
	l.wg.Wait()
	return err
}

func (l *Link) accept() {
	defer l.wg.Done()
	for {
		client, err := l.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			select {
			case <-l.done:
				return
			case <-time.After(10 * time.Millisecond): // out of descriptors and the like
			}
			continue
		}
		l.wg.Add(1)
		go l.serve(client)
	}
}

func (l *Link) serve(client net.Conn) {
	defer l.wg.Done()
	l.mu.Lock()
	target, mode, closed := l.target, l.mode, l.closed
	l.mu.Unlock()
	if closed || mode == Cut || target == "" {
		_ = client.Close()
		return
	}
	server, err := net.DialTimeout("tcp", target, 2*time.Second)
	if err != nil {
		// The node behind the link is down: the dialler sees its
		// connection closed, as a refused dial.
		_ = client.Close()
		return
	}
	c := &linkConn{client: client, server: server}
	l.mu.Lock()
	if l.closed || l.mode == Cut {
		l.mu.Unlock()
		c.close()
		return
	}
	l.conns[c] = struct{}{}
	l.mu.Unlock()

	done := make(chan struct{}, 2)
	go func() { l.pump(server, client); done <- struct{}{} }()
	go func() { l.pump(client, server); done <- struct{}{} }()
	<-done
	c.close()
	<-done
	l.mu.Lock()
	delete(l.conns, c)
	l.mu.Unlock()
}

// pump copies src to dst, waiting while the link holds. A cut closes
// both connections, which ends the copy.
func (l *Link) pump(dst io.Writer, src io.Reader) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !l.wait() {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// wait returns once the link passes bytes (true), or when it is cut or
// closed (false).
func (l *Link) wait() bool {
	for {
		l.mu.Lock()
		mode, resumed := l.mode, l.resumed
		l.mu.Unlock()
		switch mode {
		case Pass:
			return true
		case Cut:
			return false
		}
		select {
		case <-resumed:
		case <-l.done:
			return false
		}
	}
}
