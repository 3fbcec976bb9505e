package transport

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/replog-io/replog/internal/protocoltest"
	"github.com/replog-io/replog/internal/testpki"
	"github.com/replog-io/replog/internal/testwait"
	"github.com/replog-io/replog/protocol"
)

type hclogLogger = hclog.Logger

// syncBuffer is a goroutine-safe log sink.
type syncBuffer = testwait.Buffer

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func newTestLogger(t *testing.T, name string) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Name: name, Level: hclog.Debug, Output: testWriter{t}})
}

func captureLogger(name string) (hclog.Logger, *syncBuffer) {
	buf := &syncBuffer{}
	return hclog.New(&hclog.LoggerOptions{Name: name, Level: hclog.Debug, Output: buf}), buf
}

// eventually polls cond until it holds, for at most waitTimeout.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testwait.WaitFor(t, what, waitTimeout, cond)
}

func newTestTCP(t *testing.T, cfg TCPConfig) *TCP {
	t.Helper()
	if cfg.ListenAddr == "" {
		cfg.ListenAddr = "127.0.0.1:0"
	}
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t, cfg.NodeID)
	}
	tr, err := NewTCP(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

// expectNothing checks that tr has received nothing (after the caller has
// waited for evidence that the messages were refused).
func expectNothing(t *testing.T, tr Transport) {
	t.Helper()
	select {
	case m := <-tr.Receive():
		t.Fatalf("unexpected delivery: %v", m)
	default:
	}
}

func TestNewTCPValidates(t *testing.T) {
	res := func(string) (string, bool) { return "", false }
	for _, cfg := range []TCPConfig{
		{ListenAddr: "127.0.0.1:0", Resolver: res},
		{NodeID: "a", Resolver: res},
		{NodeID: "a", ListenAddr: "127.0.0.1:0"},
		{NodeID: strings.Repeat("a", 256), ListenAddr: "127.0.0.1:0", Resolver: res},
		{NodeID: "a", ListenAddr: "256.0.0.1:0", Resolver: res},
	} {
		if tr, err := NewTCP(cfg); err == nil {
			tr.Close()
			t.Errorf("NewTCP(%+v) succeeded", cfg)
		}
	}
}

func TestTCPWrongClusterRefused(t *testing.T) {
	res := newResolverMap()
	logA, bufA := captureLogger("a")
	a := newTestTCP(t, TCPConfig{NodeID: "a", ClusterID: "blue", Resolver: res.resolve, Logger: logA, BackoffMin: 5 * time.Millisecond, BackoffMax: 20 * time.Millisecond})
	b := newTestTCP(t, TCPConfig{NodeID: "b", ClusterID: "green", Resolver: res.resolve})
	res.set("a", a.Addr())
	res.set("b", b.Addr())
	// Keep sending until both sides have seen at least two refusals.
	eventually(t, "refusals", func() bool {
		_ = a.Send(protocol.Message{To: "b", Body: &protocol.VoteRequest{Epoch: 1, CandidateID: "a"}})
		_ = b.Send(protocol.Message{To: "a", Body: &protocol.FetchRequest{ReplicaID: "b"}})
		return a.Stats().BadConns >= 2 && b.Stats().BadConns >= 2 && a.Stats().DroppedNoConn >= 2 && b.Stats().DroppedNoConn >= 2
	})
	expectNothing(t, a)
	expectNothing(t, b)
	if a.Stats().Received != 0 || b.Stats().Received != 0 {
		t.Fatalf("messages were delivered across clusters: %+v %+v", a.Stats(), b.Stats())
	}
	if !strings.Contains(bufA.String(), ErrWrongCluster.Error()) {
		t.Fatalf("dialer did not log ErrWrongCluster:\n%s", bufA.String())
	}
}

// rawHello opens a plain connection to addr and runs the dialer's side of
// the handshake with the given fields, returning the connection and the
// answer.
func rawHello(t *testing.T, addr string, h handshake) (net.Conn, handshake, error) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, waitTimeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(waitTimeout))
	if _, err := c.Write(appendHandshake(nil, h)); err != nil {
		return c, handshake{}, err
	}
	ans, err := readHandshake(c)
	return c, ans, err
}

// expectClosed waits until the server side closes c.
func expectClosed(t *testing.T, c net.Conn) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(waitTimeout))
	var b [1]byte
	for {
		_, err := c.Read(b[:])
		if err == nil {
			continue
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatal("connection was not closed by the server")
		}
		return
	}
}

// rawExchange dials addr, writes msg and returns every byte the server
// sends before it closes the connection.
func rawExchange(t *testing.T, addr string, msg []byte) []byte {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, waitTimeout)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(waitTimeout))
	if _, err := c.Write(msg); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("connection was not closed by the server")
	}
	return b
}

// expectBareRefusal checks that raw is exactly one refusal of type typ
// and that it names neither the cluster nor the node.
func expectBareRefusal(t *testing.T, raw []byte, typ uint8, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		if bytes.Contains(raw, []byte(s)) {
			t.Fatalf("refusal %q reveals %q", raw, s)
		}
	}
	ans, err := decodeHandshake(raw)
	if err != nil {
		t.Fatalf("answer %q: %v", raw, err)
	}
	if ans.Type != typ || ans.ClusterID != "" || ans.NodeID != "" {
		t.Fatalf("answer %+v, want a bare refusal of type %d", ans, typ)
	}
	if len(raw) != hsFixedSize+crcSize {
		t.Fatalf("refusal of %d bytes, want %d (no body)", len(raw), hsFixedSize+crcSize)
	}
}

// TestTCPHandshakeRefusals: every refusal is bare (the raw bytes read from
// the socket name neither the cluster nor the node) and is followed by a
// close; the positive control with the right cluster ID is accepted.
func TestTCPHandshakeRefusals(t *testing.T) {
	b := newTestTCP(t, TCPConfig{NodeID: "node-bbb", ClusterID: "cluster-green", Resolver: newResolverMap().resolve, HandshakeTimeout: 500 * time.Millisecond})
	hello := handshake{Version: ProtocolVersion, Type: hsHello, Wire: localWire, Lane: laneControl, ClusterID: "cluster-green", NodeID: "a"}
	hidden := []string{"cluster-green", "green", "node-bbb", "bbb"}

	t.Run("WrongCluster", func(t *testing.T) {
		h := hello
		h.ClusterID = "blue"
		expectBareRefusal(t, rawExchange(t, b.Addr(), appendHandshake(nil, h)), hsRefuseCluster, hidden...)
	})
	t.Run("WrongVersion", func(t *testing.T) {
		h := hello
		h.Version = ProtocolVersion + 1
		raw := rawExchange(t, b.Addr(), appendHandshake(nil, h))
		expectBareRefusal(t, raw, hsRefuseCluster, hidden...)
		if raw[4] != ProtocolVersion {
			t.Fatalf("refusal in version %d, want ours (%d)", raw[4], ProtocolVersion)
		}
	})
	t.Run("SameNodeID", func(t *testing.T) {
		h := hello
		h.NodeID = "node-bbb"
		expectBareRefusal(t, rawExchange(t, b.Addr(), appendHandshake(nil, h)), hsRefuse, "cluster-green")
	})
	t.Run("OffersSecret", func(t *testing.T) {
		// This node has no secret: an authenticating dialer is refused.
		h := handshake{Version: ProtocolVersion, Type: hsAuthHello, NodeID: "a"}
		expectBareRefusal(t, rawExchange(t, b.Addr(), appendHandshake(nil, h)), hsRefuse, hidden...)
	})
	t.Run("NotAHello", func(t *testing.T) {
		h := hello
		h.Type = hsAccept
		c, _, err := rawHello(t, b.Addr(), h)
		if err == nil {
			t.Fatal("server answered an accept sent as hello")
		}
		expectClosed(t, c)
	})
	t.Run("Silent", func(t *testing.T) {
		// A client that never says hello is closed after HandshakeTimeout.
		c, err := net.Dial("tcp", b.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		expectClosed(t, c)
	})
	t.Run("Accept", func(t *testing.T) {
		_, ans, err := rawHello(t, b.Addr(), hello)
		if err != nil {
			t.Fatal(err)
		}
		if ans.Type != hsAccept || ans.NodeID != "node-bbb" || ans.ClusterID != "cluster-green" || ans.Lane != laneControl {
			t.Fatalf("answer %+v, want accept from node-bbb", ans)
		}
	})
}

// TestTCPBadConnections: garbage, an oversized length prefix, a bad
// checksum, a frame on the wrong lane: each closes only its connection,
// while a healthy transport keeps delivering to the same node.
func TestTCPBadConnections(t *testing.T) {
	res := newResolverMap()
	a := newTestTCP(t, TCPConfig{NodeID: "a", ClusterID: "c", Resolver: res.resolve})
	b := newTestTCP(t, TCPConfig{NodeID: "b", ClusterID: "c", Resolver: res.resolve, MaxFrameSize: 1 << 20})
	res.set("a", a.Addr())
	res.set("b", b.Addr())
	mustSend(t, a, protocol.Message{To: "b", Body: &protocol.BeginEpoch{Epoch: 1, LeaderID: "a"}})
	recvOne(t, b)

	hello := handshake{Version: ProtocolVersion, Type: hsHello, Wire: localWire, Lane: laneControl, ClusterID: "c", NodeID: "x"}
	vote, _ := AppendFrame(nil, protocol.Message{From: "x", To: "b", Body: &protocol.VoteRequest{Epoch: 5, CandidateID: "x"}})
	badCRC := append([]byte(nil), vote...)
	badCRC[len(badCRC)-1] ^= 0xff
	oversize := binary.BigEndian.AppendUint32(nil, 1<<30)
	fetch, _ := AppendFrame(nil, protocol.Message{From: "x", To: "b", Body: &protocol.FetchRequest{ReplicaID: "x"}})

	cases := []struct {
		name      string
		handshake bool
		payload   []byte
	}{
		{"garbage", false, []byte("GET / HTTP/1.1\r\nHost: b\r\n\r\n")},
		{"random before hello", false, bytes.Repeat([]byte{0xde, 0xad}, 100)},
		{"oversized length", true, oversize},
		{"bad checksum", true, badCRC},
		{"fetch on control lane", true, fetch},
		{"bad frame after good", true, append(append([]byte(nil), vote...), 0, 0, 0, 20, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := b.Stats().BadConns
			var conn net.Conn
			if c.handshake {
				var ans handshake
				var err error
				conn, ans, err = rawHello(t, b.Addr(), hello)
				if err != nil || ans.Type != hsAccept {
					t.Fatalf("handshake: %+v %v", ans, err)
				}
			} else {
				var err error
				conn, err = net.Dial("tcp", b.Addr())
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close()
			}
			_, _ = conn.Write(c.payload)
			expectClosed(t, conn)
			eventually(t, "bad connection counted", func() bool { return b.Stats().BadConns > before })
			// The healthy connection still delivers.
			mustSend(t, a, protocol.Message{To: "b", Body: &protocol.BeginEpoch{Epoch: 2, LeaderID: "a"}})
			for {
				m := recvOne(t, b)
				if m.From == "a" {
					break
				}
				if m.From != "x" {
					t.Fatalf("unexpected %v", m)
				}
			}
		})
	}

	// A connection speaks for the node it handshook as, to this node: a
	// frame with another From (or To) is dropped and the connection
	// closed, so nothing sent after it is delivered either. Positive
	// control: the same frames with the right From/To are delivered.
	for _, c := range []struct {
		name string
		bad  protocol.Message
	}{
		{"spoofed From", protocol.Message{From: "a", To: "b", Body: &protocol.VoteRequest{Epoch: 66, CandidateID: "a"}}},
		{"wrong To", protocol.Message{From: "x", To: "c", Body: &protocol.VoteRequest{Epoch: 67, CandidateID: "x"}}},
	} {
		t.Run(c.name+" closes", func(t *testing.T) {
			conn, ans, err := rawHello(t, b.Addr(), hello)
			if err != nil || ans.Type != hsAccept {
				t.Fatalf("handshake: %+v %v", ans, err)
			}
			first, _ := AppendFrame(nil, protocol.Message{From: "x", To: "b", Body: &protocol.VoteRequest{Epoch: 65, CandidateID: "x"}})
			bad, _ := AppendFrame(nil, c.bad)
			after, _ := AppendFrame(nil, protocol.Message{From: "x", To: "b", Body: &protocol.VoteRequest{Epoch: 68, CandidateID: "x"}})
			before := b.Stats()
			if _, err := conn.Write(append(append(first, bad...), after...)); err != nil {
				t.Fatal(err)
			}
			if m := recvOne(t, b); m.From != "x" || m.Body.(*protocol.VoteRequest).Epoch != 65 {
				t.Fatalf("got %v, want x's vote 65 (positive control)", m)
			}
			expectClosed(t, conn)
			eventually(t, "bad connection counted", func() bool { return b.Stats().BadConns > before.BadConns })
			if d := b.Stats().DroppedInbound - before.DroppedInbound; d != 1 {
				t.Fatalf("dropped %d inbound messages, want 1", d)
			}
			// Nothing after the bad frame got through; a to-b message
			// from a proves the receive path is live and in order.
			mustSend(t, a, protocol.Message{To: "b", Body: &protocol.BeginEpoch{Epoch: 3, LeaderID: "a"}})
			if m := recvOne(t, b); m.From != "a" {
				t.Fatalf("got %v after the bad frame, want a's BeginEpoch", m)
			}
		})
	}
}

// TestTCPPeerComesUpLater: sends to a peer that is down are dropped; once
// it is up (at an address the resolver learns later) the dialer reconnects
// after its backoff and delivers.
func TestTCPPeerComesUpLater(t *testing.T) {
	res := newResolverMap()
	// An address nobody listens on.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()
	res.set("b", dead)
	a := newTestTCP(t, TCPConfig{NodeID: "a", ClusterID: "c", Resolver: res.resolve, BackoffMin: 10 * time.Millisecond, BackoffMax: 100 * time.Millisecond})
	res.set("a", a.Addr())
	eventually(t, "failed connects", func() bool {
		mustSend(t, a, protocol.Message{To: "b", Body: &protocol.BeginEpoch{Epoch: 1}})
		return a.Stats().DroppedNoConn >= 3
	})
	b := newTestTCP(t, TCPConfig{NodeID: "b", ClusterID: "c", Resolver: res.resolve})
	res.set("b", b.Addr())
	var got protocol.Message
	eventually(t, "delivery after reconnect", func() bool {
		mustSend(t, a, protocol.Message{To: "b", Body: &protocol.BeginEpoch{Epoch: 2}})
		select {
		case got = <-b.Receive():
			return true
		default:
			return false
		}
	})
	// Messages queued during the last backoff wait may come first.
	if _, ok := got.Body.(*protocol.BeginEpoch); !ok || got.From != "a" {
		t.Fatalf("got %v", got)
	}
	// b restarts at a new address: a notices the broken connection, re-resolves and
	// reconnects.
	b.Close()
	b2 := newTestTCP(t, TCPConfig{NodeID: "b", ClusterID: "c", Resolver: res.resolve})
	res.set("b", b2.Addr())
	eventually(t, "delivery after restart", func() bool {
		mustSend(t, a, protocol.Message{To: "b", Body: &protocol.BeginEpoch{Epoch: 3}})
		select {
		case got = <-b2.Receive():
			return true
		default:
			return false
		}
	})
}

// TestTCPPeerRestartSameAddress: the peer restarts at the same address
// while the connection to it is idle; the dialer notices the closed
// connection and the first message after the restart is delivered.
func TestTCPPeerRestartSameAddress(t *testing.T) {
	res := newResolverMap()
	a := newTestTCP(t, TCPConfig{NodeID: "a", ClusterID: "c", Resolver: res.resolve})
	b := newTestTCP(t, TCPConfig{NodeID: "b", ClusterID: "c", Resolver: res.resolve})
	addr := b.Addr()
	res.set("b", addr)
	mustSend(t, a, protocol.Message{To: "b", Body: &protocol.BeginEpoch{Epoch: 1}})
	recvOne(t, b)
	b.Close()
	eventually(t, "closed connection noticed", func() bool { return a.Stats().PeerClosed >= 1 })
	b2 := newTestTCP(t, TCPConfig{NodeID: "b", ClusterID: "c", Resolver: res.resolve, ListenAddr: addr})
	mustSend(t, a, protocol.Message{To: "b", Body: &protocol.BeginEpoch{Epoch: 2}})
	if m := recvOne(t, b2); m.Body.(*protocol.BeginEpoch).Epoch != 2 {
		t.Fatalf("got %v", m)
	}
}

// TestTCPWrongPeerAtAddress: the resolver points at another node; the
// dialer notices from the handshake and delivers nothing there.
func TestTCPWrongPeerAtAddress(t *testing.T) {
	res := newResolverMap()
	logA, bufA := captureLogger("a")
	a := newTestTCP(t, TCPConfig{NodeID: "a", ClusterID: "c", Resolver: res.resolve, Logger: logA})
	c := newTestTCP(t, TCPConfig{NodeID: "c", ClusterID: "c", Resolver: res.resolve})
	res.set("b", c.Addr()) // stale: c now lives where b used to
	eventually(t, "refused dials", func() bool {
		mustSend(t, a, protocol.Message{To: "b", Body: &protocol.BeginEpoch{Epoch: 1}})
		return a.Stats().DroppedNoConn >= 2
	})
	expectNothing(t, c)
	if !strings.Contains(bufA.String(), "reached c") {
		t.Fatalf("dialer did not log the wrong peer:\n%s", bufA.String())
	}
}

// TestTCPSendNeverBlocks: with the peer unreachable and a tiny queue, a
// flood of Sends returns at once; the excess is counted as dropped.
func TestTCPSendNeverBlocks(t *testing.T) {
	res := newResolverMap()
	// A listener that accepts but never reads or answers: dials hang in
	// the handshake.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	var mu sync.Mutex
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	defer func() {
		l.Close()
		<-done
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	}()
	res.set("b", l.Addr().String())
	a := newTestTCP(t, TCPConfig{NodeID: "a", ClusterID: "c", Resolver: res.resolve, QueueSize: 4})
	for i := range 10000 {
		mustSend(t, a, protocol.Message{To: "b", Body: &protocol.BeginEpoch{Epoch: uint64(i)}})
	}
	if d := a.Stats().DroppedQueueFull; d < 10000-5-4 {
		t.Fatalf("dropped %d, want nearly all", d)
	}
	// Close does not wait for the hanging handshake's timeout.
	a.Close()
}

// TestTCPControlNotBehindFetch: the peer stops reading fetch traffic
// entirely (the fetch connection's socket buffers fill and its writer
// blocks); votes still get through on the control connection.
func TestTCPControlNotBehindFetch(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan protocol.Message, 100)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	fetchConn := make(chan struct{}, 10)
	wg.Add(1)
	go func() { // a fake node "b"
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				br := bufio.NewReader(c)
				h, err := readHandshake(br)
				if err != nil {
					return
				}
				_, _ = c.Write(appendHandshake(nil, handshake{Version: ProtocolVersion, Type: hsAccept, Lane: h.Lane, ClusterID: "c", NodeID: "b", Chosen: protocol.Version}))
				if h.Lane == laneData {
					fetchConn <- struct{}{}
					return // never read: the writer's socket fills up
				}
				r := NewReader(br, 0)
				for {
					m, err := r.Read()
					if err != nil {
						return
					}
					got <- m
				}
			}()
		}
	}()
	defer func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	}()
	res := newResolverMap()
	res.set("b", l.Addr().String())
	a := newTestTCP(t, TCPConfig{NodeID: "a", ClusterID: "c", Resolver: res.resolve, WriteTimeout: time.Hour})
	big := make([]protocol.Entry, 64)
	for i := range big {
		big[i] = protocol.Entry{Offset: uint64(i), Epoch: 1, Type: protocol.EntryData, Data: make([]byte, 64<<10)}
	}
	// 32 × 4 MiB of fetch responses: far more than the socket buffers hold.
	for i := range 32 {
		mustSend(t, a, protocol.Message{To: "b", Body: &protocol.FetchResponse{FetchID: uint64(i), LeaderID: "a", Entries: big}})
	}
	select {
	case <-fetchConn:
	case <-time.After(waitTimeout):
		t.Fatal("fetch connection never opened")
	}
	mustSend(t, a, protocol.Message{To: "b", Body: &protocol.VoteRequest{Epoch: 9, CandidateID: "a"}})
	select {
	case m := <-got:
		if v, ok := m.Body.(*protocol.VoteRequest); !ok || v.Epoch != 9 {
			t.Fatalf("got %v", m)
		}
	case <-time.After(waitTimeout):
		t.Fatal("vote stuck behind fetch traffic")
	}
	a.Close() // must not hang on the blocked fetch writer
}

// TestTCPLargeFrames: frames near MaxFrameSize pass; above it the sender
// drops them and the connection stays usable.
func TestTCPLargeFrames(t *testing.T) {
	res := newResolverMap()
	a := newTestTCP(t, TCPConfig{NodeID: "a", ClusterID: "c", Resolver: res.resolve, MaxFrameSize: 2 << 20})
	b := newTestTCP(t, TCPConfig{NodeID: "b", ClusterID: "c", Resolver: res.resolve, MaxFrameSize: 2 << 20})
	res.set("a", a.Addr())
	res.set("b", b.Addr())
	data := bytes.Repeat([]byte("0123456789abcdef"), (2<<20-200)/16)
	fits := &protocol.FetchResponse{FetchID: 1, LeaderID: "a", Entries: []protocol.Entry{{Offset: 0, Epoch: 1, Type: protocol.EntryData, Data: data}}}
	tooBig := &protocol.FetchResponse{FetchID: 2, LeaderID: "a", Entries: []protocol.Entry{{Offset: 0, Epoch: 1, Type: protocol.EntryData, Data: append(data, make([]byte, 1000)...)}}}
	mustSend(t, a, protocol.Message{To: "b", Body: fits})
	mustSend(t, a, protocol.Message{To: "b", Body: tooBig})
	mustSend(t, a, protocol.Message{To: "b", Body: &protocol.FetchResponse{FetchID: 3}})
	m := recvOne(t, b)
	if r := m.Body.(*protocol.FetchResponse); r.FetchID != 1 || !bytes.Equal(r.Entries[0].Data, data) {
		t.Fatalf("got %v", m)
	}
	if m := recvOne(t, b); m.Body.(*protocol.FetchResponse).FetchID != 3 {
		t.Fatalf("got %v, want fetch 3 (2 was too big)", m)
	}
}

// --- TLS ---

func TestTCPTLS(t *testing.T) {
	pki := testpki.New(t, "replog test CA")
	res := newResolverMap()
	cfgFor := func(name string) *tls.Config {
		return &tls.Config{Certificates: []tls.Certificate{pki.Issue(t, name)}, RootCAs: pki.Pool, MinVersion: tls.VersionTLS12}
	}
	a := newTestTCP(t, TCPConfig{NodeID: "a", ClusterID: "c", Resolver: res.resolve, TLS: cfgFor("a")})
	b := newTestTCP(t, TCPConfig{NodeID: "b", ClusterID: "c", Resolver: res.resolve, TLS: cfgFor("b")})
	res.set("a", a.Addr())
	res.set("b", b.Addr())
	mustSend(t, a, protocol.Message{To: "b", Body: &protocol.VoteRequest{Epoch: 4, CandidateID: "a"}})
	mustSend(t, b, protocol.Message{To: "a", Body: &protocol.FetchRequest{FetchID: 5, ReplicaID: "b"}})
	if m := recvOne(t, b); m.Body.(*protocol.VoteRequest).Epoch != 4 {
		t.Fatalf("got %v", m)
	}
	if m := recvOne(t, a); m.Body.(*protocol.FetchRequest).FetchID != 5 {
		t.Fatalf("got %v", m)
	}

	// A plain-TCP client cannot talk to a TLS node.
	plain := newTestTCP(t, TCPConfig{NodeID: "p", ClusterID: "c", Resolver: res.resolve, HandshakeTimeout: time.Second})
	eventually(t, "plain client refused", func() bool {
		mustSend(t, plain, protocol.Message{To: "b", Body: &protocol.BeginEpoch{Epoch: 1}})
		return plain.Stats().DroppedNoConn >= 2
	})
	expectNothing(t, b)
}

func TestTCPMutualTLS(t *testing.T) {
	pki := testpki.New(t, "replog test CA")
	rogue := testpki.New(t, "rogue CA")
	res := newResolverMap()
	server := func(name string) *tls.Config {
		return &tls.Config{
			Certificates: []tls.Certificate{pki.Issue(t, name)},
			RootCAs:      pki.Pool,
			ClientCAs:    pki.Pool,
			ClientAuth:   tls.RequireAndVerifyClientCert,
			MinVersion:   tls.VersionTLS13,
		}
	}
	a := newTestTCP(t, TCPConfig{NodeID: "a", ClusterID: "c", Resolver: res.resolve, TLS: server("a")})
	b := newTestTCP(t, TCPConfig{NodeID: "b", ClusterID: "c", Resolver: res.resolve, TLS: server("b")})
	res.set("a", a.Addr())
	res.set("b", b.Addr())
	mustSend(t, a, protocol.Message{To: "b", Body: &protocol.VoteRequest{Epoch: 4, CandidateID: "a"}})
	if m := recvOne(t, b); m.From != "a" {
		t.Fatalf("got %v", m)
	}

	// Clients that trust b's certificate but present none, or one from
	// another CA, cannot deliver anything.
	for _, c := range []struct {
		name  string
		certs []tls.Certificate
	}{
		{"no client cert", nil},
		{"untrusted client cert", []tls.Certificate{rogue.Issue(t, "m")}},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := b.Stats().BadConns
			m := newTestTCP(t, TCPConfig{NodeID: "m", ClusterID: "c", Resolver: res.resolve, HandshakeTimeout: 2 * time.Second,
				TLS: &tls.Config{Certificates: c.certs, RootCAs: pki.Pool, MinVersion: tls.VersionTLS13}})
			eventually(t, "rejected client", func() bool {
				mustSend(t, m, protocol.Message{To: "b", Body: &protocol.VoteRequest{Epoch: 5, CandidateID: "m"}})
				return m.Stats().DroppedNoConn >= 2 && b.Stats().BadConns >= before+2
			})
			expectNothing(t, b)
		})
	}
}

// --- benchmarks ---

// benchPair returns two connected transports with large queues.
func benchPair(b *testing.B) (*TCP, *TCP) {
	res := newResolverMap()
	mk := func(id string) *TCP {
		tr, err := NewTCP(TCPConfig{NodeID: id, ClusterID: "bench", ListenAddr: "127.0.0.1:0", Resolver: res.resolve, QueueSize: 1 << 14, ReceiveQueueSize: 1 << 14})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { tr.Close() })
		res.set(id, tr.Addr())
		return tr
	}
	return mk("a"), mk("b")
}

// runThroughput sends b.N copies of body from a to b, keeping at most
// window messages in flight so nothing is dropped, and waits for all.
func runThroughput(b *testing.B, body func() protocol.Body, window int) {
	a, r := benchPair(b)
	// Connect first.
	for {
		mustSendB(b, a, protocol.Message{Body: body()})
		select {
		case <-r.Receive():
		case <-time.After(100 * time.Millisecond):
			continue
		}
		break
	}
	b.ResetTimer()
	start := time.Now()
	received := 0
	for i := 0; i < b.N; i++ {
		for i-received >= window {
			<-r.Receive()
			received++
		}
		mustSendB(b, a, protocol.Message{Body: body()})
	}
	for received < b.N {
		select {
		case <-r.Receive():
			received++
		case <-time.After(waitTimeout):
			b.Fatalf("lost messages: %d of %d received; stats %+v", received, b.N, a.Stats())
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
}

func mustSendB(b *testing.B, tr Transport, m protocol.Message) {
	if m.To == "" {
		m.To = "b"
	}
	if err := tr.Send(m); err != nil {
		b.Fatal(err)
	}
}

func BenchmarkTCPThroughputVote(b *testing.B) {
	runThroughput(b, func() protocol.Body {
		return &protocol.VoteRequest{Epoch: 1, CandidateID: "a", LastEpoch: 1, LEO: 1000}
	}, 8000)
}

func BenchmarkTCPThroughputFetchResponse(b *testing.B) {
	m := protocoltest.FetchResponse1024().Body.(*protocol.FetchResponse)
	size, _ := AppendFrame(nil, protocol.Message{From: "a", To: "b", Body: m})
	b.SetBytes(int64(len(size)))
	runThroughput(b, func() protocol.Body { return m }, 64)
}
