package hostile

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/transport"
)

// The raw protocol client: what an outsider who has read transport's
// documentation can send. Frames use the transport package's exported
// codec; the handshake is encoded here from the layout documented in
// transport/handshake.go (its encoder is unexported).

const (
	hsHello         = 1
	hsAccept        = 2
	hsRefuseCluster = 3
	hsRefuse        = 4
	hsAuthHello     = 5 // node ID, nonce [32]byte; [v3] wire min, max
	hsChallenge     = 6 // nonce [32]byte
	hsProof         = 7 // mac [32]byte
	hsAuthAccept    = 8 // mac [32]byte; [v3] wire chosen

	laneControl = 0
	laneData    = 1

	// legacyHandshake is the handshake version before wire ranges (2): a
	// version-3 node still answers it as a version-2 node did, so it is
	// as much an attack surface as version 3.
	legacyHandshake = 2
	// legacyWire is the wire version a version-2 handshake implies.
	legacyWire = 6
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// localWire is the range of wire versions the raw client offers: this
// build's.
var localWire = [2]uint8{protocol.MinVersion, protocol.Version}

// hsMsg is one handshake message. Version 1 (before authentication)
// carried cluster ID, node ID and a reason in every message; version 2
// carries cluster ID and node ID in hello and accept, nothing in a
// refusal, and node ID and nonce, nonce, or MAC in the authenticated
// exchange; version 3 is version 2 with the dialer's range of wire
// versions at the end of hello and authHello, and the acceptor's choice at
// the end of accept and authAccept.
type hsMsg struct {
	Version   uint8
	Type      uint8
	Lane      uint8
	ClusterID string
	NodeID    string
	Reason    string
	Nonce     []byte
	MAC       []byte
	// Wire is the dialer's range (version 3 hello and authHello; the zero
	// value encodes as localWire), Chosen the acceptor's choice (version
	// 3 accept and authAccept).
	Wire   [2]uint8
	Chosen uint8
}

func appendHSString(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

func encodeHandshake(h hsMsg) []byte {
	b := []byte("RPLG")
	b = append(b, h.Version, h.Type, h.Lane, 0, 0)
	switch {
	case h.Version == 1:
		for _, s := range []string{h.ClusterID, h.NodeID, h.Reason} {
			b = appendHSString(b, s)
		}
	case h.Type == hsHello || h.Type == hsAccept:
		b = appendHSString(appendHSString(b, h.ClusterID), h.NodeID)
	case h.Type == hsAuthHello:
		b = append(appendHSString(b, h.NodeID), h.Nonce...)
	case h.Type == hsChallenge:
		b = append(b, h.Nonce...)
	case h.Type == hsProof || h.Type == hsAuthAccept:
		b = append(b, h.MAC...)
	}
	if h.Version >= 3 {
		switch h.Type {
		case hsHello, hsAuthHello:
			w := h.Wire
			if w == ([2]uint8{}) {
				w = localWire
			}
			b = append(b, w[0], w[1])
		case hsAccept, hsAuthAccept:
			b = append(b, h.Chosen)
		}
	}
	binary.BigEndian.PutUint16(b[7:], uint16(len(b)-9))
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// helloBytes is the hello a node without a secret sends (this build's
// handshake version, offering this build's wire versions).
func helloBytes(cluster, node string, lane uint8) []byte {
	return helloBytesIn(uint8(transport.ProtocolVersion), cluster, node, lane)
}

// helloBytesIn is helloBytes in handshake version v.
func helloBytesIn(v uint8, cluster, node string, lane uint8) []byte {
	return encodeHandshake(hsMsg{Version: v, Type: hsHello, Lane: lane, ClusterID: cluster, NodeID: node})
}

// readHandshakeMsg reads one handshake message; it also returns the raw
// bytes read.
func readHandshakeMsg(r io.Reader) (hsMsg, []byte, error) {
	var h hsMsg
	hdr := make([]byte, 9)
	if n, err := io.ReadFull(r, hdr); err != nil {
		return h, hdr[:n], err
	}
	if string(hdr[:4]) != "RPLG" {
		return h, hdr, fmt.Errorf("bad magic %q", hdr[:4])
	}
	h.Version, h.Type, h.Lane = hdr[4], hdr[5], hdr[6]
	body := make([]byte, int(binary.BigEndian.Uint16(hdr[7:]))+4)
	if n, err := io.ReadFull(r, body); err != nil {
		return h, append(hdr, body[:n]...), err
	}
	raw := append(hdr, body...)
	if got, want := crc32.Checksum(raw[:len(raw)-4], castagnoli), binary.BigEndian.Uint32(raw[len(raw)-4:]); got != want {
		return h, raw, fmt.Errorf("handshake checksum %08x, message says %08x", got, want)
	}
	b := body[:len(body)-4]
	str := func() (string, error) {
		if len(b) < 2 {
			return "", errors.New("truncated handshake field")
		}
		n := int(binary.BigEndian.Uint16(b))
		if n > len(b)-2 {
			return "", errors.New("handshake field runs past the body")
		}
		s := string(b[2 : 2+n])
		b = b[2+n:]
		return s, nil
	}
	fixed := func(n int) ([]byte, error) {
		if len(b) < n {
			return nil, fmt.Errorf("handshake field of %d bytes, %d left", n, len(b))
		}
		f := b[:n]
		b = b[n:]
		return f, nil
	}
	var err error
	switch {
	case h.Version == 1:
		for _, dst := range []*string{&h.ClusterID, &h.NodeID, &h.Reason} {
			if *dst, err = str(); err != nil {
				return h, raw, err
			}
		}
		return h, raw, nil
	case h.Type == hsHello || h.Type == hsAccept:
		for _, dst := range []*string{&h.ClusterID, &h.NodeID} {
			if *dst, err = str(); err != nil {
				return h, raw, err
			}
		}
	case h.Type == hsAuthHello:
		if h.NodeID, err = str(); err != nil {
			return h, raw, err
		}
		if h.Nonce, err = fixed(32); err != nil {
			return h, raw, err
		}
	case h.Type == hsChallenge:
		if h.Nonce, err = fixed(32); err != nil {
			return h, raw, err
		}
	case h.Type == hsProof || h.Type == hsAuthAccept:
		if h.MAC, err = fixed(32); err != nil {
			return h, raw, err
		}
	}
	if h.Version >= 3 {
		switch h.Type {
		case hsHello, hsAuthHello:
			w, err := fixed(2)
			if err != nil {
				return h, raw, err
			}
			h.Wire = [2]uint8{w[0], w[1]}
		case hsAccept, hsAuthAccept:
			c, err := fixed(1)
			if err != nil {
				return h, raw, err
			}
			h.Chosen = c[0]
		}
	}
	return h, raw, nil
}

// answerWire checks an acceptor's answer a to a dialer's message in
// handshake version v offering wire range w, and returns the wire version
// the connection's frames must use.
func answerWire(a hsMsg, v uint8, w [2]uint8) (uint8, error) {
	if a.Version != v {
		return 0, fmt.Errorf("answer in handshake version %d, we spoke %d", a.Version, v)
	}
	if v < 3 {
		return legacyWire, nil
	}
	if a.Chosen < w[0] || a.Chosen > w[1] {
		return 0, fmt.Errorf("the acceptor chose wire version %d, we offered %d..%d", a.Chosen, w[0], w[1])
	}
	return a.Chosen, nil
}

// negotiateWire is what an acceptor speaking localWire chooses for a
// hello: the highest wire version both speak (version 2: the one it
// implies).
func negotiateWire(h hsMsg) (uint8, bool) {
	if h.Version < 3 {
		return legacyWire, true
	}
	lo, hi := max(h.Wire[0], localWire[0]), min(h.Wire[1], localWire[1])
	return hi, h.Wire[0] <= h.Wire[1] && lo <= hi
}

// rawConn is one outbound connection that passed the plain handshake.
type rawConn struct {
	mu   sync.Mutex // send may be called from several goroutines
	c    net.Conn
	from string
	to   string
	wire uint8 // the wire version the handshake negotiated
	buf  []byte
}

// dialRaw connects to addr and sends a plain hello (this build's
// handshake version) as node `from` of cluster on lane. It returns an
// error unless the node accepts.
func dialRaw(addr, cluster, from, to string, lane uint8) (*rawConn, error) {
	return dialRawIn(uint8(transport.ProtocolVersion), addr, cluster, from, to, lane)
}

// dialRawIn is dialRaw with a hello in handshake version v.
func dialRawIn(v uint8, addr, cluster, from, to string, lane uint8) (*rawConn, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	wire, err := helloOn(c, v, cluster, from, lane)
	if err != nil {
		c.Close()
		return nil, err
	}
	return &rawConn{c: c, from: from, to: to, wire: wire}, nil
}

// helloOn runs the plain handshake in version v as node `from` of cluster
// on an open connection, offering localWire, and returns the wire version
// the node chose. It returns an error unless the node accepts.
func helloOn(c net.Conn, v uint8, cluster, from string, lane uint8) (uint8, error) {
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	defer c.SetDeadline(time.Time{})
	if _, err := c.Write(helloBytesIn(v, cluster, from, lane)); err != nil {
		return 0, err
	}
	h, _, err := readHandshakeMsg(c)
	if err != nil {
		return 0, fmt.Errorf("handshake answer: %w", err)
	}
	if h.Type != hsAccept {
		return 0, fmt.Errorf("refused (type %d): %q", h.Type, h.Reason)
	}
	return answerWire(h, v, localWire)
}

// dialBluff connects to addr as node `from` and runs the authenticated
// handshake without the secret: a proof made of random bytes, and the
// acceptor's answer taken for an accept unless it is a refusal or the
// connection ends (a real dialer would check the acceptor's MAC; an
// attacker does not care). It returns an error if the node refuses.
func dialBluff(addr, from, to string, lane uint8) (*rawConn, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	v := uint8(transport.ProtocolVersion)
	if _, err := c.Write(encodeHandshake(hsMsg{Version: v, Type: hsAuthHello, Lane: lane, NodeID: from, Nonce: randomBytes(32), Wire: localWire})); err != nil {
		c.Close()
		return nil, err
	}
	if h, _, err := readHandshakeMsg(c); err != nil || h.Type != hsChallenge {
		c.Close()
		return nil, fmt.Errorf("no challenge (type %d): %v", h.Type, err)
	}
	if _, err := c.Write(encodeHandshake(hsMsg{Version: v, Type: hsProof, Lane: lane, MAC: randomBytes(32)})); err != nil {
		c.Close()
		return nil, err
	}
	h, _, err := readHandshakeMsg(c)
	if err != nil || h.Type == hsRefuse || h.Type == hsRefuseCluster {
		c.Close()
		return nil, fmt.Errorf("refused after the proof (type %d): %v", h.Type, err)
	}
	wire := h.Chosen
	if wire < localWire[0] || wire > localWire[1] {
		wire = protocol.Version
	}
	_ = c.SetDeadline(time.Time{})
	return &rawConn{c: c, from: from, to: to, wire: wire}, nil
}

// send writes one frame from rc.from to rc.to.
func (rc *rawConn) send(b protocol.Body) error {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var err error
	rc.buf, err = transport.AppendFrameAt(rc.buf[:0], protocol.Message{From: rc.from, To: rc.to, Body: b}, rc.wire)
	if err != nil {
		return err
	}
	_ = rc.c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	_, err = rc.c.Write(rc.buf)
	return err
}

// drain half-closes the connection and waits until the node closes its
// side: the node reads frames in order and ends the connection only after
// it has handed every earlier frame to the node's event loop.
func (rc *rawConn) drain() error {
	if tc, ok := rc.c.(*net.TCPConn); ok {
		if err := tc.CloseWrite(); err != nil {
			return err
		}
	}
	_ = rc.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := io.Copy(io.Discard, rc.c)
	rc.c.Close()
	if errors.Is(err, syscall.ECONNRESET) {
		// The node closed its end after taking the frames, before our FIN
		// reached it: its kernel answered the FIN with a reset. The frames
		// were read all the same (a CI run failed on this once).
		return nil
	}
	return err
}

func (rc *rawConn) close() { rc.c.Close() }

// sendOne delivers messages to the node at addr over one fresh
// connection, in order, and waits until the node has taken them off the
// connection. They must all travel on the same lane.
func sendOne(t *testing.T, addr, cluster, from, to string, bodies ...protocol.Body) {
	t.Helper()
	lane := uint8(laneControl)
	if k := bodies[0].Kind(); k == protocol.KindFetchRequest || k == protocol.KindFetchResponse {
		lane = laneData
	}
	rc, err := dialRaw(addr, cluster, from, to, lane)
	if err != nil {
		t.Fatalf("raw client as %s to %s: %v", from, to, err)
	}
	for _, b := range bodies {
		if err := rc.send(b); err != nil {
			t.Fatalf("raw client as %s: send %s: %v", from, b, err)
		}
	}
	if err := rc.drain(); err != nil {
		t.Fatalf("raw client as %s: waiting for %s to take the messages: %v", from, to, err)
	}
}

// fakeNode is an impostor on the replication transport: it listens on
// loopback, accepts any plain hello as node id, hands every inbound frame
// to handle, and answers over its own outbound connections (replog's
// connections carry frames one way only).
type fakeNode struct {
	id      string
	cluster string
	ln      net.Listener
	handle  func(f *fakeNode, m protocol.Message)

	frames atomic.Int64 // frames received after a handshake
	bluffs atomic.Int64 // authenticated dials bluffed through

	// legacyOnly makes the impostor pose as a node of the previous
	// release: it refuses a version-3 handshake in version 2, as such a
	// node does, so the dialer falls back to version 2. Set before it
	// listens (see legacyImpostor).
	legacyOnly bool
	downgrades atomic.Int64 // version-3 dials refused in version 2
	// legacyFrames and legacyBluffs count what frames and bluffs came in
	// over version-2 handshakes.
	legacyFrames atomic.Int64
	legacyBluffs atomic.Int64

	mu     sync.Mutex
	conns  map[net.Conn]bool
	out    map[string]*rawConn // by address and lane
	closed bool
	wg     sync.WaitGroup
}

func newFakeNode(t *testing.T, id, cluster string, handle func(f *fakeNode, m protocol.Message)) *fakeNode {
	t.Helper()
	return newFakeNodeAt(t, "127.0.0.1:0", id, cluster, handle)
}

// newFakeNodeAt is newFakeNode listening at addr: the address of a node
// that has just stopped, whose peers go on dialling it there. The port may
// take a moment to be free again; a listen still failing after 10 s fails
// the test.
func newFakeNodeAt(t *testing.T, addr, id, cluster string, handle func(f *fakeNode, m protocol.Message), opts ...func(*fakeNode)) *fakeNode {
	t.Helper()
	var ln net.Listener
	var err error
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if ln, err = net.Listen("tcp", addr); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("fake node %s: listen at %s: %v", id, addr, err)
		}
	}
	f := &fakeNode{id: id, cluster: cluster, ln: ln, handle: handle, conns: map[net.Conn]bool{}, out: map[string]*rawConn{}}
	for _, o := range opts {
		o(f)
	}
	f.wg.Add(1)
	go f.accept()
	t.Cleanup(f.close)
	return f
}

func (f *fakeNode) addr() string { return f.ln.Addr().String() }

// legacyImpostor is the option of newFakeNodeAt that sets legacyOnly.
func legacyImpostor(f *fakeNode) { f.legacyOnly = true }

func (f *fakeNode) accept() {
	defer f.wg.Done()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		f.mu.Lock()
		if f.closed {
			f.mu.Unlock()
			c.Close()
			return
		}
		f.conns[c] = true
		f.wg.Add(1)
		f.mu.Unlock()
		go f.serve(c)
	}
}

func (f *fakeNode) serve(c net.Conn) {
	defer f.wg.Done()
	defer func() {
		f.mu.Lock()
		delete(f.conns, c)
		f.mu.Unlock()
		c.Close()
	}()
	br := bufio.NewReader(c)
	h, _, err := readHandshakeMsg(br)
	if err != nil {
		return
	}
	if f.legacyOnly && h.Version > legacyHandshake {
		// What a node of the previous release answers to a newer version.
		f.downgrades.Add(1)
		_, _ = c.Write(encodeHandshake(hsMsg{Version: legacyHandshake, Type: hsRefuseCluster, Lane: h.Lane}))
		return
	}
	legacy := h.Version == legacyHandshake
	// Answer in the dialer's handshake version with the wire version a
	// real node would choose, so that what a dialer refuses is the
	// impostor, not a malformed answer.
	chosen, ok := negotiateWire(h)
	if !ok {
		return
	}
	switch h.Type {
	case hsHello:
		accept := encodeHandshake(hsMsg{Version: h.Version, Type: hsAccept, Lane: h.Lane, ClusterID: f.cluster, NodeID: f.id, Chosen: chosen})
		if _, err := c.Write(accept); err != nil {
			return
		}
	case hsAuthHello:
		// A dialer with a secret: bluff through the exchange without it
		// (a fresh challenge, then an accept with a made-up MAC). The
		// dialer must not believe it.
		ch := encodeHandshake(hsMsg{Version: h.Version, Type: hsChallenge, Lane: h.Lane, Nonce: randomBytes(32)})
		if _, err := c.Write(ch); err != nil {
			return
		}
		if p, _, err := readHandshakeMsg(br); err != nil || p.Type != hsProof {
			return
		}
		acc := encodeHandshake(hsMsg{Version: h.Version, Type: hsAuthAccept, Lane: h.Lane, MAC: randomBytes(32), Chosen: chosen})
		if _, err := c.Write(acc); err != nil {
			return
		}
		f.bluffs.Add(1)
		if legacy {
			f.legacyBluffs.Add(1)
		}
	default:
		return
	}
	r := transport.NewReader(br, 0)
	for {
		m, err := r.Read()
		if err != nil {
			return
		}
		f.frames.Add(1)
		if legacy {
			f.legacyFrames.Add(1)
		}
		if f.handle != nil {
			f.handle(f, m)
		}
	}
}

// send delivers b to node `to` at addr, dialling (and re-dialling) as
// needed. Errors are returned, not fatal: the target may be down.
func (f *fakeNode) send(to, addr string, b protocol.Body) error {
	lane := uint8(laneControl)
	if k := b.Kind(); k == protocol.KindFetchRequest || k == protocol.KindFetchResponse {
		lane = laneData
	}
	key := fmt.Sprintf("%s/%d", addr, lane)
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return net.ErrClosed
	}
	rc := f.out[key]
	f.mu.Unlock()
	if rc == nil {
		var err error
		rc, err = dialRaw(addr, f.cluster, f.id, to, lane)
		if err != nil {
			return err
		}
		f.mu.Lock()
		if f.closed {
			f.mu.Unlock()
			rc.close()
			return net.ErrClosed
		}
		f.out[key] = rc
		f.mu.Unlock()
	}
	err := rc.send(b)
	if err != nil {
		f.mu.Lock()
		delete(f.out, key)
		f.mu.Unlock()
		rc.close()
	}
	return err
}

func (f *fakeNode) close() {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return
	}
	f.closed = true
	for c := range f.conns {
		c.Close()
	}
	for _, rc := range f.out {
		rc.close()
	}
	f.mu.Unlock()
	f.ln.Close()
	f.wg.Wait()
}
