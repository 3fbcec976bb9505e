package replogtest

import (
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// linkMode is what a link does with its connections.
type linkMode uint8

const (
	// pass forwards bytes both ways.
	pass linkMode = iota
	// hold forwards nothing and keeps connections open: the bytes wait,
	// as they wait in socket buffers for a stopped process, and flow again
	// at pass.
	hold
	// cut closes every connection and each new one at once, as a crashed
	// node's or a rejecting firewall's peers see it.
	cut
)

// link is the TCP proxy one node dials to reach another (its Peers
// address for that node): every byte between the two nodes crosses one
// link per direction of dialling, so that the cluster can hold or cut
// them. Its listening address is fixed when the cluster starts; its
// target, the other node's real RPC address, is set at each Open of that
// node.
type link struct {
	ln net.Listener

	mu      sync.Mutex
	target  string // "" while the node behind it has not opened
	mode    linkMode
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

// newLink listens on a loopback port the kernel picks; the port is bound
// from here on, so no other process can take it before the nodes dial it.
func newLink() (*link, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	l := &link{ln: ln, resumed: make(chan struct{}), conns: map[*linkConn]struct{}{}, done: make(chan struct{})}
	l.wg.Add(1)
	go l.accept()
	return l, nil
}

// addr is the address the dialling node has for the other.
func (l *link) addr() string { return l.ln.Addr().String() }

func (l *link) setTarget(addr string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.target = addr
}

// setMode applies m to the link: cut closes every connection now; leaving
// hold lets the held bytes flow.
func (l *link) setMode(m linkMode) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if m == l.mode {
		return
	}
	if l.mode == hold {
		close(l.resumed)
		l.resumed = make(chan struct{})
	}
	l.mode = m
	if m == cut {
		for c := range l.conns {
			c.close()
		}
	}
}

// close stops the link and waits for its goroutines.
func (l *link) close() error {
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

func (l *link) accept() {
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

func (l *link) serve(client net.Conn) {
	defer l.wg.Done()
	l.mu.Lock()
	target, mode, closed := l.target, l.mode, l.closed
	l.mu.Unlock()
	if closed || mode == cut || target == "" {
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
	if l.closed || l.mode == cut {
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
func (l *link) pump(dst io.Writer, src io.Reader) {
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
func (l *link) wait() bool {
	for {
		l.mu.Lock()
		mode, resumed := l.mode, l.resumed
		l.mu.Unlock()
		switch mode {
		case pass:
			return true
		case cut:
			return false
		}
		select {
		case <-resumed:
		case <-l.done:
			return false
		}
	}
}
