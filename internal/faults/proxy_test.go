package faults

import (
	"bufio"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/replog-io/replog/internal/testwait"
)

// echoServer echoes every line back and counts the bytes it received.
type echoServer struct {
	ln    net.Listener
	got   atomic.Int64
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns []net.Conn
}

func newEchoServer(t *testing.T) *echoServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &echoServer{ln: ln}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					s.got.Add(int64(len(line)))
					if err != nil {
						return
					}
					if _, err := io.WriteString(c, line); err != nil {
						return
					}
				}
			}()
		}
	}()
	return s
}

func (s *echoServer) close() {
	_ = s.ln.Close()
	s.mu.Lock()
	for _, c := range s.conns {
		_ = c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// waitFor polls cond until it holds, for at most 20s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testwait.WaitFor(t, what, 20*time.Second, cond)
}

// roundTrip sends a line and reads the echo.
func roundTrip(c net.Conn, r *bufio.Reader, msg string) (string, error) {
	if _, err := io.WriteString(c, msg+"\n"); err != nil {
		return "", err
	}
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	return line[:len(line)-1], nil
}

func dial(t *testing.T, p *Proxy) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, bufio.NewReader(c)
}

// expectClosed reads until the connection reports EOF or a reset.
func expectClosed(t *testing.T, c net.Conn, r *bufio.Reader) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	_, err := r.ReadString('\n')
	var ne net.Error
	if err == nil || (errors.As(err, &ne) && ne.Timeout()) {
		t.Fatalf("connection not cut: err=%v", err)
	}
}

func TestProxyPassesBlocksAndHeals(t *testing.T) {
	defer goleak.VerifyNone(t)
	srv := newEchoServer(t)
	defer srv.close()
	p, err := NewProxy("a", "b", srv.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	c1, r1 := dial(t, p)
	if got, err := roundTrip(c1, r1, "hello"); err != nil || got != "hello" {
		t.Fatalf("pass: %q %v", got, err)
	}

	// Refusing the forward direction cuts the open connection and every
	// new one.
	p.Block(Refuse, 0)
	expectClosed(t, c1, r1)
	c2, r2 := dial(t, p)
	expectClosed(t, c2, r2)

	p.Heal()
	c3, r3 := dial(t, p)
	p.SetDelay(20 * time.Millisecond)
	if got, err := roundTrip(c3, r3, "slow"); err != nil || got != "slow" {
		t.Fatalf("slow link: %q %v", got, err)
	}
	p.Heal() // also removes the delay, and keeps the untainted connection
	if got, err := roundTrip(c3, r3, "again"); err != nil || got != "again" {
		t.Fatalf("after heal: %q %v", got, err)
	}
	c3.Close()
}

func TestProxyDropForwardKeepsConnectionThenCutsAtHeal(t *testing.T) {
	defer goleak.VerifyNone(t)
	srv := newEchoServer(t)
	defer srv.close()
	p, err := NewProxy("a", "b", srv.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	c, r := dial(t, p)
	if _, err := roundTrip(c, r, "x"); err != nil {
		t.Fatal(err)
	}
	before := srv.got.Load()
	p.Block(Drop, 0)
	if _, err := io.WriteString(c, "lost\n"); err != nil {
		t.Fatalf("a dropping link must accept writes: %v", err)
	}
	waitFor(t, "the proxy to drop 5 bytes", func() bool { return p.Dropped() == 5 })
	if got := srv.got.Load(); got != before {
		t.Fatalf("server received %d bytes through a dropping link", got-before)
	}
	// The stream lost bytes: healing cuts it, a new connection works.
	p.Heal()
	expectClosed(t, c, r)
	c2, r2 := dial(t, p)
	if got, err := roundTrip(c2, r2, "fresh"); err != nil || got != "fresh" {
		t.Fatalf("after heal: %q %v", got, err)
	}
	c2.Close()
}

func TestNetworkOneWayBlock(t *testing.T) {
	defer goleak.VerifyNone(t)
	srvA, srvB := newEchoServer(t), newEchoServer(t)
	defer srvA.close()
	defer srvB.close()
	n, err := NewNetwork([]string{"a", "b"}, map[string]string{"a": srvA.ln.Addr().String(), "b": srvB.ln.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()

	// Block a→b: a cannot connect to b; on b's connection to a, b's bytes
	// arrive but a's replies are dropped.
	n.BlockDir("a", "b", Refuse)
	ca, ra := dial(t, n.Link("a", "b"))
	expectClosed(t, ca, ra)

	before := srvA.got.Load()
	cb, _ := dial(t, n.Link("b", "a"))
	if _, err := io.WriteString(cb, "ping\n"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "b's bytes to reach a", func() bool { return srvA.got.Load() == before+5 })
	waitFor(t, "a's reply to be dropped", func() bool { return n.Link("b", "a").Dropped() == 5 })

	n.HealAll()
	ca2, ra2 := dial(t, n.Link("a", "b"))
	if got, err := roundTrip(ca2, ra2, "ok"); err != nil || got != "ok" {
		t.Fatalf("after heal: %q %v", got, err)
	}
	ca2.Close()
}
