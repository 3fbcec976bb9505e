package hostile

import (
	"encoding/binary"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replog-io/replog/internal/testwait"
	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/transport"
)

// procStatusKB returns a field of /proc/self/status in KiB (VmRSS, VmHWM).
func procStatusKB(t *testing.T, field string) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatalf("read /proc/self/status: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("parse %s: %v", line, err)
			}
			return n
		}
	}
	t.Fatalf("no %s in /proc/self/status", field)
	return 0
}

// dialFrom connects to addr from the loopback address src (all of
// 127.0.0.0/8 is loopback on Linux): the node's per-IP connection cap
// then counts the attacker apart from the real peers on 127.0.0.1.
func dialFrom(src, addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	return d.Dial("tcp", addr)
}

// handshakeOn runs the plain handshake (this build's version) as node on
// an open connection and returns the wire version the node chose.
func handshakeOn(c net.Conn, node string, lane uint8) (uint8, error) {
	return helloOn(c, uint8(transport.ProtocolVersion), clusterID, node, lane)
}

// TestPartialFrameMemoryBound is finding 6: many connections each send
// most of a 16 MiB frame and stop. The leader must hold no more than its
// partial-frame budget for them (the slowest senders are cut), so the
// process's peak RSS stays bounded, and the cluster keeps committing. The
// bound asserted is coarse (RSS of the whole test process: three nodes,
// the attacker, the race detector's shadow memory) but far below what the
// attack sends.
func TestPartialFrameMemoryBound(t *testing.T) {
	const (
		conns     = 60
		frameLen  = transport.DefaultMaxFrameSize - 64 // announced: just under the limit
		sendBytes = 15 << 20                           // sent of it, per connection
		// heapBoundMB bounds the growth of the live heap while the partial
		// frames are pending (the budget is 64 MiB; the attack sends up to
		// 900 MB). rssBoundMB bounds the growth of the peak RSS: generous,
		// because it also counts garbage not yet collected and the race
		// detector's shadow memory.
		heapBoundMB = 192
		rssBoundMB  = 1024
	)
	c := newCluster(t, 3, insecureMode, nil)
	lead, _ := c.leader()
	c.appendN(lead, "before", 3)
	addr := c.nodes[lead].Status().RPCAddr

	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	baseHeap := ms.HeapAlloc
	baseKB := procStatusKB(t, "VmRSS")
	// Reset the peak (VmHWM) to the current RSS (Linux clear_refs).
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Logf("cannot reset VmHWM (%v): the peak is since process start", err)
	}
	chunk := make([]byte, 1<<20)
	var accepted, cut atomic.Int64
	var sent atomic.Int64
	var mu sync.Mutex
	var open []net.Conn
	var wg sync.WaitGroup
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			src := fmt.Sprintf("127.0.0.%d", 2+i%2) // 30 per address, under the per-IP cap
			cn, err := dialFrom(src, addr)
			if err != nil {
				return
			}
			mu.Lock()
			open = append(open, cn)
			mu.Unlock()
			wire, err := handshakeOn(cn, fmt.Sprintf("p%02d", i), laneControl)
			if err != nil {
				return
			}
			accepted.Add(1)
			hdr := binary.BigEndian.AppendUint32(nil, uint32(frameLen-4))
			hdr = append(hdr, wire, byte(protocol.KindAppendRequest))
			_ = cn.SetWriteDeadline(time.Now().Add(30 * time.Second))
			if _, err := cn.Write(hdr); err != nil {
				cut.Add(1)
				return
			}
			for n := 0; n < sendBytes; n += len(chunk) {
				if _, err := cn.Write(chunk); err != nil {
					cut.Add(1)
					return
				}
				sent.Add(int64(len(chunk)))
			}
		}()
	}
	// Sample RSS while the attack runs.
	var peakKB atomic.Int64
	stopSampling := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Add(1)
	go func() {
		defer sampler.Done()
		for {
			if kb := procStatusKB(t, "VmRSS"); kb > peakKB.Load() {
				peakKB.Store(kb)
			}
			select {
			case <-stopSampling:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	wg.Wait()
	// The partial frames stay pending on the connections that were not
	// cut: what the node holds for them is live heap now.
	runtime.GC()
	runtime.ReadMemStats(&ms)
	heapGrowthMB := (int64(ms.HeapAlloc) - int64(baseHeap)) >> 20
	// The cluster must keep committing meanwhile.
	c.keepsCommitting("partial-frames")
	close(stopSampling)
	sampler.Wait()
	hwmKB := procStatusKB(t, "VmHWM")
	mu.Lock()
	for _, cn := range open {
		cn.Close()
	}
	mu.Unlock()
	peak := max(peakKB.Load(), hwmKB)
	growthMB := (peak - baseKB) / 1024
	t.Logf("partial-frame attack on %s: %d connections accepted, %d cut while sending, %d MB sent; live heap growth with the frames pending %d MB (bound %d MB); RSS before %d MB, peak %d MB (sampled %d MB, VmHWM %d MB): growth %d MB (bound %d MB)",
		lead, accepted.Load(), cut.Load(), sent.Load()>>20, heapGrowthMB, heapBoundMB, baseKB/1024, peak/1024, peakKB.Load()/1024, hwmKB/1024, growthMB, rssBoundMB)
	if accepted.Load() < conns/2 {
		t.Fatalf("only %d of %d attack connections passed the handshake: the attack did not reach the frame reader", accepted.Load(), conns)
	}
	if heapGrowthMB > heapBoundMB {
		t.Errorf("the live heap grew by %d MB with the partial frames pending (bound %d MB, budget %d MiB)", heapGrowthMB, heapBoundMB, defaultPartialFrameBudget>>20)
	}
	if growthMB > rssBoundMB {
		t.Errorf("peak RSS grew by %d MB under the partial-frame attack (bound %d MB, budget %d MiB)", growthMB, rssBoundMB, defaultPartialFrameBudget>>20)
	}
}

// TestIdleConnectionClosed is finding 7's idle half: a connection that
// passed the handshake and then sends nothing is closed after the idle
// deadline. The root Options do not expose the transport's IdleTimeout
// (default 2 minutes), so this runs replog's transport directly with a
// short one. Positive control: a connection that keeps sending frames
// stays open past several idle deadlines.
func TestIdleConnectionClosed(t *testing.T) {
	const idle = 300 * time.Millisecond
	cfg := transport.TCPConfig{
		NodeID: "n1", ClusterID: clusterID, ListenAddr: "127.0.0.1:0",
		Resolver: transport.StaticResolver(map[string]string{}),
	}
	withIdleTimeout(&cfg, idle)
	tr, err := transport.NewTCP(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	go func() {
		for range tr.Receive() {
		}
	}()

	busy, err := dialRaw(tr.Addr(), clusterID, "n2", "n1", laneControl)
	if err != nil {
		t.Fatalf("handshake: %v", err)
	}
	defer busy.close()
	quiet, err := dialRaw(tr.Addr(), clusterID, "n3", "n1", laneControl)
	if err != nil {
		t.Fatalf("handshake: %v", err)
	}
	defer quiet.close()

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			if err := busy.send(&protocol.VoteResponse{Epoch: 1, VoterID: "n2"}); err != nil {
				return
			}
			select {
			case <-stop:
				return
			case <-time.After(idle / 4):
			}
		}
	}()
	// The quiet connection must be closed by the node: a read sees EOF
	// (or a reset), not our own deadline.
	_ = quiet.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err = io.Copy(io.Discard, quiet.c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Errorf("an idle connection was still open 10s after its handshake (idle deadline %v)", idle)
	}
	// By now the busy one has lived through several idle deadlines.
	time.Sleep(4 * idle)
	_ = busy.c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	_, err = busy.c.Read(make([]byte, 1))
	close(stop)
	wg.Wait()
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Errorf("positive control: a connection sending a frame every %v was closed: %v", idle/4, err)
	}
}

// TestConnectionCaps is finding 7's cap half: a node accepts at most
// MaxInboundConnsPerIP (64) connections from one address and
// MaxInboundConns (512) in all; the connections above are closed at once.
// Meanwhile the cluster keeps committing over its established
// connections, and once the flood ends a new connection is accepted.
func TestConnectionCaps(t *testing.T) {
	const perIP, total = defaultMaxConnsPerIP, defaultMaxConns
	c := newCluster(t, 3, insecureMode, nil)
	lead, _ := c.leader()
	addr := c.nodes[lead].Status().RPCAddr

	var conns []net.Conn
	defer func() {
		for _, cn := range conns {
			cn.Close()
		}
	}()
	dial := func(src string, n int) []net.Conn {
		var out []net.Conn
		for range n {
			cn, err := dialFrom(src, addr)
			if err != nil {
				t.Fatalf("dial from %s: %v", src, err)
			}
			out = append(out, cn)
			conns = append(conns, cn)
		}
		return out
	}
	// isOpen: the node has not closed cn (a short read times out).
	isOpen := func(cn net.Conn) bool {
		_ = cn.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		_, err := cn.Read(make([]byte, 1))
		var ne net.Error
		return errors.As(err, &ne) && ne.Timeout()
	}
	countOpen := func(cs []net.Conn) int {
		var mu sync.Mutex
		var wg sync.WaitGroup
		n := 0
		for _, cn := range cs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if isOpen(cn) {
					mu.Lock()
					n++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		return n
	}

	one := dial("127.0.0.2", perIP+16)
	time.Sleep(500 * time.Millisecond) // let the node accept them all
	if n := countOpen(one); n > perIP {
		t.Errorf("%d connections from one address left open, cap %d", n, perIP)
	} else {
		t.Logf("from one address: %d of %d connections left open (cap %d)", n, len(one), perIP)
	}

	var many []net.Conn
	for ip := 3; len(many)+len(one) < total+64; ip++ {
		many = append(many, dial(fmt.Sprintf("127.0.0.%d", ip), perIP-4)...)
	}
	time.Sleep(500 * time.Millisecond)
	all := append(append([]net.Conn(nil), one...), many...)
	if n := countOpen(all); n > total {
		t.Errorf("%d of %d flood connections left open, cap %d", n, len(all), total)
	} else {
		t.Logf("flood: %d of %d connections left open (cap %d, the peers' own connections count too)", n, len(all), total)
	}
	c.keepsCommitting("connection-flood")

	for _, cn := range conns {
		cn.Close()
	}
	conns = nil
	// Positive control: with the flood gone a peer connects again.
	testwait.WaitFor(t, "a new connection to be accepted after the flood", 10*time.Second, func() bool {
		cn, err := dialFrom("127.0.0.2", addr)
		if err != nil {
			return false
		}
		defer cn.Close()
		_, err = handshakeOn(cn, "late-peer", laneControl)
		return err == nil
	})
}

// TestExampleHTTPServerTimeouts is finding 7's HTTP half: every
// http.Server the example builds sets read-header, read, write and idle
// timeouts, and the example serves nothing through a server without them
// (http.ListenAndServe and http.Serve use one). The example is a main
// package, so its source is checked.
func TestExampleHTTPServerTimeouts(t *testing.T) {
	// The example is at the module root; this package is two levels down.
	files, err := filepath.Glob(filepath.Join("..", "..", "example", "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("example sources: %v %v", files, err)
	}
	fset := token.NewFileSet()
	servers := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(af, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CompositeLit:
				sel, ok := n.Type.(*ast.SelectorExpr)
				if !ok || sel.Sel.Name != "Server" || fmt.Sprint(sel.X) != "http" {
					return true
				}
				servers++
				set := map[string]bool{}
				for _, e := range n.Elts {
					if kv, ok := e.(*ast.KeyValueExpr); ok {
						if id, ok := kv.Key.(*ast.Ident); ok {
							set[id.Name] = true
						}
					}
				}
				for _, field := range []string{"ReadHeaderTimeout", "ReadTimeout", "WriteTimeout", "IdleTimeout"} {
					if !set[field] {
						t.Errorf("%s: http.Server without %s", fset.Position(n.Pos()), field)
					}
				}
			case *ast.CallExpr:
				if sel, ok := n.Fun.(*ast.SelectorExpr); ok && fmt.Sprint(sel.X) == "http" &&
					(sel.Sel.Name == "ListenAndServe" || sel.Sel.Name == "Serve" || sel.Sel.Name == "ListenAndServeTLS") {
					t.Errorf("%s: http.%s serves without timeouts", fset.Position(n.Pos()), sel.Sel.Name)
				}
			}
			return true
		})
	}
	if servers == 0 {
		t.Fatal("no http.Server literal found in the example: the check checked nothing")
	}
}
