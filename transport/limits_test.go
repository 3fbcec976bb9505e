package transport

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replog-io/replog/protocol"
)

// fakeClock is a settable clock for the budget and the log limiter.
type fakeClock struct{ ns atomic.Int64 }

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.ns.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	return c
}

func (c *fakeClock) now() time.Time               { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) advance(d time.Duration)      { c.ns.Add(int64(d)) }
func (c *fakeClock) set(b *frameBudget)           { b.setClock(c.now) }
func (c *fakeClock) setLimiter(l *logLimiter)     { l.setClock(c.now) }
func countCuts(cut *[]string, name string) func() { return func() { *cut = append(*cut, name) } }

// TestFrameBudgetPolicy: the budget never exceeds its limit; the slowest
// holder (fewest bytes per second since its frame began) is cut first; a
// finished frame's rate stops decaying; a holder cut (or cutting itself)
// gets errBudgetCut.
func TestFrameBudgetPolicy(t *testing.T) {
	clk := newFakeClock()
	b := newFrameBudget(100)
	clk.set(b)
	var cut []string
	h1 := b.register(countCuts(&cut, "h1"))
	h2 := b.register(countCuts(&cut, "h2"))
	h3 := b.register(countCuts(&cut, "h3"))
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(h1.begin())
	must(h1.charge(40)) // 40 bytes over 20s by the time h3 starts: 2 B/s
	clk.advance(10 * time.Second)
	must(h2.begin())
	must(h2.charge(40)) // 40 bytes over 10s: 4 B/s
	clk.advance(10 * time.Second)
	must(h3.begin())
	must(h3.charge(40)) // needs 20 more than is left: h1 (slowest) goes
	if used, _, cuts := b.stats(); used != 80 || cuts != 1 || len(cut) != 1 || cut[0] != "h1" {
		t.Fatalf("after h3: used %d, cuts %d, cut %v; want h1 cut, 80 used", used, cuts, cut)
	}
	if err := h1.charge(1); !errors.Is(err, errBudgetCut) {
		t.Fatalf("cut holder charged: %v", err)
	}
	must(h3.charge(60)) // h2 (4 B/s) is slower than h3 (just started)
	if used, peak, _ := b.stats(); used != 100 || peak != 100 || strings.Join(cut, ",") != "h1,h2" {
		t.Fatalf("used %d peak %d cut %v", used, peak, cut)
	}
	// Only h3 is left holding bytes: it cuts itself.
	if err := h3.charge(1); !errors.Is(err, errBudgetCut) {
		t.Fatalf("over-budget self charge: %v", err)
	}
	if used, peak, cuts := b.stats(); used != 0 || peak != 100 || cuts != 3 {
		t.Fatalf("used %d peak %d cuts %d", used, peak, cuts)
	}

	// A finished frame keeps the rate it arrived at: a fast frame waiting
	// for delivery is not cut in favour of a slow one still arriving.
	cut = nil
	fast, slow, next := b.register(countCuts(&cut, "fast")), b.register(countCuts(&cut, "slow")), b.register(countCuts(&cut, "next"))
	must(slow.begin())
	must(slow.charge(30))
	clk.advance(time.Second)
	must(fast.begin())
	must(fast.charge(60))
	clk.advance(time.Millisecond)
	fast.finish()
	clk.advance(time.Hour)
	must(next.begin())
	must(next.charge(40))
	if strings.Join(cut, ",") != "slow" {
		t.Fatalf("cut %v, want slow", cut)
	}
	// A new frame releases the previous one's charge.
	must(fast.begin())
	if used, _, _ := b.stats(); used != 40 {
		t.Fatalf("used %d after fast's next frame began, want 40", used)
	}
	next.unregister()
	if used, _, _ := b.stats(); used != 0 {
		t.Fatalf("used %d after unregister", used)
	}
}

// budgetHolders counts the holders of b charged exactly n bytes.
func budgetHolders(b *frameBudget, n int64) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	k := 0
	for h := range b.holders {
		if h.charged == n && !h.evicted {
			k++
		}
	}
	return k
}

// TestPartialFrameBudget: many connections each send 15/16 of a
// maximum-size frame and stall. The bytes held for them stay within
// PartialFrameBudget (the surplus connections are cut), and a
// well-behaved peer then still gets a maximum-size frame through: the
// stalled senders, now the slowest, are cut to make room.
func TestPartialFrameBudget(t *testing.T) {
	const (
		frameSize = 1 << 20
		budget    = 4 << 20
		attackers = 16
	)
	res := newResolverMap()
	b := newTestTCP(t, TCPConfig{NodeID: "b", ClusterID: "c", Resolver: res.resolve, MaxFrameSize: frameSize, PartialFrameBudget: budget})
	clk := newFakeClock()
	clk.set(b.budget)
	res.set("b", b.Addr())

	var wg sync.WaitGroup
	conns := make([]net.Conn, attackers)
	for i := range conns {
		conn, ans, err := rawHello(t, b.Addr(), handshake{Version: ProtocolVersion, Type: hsHello, Wire: localWire, Lane: laneData, ClusterID: "c", NodeID: fmt.Sprintf("x%d", i)})
		if err != nil || ans.Type != hsAccept {
			t.Fatalf("attacker %d handshake: %+v %v", i, ans, err)
		}
		conns[i] = conn
		partial := make([]byte, frameSize*15/16)
		binary.BigEndian.PutUint32(partial, frameSize-lenSize)
		partial[4], partial[5] = protocol.Version, byte(protocol.KindFetchResponse)
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = conn.SetWriteDeadline(time.Now().Add(waitTimeout))
			_, _ = conn.Write(partial) // fails once the connection is cut
		}()
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
		wg.Wait()
	}()
	// Every attacker is either cut or holds a full frame buffer.
	eventually(t, "attackers settled", func() bool {
		return int(b.Stats().BudgetCuts)+budgetHolders(b.budget, frameSize) == attackers
	})
	s := b.Stats()
	if s.PartialFramePeak > budget || s.PartialFrameBytes > budget {
		t.Fatalf("held %d bytes (peak %d), budget %d", s.PartialFrameBytes, s.PartialFramePeak, budget)
	}
	if s.PartialFramePeak <= budget-frameSize || s.BudgetCuts < attackers-budget/frameSize {
		t.Fatalf("the attack did not fill the budget (peak %d, %d cuts): the test proves nothing", s.PartialFramePeak, s.BudgetCuts)
	}

	// A minute later the stalled senders are the slowest; an honest peer's
	// maximum-size frame gets through.
	clk.advance(time.Minute)
	a := newTestTCP(t, TCPConfig{NodeID: "a", ClusterID: "c", Resolver: res.resolve, MaxFrameSize: frameSize})
	data := bytes.Repeat([]byte("honest"), (frameSize-200)/6)
	mustSend(t, a, protocol.Message{To: "b", Body: &protocol.FetchResponse{FetchID: 1, LeaderID: "a", Entries: []protocol.Entry{{Offset: 0, Epoch: 1, Data: data}}}})
	m := recvOne(t, b)
	if r, ok := m.Body.(*protocol.FetchResponse); !ok || m.From != "a" || len(r.Entries) != 1 || !bytes.Equal(r.Entries[0].Data, data) {
		t.Fatalf("got %v, want a's frame", m)
	}
	s2 := b.Stats()
	if s2.PartialFramePeak > budget {
		t.Fatalf("peak %d above budget %d", s2.PartialFramePeak, budget)
	}
	if s2.BudgetCuts <= s.BudgetCuts {
		t.Fatalf("no stalled sender was cut for the honest frame (cuts %d -> %d)", s.BudgetCuts, s2.BudgetCuts)
	}
}

// TestIdleTimeout: an inbound connection that goes silent after its
// handshake is closed after IdleTimeout; a real dialer's idle connection
// is kept open by keepalives (positive control: it stays up across
// several IdleTimeouts and still delivers).
func TestIdleTimeout(t *testing.T) {
	const idle = time.Second
	res := newResolverMap()
	b := newTestTCP(t, TCPConfig{NodeID: "b", ClusterID: "c", Resolver: res.resolve, IdleTimeout: idle})
	res.set("b", b.Addr())

	conn, ans, err := rawHello(t, b.Addr(), handshake{Version: ProtocolVersion, Type: hsHello, Wire: localWire, Lane: laneControl, ClusterID: "c", NodeID: "x"})
	if err != nil || ans.Type != hsAccept {
		t.Fatalf("handshake: %+v %v", ans, err)
	}
	expectClosed(t, conn)
	eventually(t, "idle close counted", func() bool { return b.Stats().IdleClosed == 1 })

	a := newTestTCP(t, TCPConfig{NodeID: "a", ClusterID: "c", Resolver: res.resolve, IdleTimeout: idle})
	mustSend(t, a, protocol.Message{To: "b", Body: &protocol.BeginEpoch{Epoch: 1, LeaderID: "a"}})
	recvOne(t, b)
	// Six keepalives at IdleTimeout/4 span 1.5 IdleTimeouts of silence.
	// (If keepalives did not reach b, b would cut the connection and a
	// would stop sending them once it noticed: hence PeerClosed.)
	eventually(t, "keepalives", func() bool { s := a.Stats(); return s.KeepalivesSent >= 6 || s.PeerClosed > 0 })
	mustSend(t, a, protocol.Message{To: "b", Body: &protocol.BeginEpoch{Epoch: 2, LeaderID: "a"}})
	if m := recvOne(t, b); m.Body.(*protocol.BeginEpoch).Epoch != 2 {
		t.Fatalf("got %v", m)
	}
	eventually(t, "delivered frames released", func() bool { return b.Stats().PartialFrameBytes == 0 })
	if sb, sa := b.Stats(), a.Stats(); sb.IdleClosed != 1 || sa.PeerClosed != 0 || sb.Received != 2 {
		t.Fatalf("the keepalive-fed connection was cut: b %+v, a %+v", sb, sa)
	}
}

// dialFrom connects to addr from the local IP ip.
func dialFrom(t *testing.T, ip, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: waitTimeout}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// expectRefusedAtOnce checks that the server closed c without a byte.
func expectRefusedAtOnce(t *testing.T, c net.Conn) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(waitTimeout))
	b, err := io.ReadAll(c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("connection above the cap was not closed")
	}
	if len(b) != 0 {
		t.Fatalf("refused connection got %q", b)
	}
}

// expectAccepted runs a valid hello on c.
func expectAccepted(t *testing.T, c net.Conn, node string) {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(waitTimeout))
	if _, err := c.Write(appendHandshake(nil, handshake{Version: ProtocolVersion, Type: hsHello, Wire: localWire, ClusterID: "c", NodeID: node})); err != nil {
		t.Fatal(err)
	}
	if ans, err := readHandshake(c); err != nil || ans.Type != hsAccept {
		t.Fatalf("handshake: %+v %v", ans, err)
	}
}

// TestInboundConnCaps: above MaxInboundConns, or MaxInboundConnsPerIP
// from one address, a new connection is closed at once without a byte;
// below the cap (a slot freed, or another address) one is accepted.
func TestInboundConnCaps(t *testing.T) {
	t.Run("total", func(t *testing.T) {
		b := newTestTCP(t, TCPConfig{NodeID: "b", ClusterID: "c", Resolver: newResolverMap().resolve, MaxInboundConns: 3})
		held := []net.Conn{dialFrom(t, "127.0.0.1", b.Addr()), dialFrom(t, "127.0.0.1", b.Addr()), dialFrom(t, "127.0.0.1", b.Addr())}
		eventually(t, "three inbound", func() bool { return b.Stats().InboundConns == 3 })
		expectRefusedAtOnce(t, dialFrom(t, "127.0.0.1", b.Addr()))
		if s := b.Stats(); s.RefusedConns != 1 {
			t.Fatalf("refused %d, want 1", s.RefusedConns)
		}
		held[0].Close()
		eventually(t, "slot freed", func() bool { return b.Stats().InboundConns == 2 })
		expectAccepted(t, dialFrom(t, "127.0.0.1", b.Addr()), "x")
	})
	t.Run("per IP", func(t *testing.T) {
		b := newTestTCP(t, TCPConfig{NodeID: "b", ClusterID: "c", Resolver: newResolverMap().resolve, MaxInboundConnsPerIP: 2, ListenAddr: "0.0.0.0:0"})
		_, port, _ := net.SplitHostPort(b.Addr())
		addr := net.JoinHostPort("127.0.0.1", port)
		dialFrom(t, "127.0.0.1", addr)
		dialFrom(t, "127.0.0.1", addr)
		eventually(t, "two inbound", func() bool { return b.Stats().InboundConns == 2 })
		expectRefusedAtOnce(t, dialFrom(t, "127.0.0.1", addr))
		if s := b.Stats(); s.RefusedConns != 1 {
			t.Fatalf("refused %d, want 1", s.RefusedConns)
		}
		expectAccepted(t, dialFrom(t, "127.0.0.2", addr), "y")
	})
}

// TestInboundReplacedByNewer: a second connection from the same node on
// the same lane replaces the first (a restarted peer is never locked out
// by its dead connections); the newer one delivers.
func TestInboundReplacedByNewer(t *testing.T) {
	b := newTestTCP(t, TCPConfig{NodeID: "b", ClusterID: "c", Resolver: newResolverMap().resolve})
	hello := handshake{Version: ProtocolVersion, Type: hsHello, Wire: localWire, Lane: laneControl, ClusterID: "c", NodeID: "x"}
	old, ans, err := rawHello(t, b.Addr(), hello)
	if err != nil || ans.Type != hsAccept {
		t.Fatalf("handshake: %+v %v", ans, err)
	}
	eventually(t, "first established", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.lanesIn) == 1
	})
	newer, ans, err := rawHello(t, b.Addr(), hello)
	if err != nil || ans.Type != hsAccept {
		t.Fatalf("handshake: %+v %v", ans, err)
	}
	expectClosed(t, old)
	if s := b.Stats(); s.Replaced != 1 {
		t.Fatalf("replaced %d, want 1", s.Replaced)
	}
	vote, _ := AppendFrame(nil, protocol.Message{From: "x", To: "b", Body: &protocol.VoteRequest{Epoch: 3, CandidateID: "x"}})
	if _, err := newer.Write(vote); err != nil {
		t.Fatal(err)
	}
	if m := recvOne(t, b); m.From != "x" {
		t.Fatalf("got %v", m)
	}
}

// TestRefusalLogRateLimited: twenty malformed handshakes log one line;
// after the interval the next line reports the nineteen suppressed.
func TestRefusalLogRateLimited(t *testing.T) {
	logB, bufB := captureLogger("b")
	b := newTestTCP(t, TCPConfig{NodeID: "b", ClusterID: "c", Resolver: newResolverMap().resolve, Logger: logB, RefusalLogInterval: time.Hour})
	clk := newFakeClock()
	clk.setLimiter(b.logLim)
	const line = "inbound handshake: malformed"
	garbage := func() {
		c := dialFrom(t, "127.0.0.1", b.Addr())
		_, _ = c.Write([]byte("GET / HTTP/1.1\r\n\r\n"))
		expectClosed(t, c)
	}
	for range 20 {
		garbage()
	}
	eventually(t, "20 bad connections", func() bool { return b.Stats().BadConns == 20 })
	if n := strings.Count(bufB.String(), line); n != 1 {
		t.Fatalf("%d lines for 20 refusals, want 1:\n%s", n, bufB.String())
	}
	clk.advance(2 * time.Hour)
	garbage()
	eventually(t, "21 bad connections", func() bool { return b.Stats().BadConns == 21 })
	eventually(t, "second line", func() bool { return strings.Count(bufB.String(), line) == 2 })
	if !strings.Contains(bufB.String(), "suppressed=19") {
		t.Fatalf("second line does not count the 19 suppressed:\n%s", bufB.String())
	}
}

func TestLogLimiter(t *testing.T) {
	clk := newFakeClock()
	l := newLogLimiter(10 * time.Second)
	l.setClock(clk.now)
	if ok, _ := l.allow("a"); !ok {
		t.Fatal("first line suppressed")
	}
	for range 5 {
		if ok, _ := l.allow("a"); ok {
			t.Fatal("line within the interval allowed")
		}
	}
	if ok, _ := l.allow("b"); !ok {
		t.Fatal("another reason's first line suppressed")
	}
	clk.advance(10 * time.Second)
	if ok, n := l.allow("a"); !ok || n != 5 {
		t.Fatalf("after the interval: %v, %d suppressed; want true, 5", ok, n)
	}
}

// TestTCPConfigValidate: each bad field is named, errors wrap
// ErrInvalidConfig, and NewTCP leaves the caller's struct alone.
func TestTCPConfigValidate(t *testing.T) {
	res := func(string) (string, bool) { return "", false }
	good := TCPConfig{NodeID: "a", ListenAddr: "127.0.0.1:0", Resolver: res}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for field, edit := range map[string]func(*TCPConfig){
		"NodeID":               func(c *TCPConfig) { c.NodeID = "" },
		"ClusterID":            func(c *TCPConfig) { c.ClusterID = strings.Repeat("c", 256) },
		"ListenAddr":           func(c *TCPConfig) { c.ListenAddr = "" },
		"Resolver":             func(c *TCPConfig) { c.Resolver = nil },
		"Secret":               func(c *TCPConfig) { c.Secret = []byte("short") },
		"PartialFrameBudget":   func(c *TCPConfig) { c.PartialFrameBudget = DefaultMaxFrameSize - 1 },
		"IdleTimeout":          func(c *TCPConfig) { c.IdleTimeout = -1 },
		"MaxInboundConns":      func(c *TCPConfig) { c.MaxInboundConns = -1 },
		"MaxInboundConnsPerIP": func(c *TCPConfig) { c.MaxInboundConnsPerIP = -1 },
		"RefusalLogInterval":   func(c *TCPConfig) { c.RefusalLogInterval = -1 },
		"MaxFrameSize":         func(c *TCPConfig) { c.MaxFrameSize = -1 },
	} {
		c := good
		edit(&c)
		err := c.Validate()
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "TCPConfig."+field) {
			t.Errorf("%s: %v", field, err)
		}
		if tr, err := NewTCP(c); err == nil {
			tr.Close()
			t.Errorf("NewTCP accepted a bad %s", field)
		}
	}
	cfg := TCPConfig{NodeID: "a", ListenAddr: "127.0.0.1:0", Resolver: res, Secret: append([]byte(nil), testSecret...)}
	before := fmt.Sprintf("%+v", cfg)
	tr, err := NewTCP(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tr.Close()
	if after := fmt.Sprintf("%+v", cfg); after != before || !bytes.Equal(cfg.Secret, testSecret) {
		t.Fatalf("NewTCP modified the caller's config: %s -> %s", before, after)
	}
}
