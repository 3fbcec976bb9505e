package transport

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/replog-io/replog/protocol"
)

// pipeHandshake runs dialer and acceptor against each other over a pipe
// and returns what each side concluded.
func pipeHandshake(t *testing.T, dialer, acceptor hsSide, peer string) (wire uint8, h handshake, dialErr, acceptErr error) {
	t.Helper()
	c1, c2 := net.Pipe()
	defer c1.Close()
	defer c2.Close()
	_ = c1.SetDeadline(time.Now().Add(waitTimeout))
	_ = c2.SetDeadline(time.Now().Add(waitTimeout))
	done := make(chan struct{})
	go func() {
		defer close(done)
		h, acceptErr = acceptHandshake(c2, acceptor, nil)
		c2.Close()
	}()
	wire, dialErr = dialHandshake(c1, dialer, peer)
	c1.Close()
	<-done
	return
}

// TestNegotiateTable: every pair of ranges among an old node (one
// version), this one, a next release (one more) and a far future one
// (sharing nothing with the old): the version is the highest both speak,
// whichever end dials, or none. Then the same pairs through the
// handshake itself, with and without a secret, dialled both ways: both
// ends agree on the table's version, or the dialer is refused with
// ErrWrongCluster and the acceptor says why.
func TestNegotiateTable(t *testing.T) {
	old := versionRange{6, 6}
	cur := versionRange{6, 7}
	next := versionRange{6, 8}
	far := versionRange{8, 9}
	cases := []struct {
		a, b versionRange
		want uint8 // 0: none
	}{
		{old, old, 6},
		{old, cur, 6},
		{old, next, 6},
		{old, far, 0},
		{cur, cur, 7},
		{cur, next, 7},
		{cur, far, 0},
		{next, next, 8},
		{next, far, 8},
		{far, far, 9},
		{versionRange{7, 6}, cur, 0}, // an empty range speaks nothing
	}
	for _, c := range cases {
		for _, pair := range [][2]versionRange{{c.a, c.b}, {c.b, c.a}} {
			got, ok := negotiate(pair[0], pair[1])
			if ok != (c.want != 0) || got != c.want {
				t.Errorf("negotiate(%v, %v) = %d, %v; want %d", pair[0], pair[1], got, ok, c.want)
			}
		}
	}
	key := deriveAuthKey(testSecret)
	for _, c := range cases {
		for _, pair := range [][2]versionRange{{c.a, c.b}, {c.b, c.a}} {
			for _, k := range [][]byte{nil, key} {
				d := hsSide{key: k, clusterID: "c", nodeID: "a", lane: laneControl, wire: pair[0], rand: fixedRand()}
				acc := hsSide{key: k, clusterID: "c", nodeID: "b", wire: pair[1], rand: fixedRand()}
				wire, h, de, ae := pipeHandshake(t, d, acc, "b")
				if c.want == 0 {
					if !errors.Is(de, ErrWrongCluster) || !errors.Is(ae, ErrWrongCluster) {
						t.Errorf("%v dialling %v (secret %v): %v / %v, want ErrWrongCluster on both ends", pair[0], pair[1], k != nil, de, ae)
					}
					continue
				}
				if de != nil || ae != nil || wire != c.want || h.Chosen != c.want {
					t.Errorf("%v dialling %v (secret %v): dialer %d %v, acceptor %d %v; want %d", pair[0], pair[1], k != nil, wire, de, h.Chosen, ae, c.want)
				}
			}
		}
	}
}

// FuzzNegotiate: for any two ranges, the version negotiated lies in both
// and none above it does; none is found only when the ranges share none.
func FuzzNegotiate(f *testing.F) {
	f.Add(uint8(6), uint8(6), uint8(6), uint8(7))
	f.Add(uint8(8), uint8(9), uint8(6), uint8(7))
	f.Add(uint8(7), uint8(6), uint8(6), uint8(7))
	f.Add(uint8(0), uint8(255), uint8(255), uint8(255))
	f.Fuzz(func(t *testing.T, amin, amax, bmin, bmax uint8) {
		a, b := versionRange{amin, amax}, versionRange{bmin, bmax}
		v, ok := negotiate(a, b)
		in := func(x int, r versionRange) bool { return x >= int(r.min) && x <= int(r.max) }
		best := -1
		for x := 0; x <= 255; x++ {
			if in(x, a) && in(x, b) {
				best = x
			}
		}
		if best < 0 {
			if ok {
				t.Fatalf("negotiate(%v, %v) = %d, but they share no version", a, b, v)
			}
			return
		}
		if !ok || int(v) != best {
			t.Fatalf("negotiate(%v, %v) = %d, %v; want %d", a, b, v, ok, best)
		}
		if w, ok2 := negotiate(b, a); w != v || ok2 != ok {
			t.Fatalf("negotiate is not symmetric: %d, %v and %d, %v", v, ok, w, ok2)
		}
	})
}

func fixedRand() io.Reader {
	b := make([]byte, 4*nonceSize)
	for i := range b {
		b[i] = byte(i)
	}
	return &repeatReader{b: b}
}

// repeatReader supplies the same bytes over and over.
type repeatReader struct{ b []byte }

func (r *repeatReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = r.b[i%len(r.b)]
	}
	return len(p), nil
}

// previousReleaseAcceptor plays a node of the previous release (handshake
// version 2, wire version 6) as its decoder does: a handshake of any other
// version is refused as another cluster or version, in version 2, and the
// connection closed; a version-2 hello is accepted (no secret), and the
// frames after it are read strictly as wire version 6.
type previousReleaseAcceptor struct {
	ln      net.Listener
	wg      sync.WaitGroup
	mu      sync.Mutex
	refused int
	frames  chan protocol.Message
	errs    chan error
}

func newPreviousReleaseAcceptor(t *testing.T, nodeID string) *previousReleaseAcceptor {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &previousReleaseAcceptor{ln: ln, frames: make(chan protocol.Message, 100), errs: make(chan error, 100)}
	t.Cleanup(func() { ln.Close(); p.wg.Wait() })
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				defer c.Close()
				p.serve(c, nodeID)
			}()
		}
	}()
	return p
}

func (p *previousReleaseAcceptor) serve(c net.Conn, nodeID string) {
	_ = c.SetDeadline(time.Now().Add(waitTimeout))
	br := bufio.NewReader(c)
	var hdr [hsFixedSize]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil {
		return
	}
	if hdr[4] != 2 {
		p.mu.Lock()
		p.refused++
		p.mu.Unlock()
		// appendHandshake in version 2 is what the previous release
		// writes: the bytes of a bare refusal did not change.
		_, _ = c.Write(appendHandshake(nil, handshake{Version: 2, Type: hsRefuseCluster, Lane: hdr[6]}))
		return
	}
	body := make([]byte, int(binary.BigEndian.Uint16(hdr[7:]))+crcSize)
	if _, err := io.ReadFull(br, body); err != nil {
		return
	}
	msg := append(hdr[:], body...)
	if crc32.Checksum(msg[:len(msg)-crcSize], castagnoli) != binary.BigEndian.Uint32(msg[len(msg)-crcSize:]) {
		p.errs <- errors.New("bad handshake checksum")
		return
	}
	h, err := decodeHandshake(msg)
	if err != nil || h.Type != hsHello {
		p.errs <- errors.New("not a version-2 hello")
		return
	}
	_, _ = c.Write(appendHandshake(nil, handshake{Version: 2, Type: hsAccept, Lane: h.Lane, ClusterID: h.ClusterID, NodeID: nodeID}))
	_ = c.SetDeadline(time.Time{})
	readFrames(br, p.errs, p.frames, func(v byte) error {
		if v != 6 {
			return fmt.Errorf("frame in wire version %d: the previous release reads 6 only", v)
		}
		return nil
	})
}

// readFrames reads frames from br until it fails, each checked by
// version (its wire version byte) before it is decoded; a refused or
// undecodable frame goes to errs and ends it, a decoded one to frames.
func readFrames(br *bufio.Reader, errs chan<- error, frames chan<- protocol.Message, version func(byte) error) {
	for {
		var lenb [lenSize]byte
		if _, err := io.ReadFull(br, lenb[:]); err != nil {
			return
		}
		n := binary.BigEndian.Uint32(lenb[:])
		if n == 0 {
			continue // keepalive
		}
		f := make([]byte, lenSize+int(n))
		copy(f, lenb[:])
		if _, err := io.ReadFull(br, f[lenSize:]); err != nil {
			return
		}
		if err := version(f[lenSize]); err != nil {
			errs <- err
			return
		}
		m, _, err := DecodeFrame(f, 0)
		if err != nil {
			errs <- err
			return
		}
		frames <- m
	}
}

// TestDialPreviousRelease: a node of this release (wire 6..10) dials a
// node of the previous release (6 only), which refuses handshake version
// 3 as another version (in version 2); the dialer dials again in version
// 2 and its messages arrive, on both lanes, in wire version 6, readable by
// the old decoder: a fetch carrying FeatureLevel 7 and a durable offset
// goes without them (the old decoder refuses any byte past Restand as
// trailing).
func TestDialPreviousRelease(t *testing.T) {
	if localWire != (versionRange{6, 10}) {
		t.Fatalf("this build speaks %d..%d; the test is of 6..10 against 6..6", localWire.min, localWire.max)
	}
	old := newPreviousReleaseAcceptor(t, "old")
	res := newResolverMap()
	res.set("old", old.ln.Addr().String())
	a := newTestTCP(t, TCPConfig{NodeID: "a", ClusterID: "c", Resolver: res.resolve})
	mustSend(t, a, protocol.Message{To: "old", Body: &protocol.VoteRequest{Epoch: 3, CandidateID: "a"}})
	mustSend(t, a, protocol.Message{To: "old", Body: &protocol.FetchRequest{FetchID: 4, ReplicaID: "a", FeatureLevel: 8, HasDurableOffset: true}})
	got := map[protocol.Kind]bool{}
	deadline := time.After(waitTimeout)
	for len(got) < 2 {
		select {
		case m := <-old.frames:
			if m.From != "a" || m.To != "old" {
				t.Fatalf("old node got %v", m)
			}
			if f, ok := m.Body.(*protocol.FetchRequest); ok && (f.FetchID != 4 || f.FeatureLevel != 0 || f.HasDurableOffset) {
				t.Fatalf("old node got %+v, want fetch 4 without a level or a durable offset", f)
			}
			got[m.Body.Kind()] = true
		case err := <-old.errs:
			t.Fatalf("old node: %v", err)
		case <-deadline:
			t.Fatalf("old node got %v only; dialer stats %+v", got, a.Stats())
		}
	}
	old.mu.Lock()
	refused := old.refused
	old.mu.Unlock()
	if refused != 2 {
		t.Errorf("old node refused %d version-3 handshakes, want one per lane (2)", refused)
	}
}

// TestAcceptPreviousRelease: a version-2 hello, as the previous release
// sends it, is answered in version 2 with the old layout (no wire byte),
// and the frames after it, in wire version 6, are delivered by a node of
// this release (6..9): a fetch without a level reads as the base level,
// and without a durable offset.
func TestAcceptPreviousRelease(t *testing.T) {
	b := newTestTCP(t, TCPConfig{NodeID: "b", ClusterID: "c", Resolver: newResolverMap().resolve})
	c, ans, err := rawHello(t, b.Addr(), handshake{Version: 2, Type: hsHello, Lane: laneControl, ClusterID: "c", NodeID: "old"})
	if err != nil {
		t.Fatal(err)
	}
	if want := appendHandshake(nil, handshake{Version: 2, Type: hsAccept, Lane: laneControl, ClusterID: "c", NodeID: "b"}); ans.Version != 2 || ans.Type != hsAccept || len(appendHandshake(nil, ans)) != len(want) {
		t.Fatalf("answer %+v, want a version-2 accept", ans)
	}
	frame, _ := AppendFrameAt(nil, protocol.Message{From: "old", To: "b", Body: &protocol.BeginEpoch{Epoch: 2, LeaderID: "old"}}, 6)
	if _, err := c.Write(frame); err != nil {
		t.Fatal(err)
	}
	if m := recvOne(t, b); m.From != "old" || m.Body.(*protocol.BeginEpoch).Epoch != 2 {
		t.Fatalf("got %v", m)
	}
	// Fetches travel on the data lane.
	d, ans, err := rawHello(t, b.Addr(), handshake{Version: 2, Type: hsHello, Lane: laneData, ClusterID: "c", NodeID: "old"})
	if err != nil || ans.Type != hsAccept {
		t.Fatalf("data lane: %+v %v", ans, err)
	}
	fetch, _ := AppendFrameAt(nil, protocol.Message{From: "old", To: "b", Body: &protocol.FetchRequest{FetchID: 5, ReplicaID: "old"}}, 6)
	if _, err := d.Write(fetch); err != nil {
		t.Fatal(err)
	}
	if m := recvOne(t, b); m.From != "old" || m.Body.(*protocol.FetchRequest).FetchID != 5 || m.Body.(*protocol.FetchRequest).FeatureLevel != 0 ||
		m.Body.(*protocol.FetchRequest).HasDurableOffset {
		t.Fatalf("got %v, want fetch 5 at the base level", m)
	}
}

// TestCurrentReleaseSendsLevel: two nodes of this release negotiate wire
// version 9 on both lanes (dialed each way), and a fetch's FeatureLevel
// and durable offset arrive, and so does the name of the log a message
// belongs to, on both lanes.
func TestCurrentReleaseSendsLevel(t *testing.T) {
	res := newResolverMap()
	a := newTestTCP(t, TCPConfig{NodeID: "a", ClusterID: "c", Resolver: res.resolve})
	b := newTestTCP(t, TCPConfig{NodeID: "b", ClusterID: "c", Resolver: res.resolve})
	res.set("a", a.Addr())
	res.set("b", b.Addr())
	for _, p := range []struct {
		from, to *TCP
		name     string
	}{{a, b, "b"}, {b, a, "a"}} {
		mustSend(t, p.from, protocol.Message{To: p.name, Body: &protocol.FetchRequest{FetchID: 9, ReplicaID: "x", FeatureLevel: 8,
			FetchOffset: 5, HasDurableOffset: true, DurableOffset: 3}})
		m := recvOne(t, p.to)
		if f, ok := m.Body.(*protocol.FetchRequest); !ok || f.FetchID != 9 || f.FeatureLevel != 8 || !f.HasDurableOffset || f.DurableOffset != 3 || m.Log != "" {
			t.Fatalf("%s got %v, want fetch 9 of the default log at level 8 with durable offset 3", p.name, m)
		}
		mustSend(t, p.from, protocol.Message{To: p.name, Log: "orders", Body: &protocol.FetchRequest{FetchID: 10, ReplicaID: "x"}})
		if m := recvOne(t, p.to); m.Log != "orders" || m.Body.(*protocol.FetchRequest).FetchID != 10 {
			t.Fatalf("%s got %v, want fetch 10 of log orders", p.name, m)
		}
		mustSend(t, p.from, protocol.Message{To: p.name, Log: "payments", Body: &protocol.BeginEpoch{Epoch: 4, LeaderID: "x"}})
		if m := recvOne(t, p.to); m.Log != "payments" || m.Body.(*protocol.BeginEpoch).Epoch != 4 {
			t.Fatalf("%s got %v, want BeginEpoch 4 of log payments", p.name, m)
		}
	}
	if s := a.Stats(); s.DroppedNamedLog != 0 {
		t.Fatalf("stats %+v: nothing may be dropped between two nodes of this release", s)
	}
}

// cappedAcceptor plays a node of a release before named logs: it speaks
// handshake 3 with the wire range wire (6..8) through this package's own
// handshake, and reads every frame after it strictly in the version
// negotiated, where a message has no log name: it is the default log's.
type cappedAcceptor struct {
	ln     net.Listener
	wg     sync.WaitGroup
	frames chan protocol.Message
	errs   chan error
}

func newCappedAcceptor(t *testing.T, nodeID string, wire versionRange) *cappedAcceptor {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cappedAcceptor{ln: ln, frames: make(chan protocol.Message, 100), errs: make(chan error, 100)}
	t.Cleanup(func() { ln.Close(); p.wg.Wait() })
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				defer c.Close()
				p.serve(c, nodeID, wire)
			}()
		}
	}()
	return p
}

func (p *cappedAcceptor) serve(c net.Conn, nodeID string, wire versionRange) {
	_ = c.SetDeadline(time.Now().Add(waitTimeout))
	h, err := acceptHandshake(c, hsSide{clusterID: "c", nodeID: nodeID, wire: wire}, nil)
	if err != nil {
		p.errs <- err
		return
	}
	_ = c.SetDeadline(time.Time{})
	readFrames(bufio.NewReader(c), p.errs, p.frames, func(v byte) error {
		if v != h.Chosen || v >= protocol.LogNameVersion {
			return fmt.Errorf("frame in wire version %d on a connection negotiated at %d, by a node that reads up to %d", v, h.Chosen, wire.max)
		}
		return nil
	})
}

// TestNamedLogNotSentToOlderPeer (R79): a node of this release sends to a
// peer whose wire versions end at 8 (a release before named logs). Every
// message of a named log, on either lane, is dropped and counted in
// DroppedNamedLog instead of going out without its name, which the peer
// would read as a message of its default log; the default log's messages
// around them arrive, in order, on the same connections (nothing is
// closed or redialled for it).
func TestNamedLogNotSentToOlderPeer(t *testing.T) {
	old := newCappedAcceptor(t, "old", versionRange{protocol.MinVersion, protocol.LogNameVersion - 1})
	res := newResolverMap()
	res.set("old", old.ln.Addr().String())
	a := newTestTCP(t, TCPConfig{NodeID: "a", ClusterID: "c", Resolver: res.resolve})
	// Epochs (control lane) and fetch IDs (data lane) 1..6: the odd ones
	// belong to the named log "orders", the even ones to the default log.
	for i := uint64(1); i <= 6; i++ {
		log := ""
		if i%2 == 1 {
			log = "orders"
		}
		mustSend(t, a, protocol.Message{To: "old", Log: log, Body: &protocol.BeginEpoch{Epoch: i, LeaderID: "a"}})
		mustSend(t, a, protocol.Message{To: "old", Log: log, Body: &protocol.FetchRequest{FetchID: i, ReplicaID: "a"}})
	}
	var epochs, fetches []uint64
	deadline := time.After(waitTimeout)
	for len(epochs) < 3 || len(fetches) < 3 {
		select {
		case m := <-old.frames:
			switch b := m.Body.(type) {
			case *protocol.BeginEpoch:
				epochs = append(epochs, b.Epoch)
			case *protocol.FetchRequest:
				fetches = append(fetches, b.FetchID)
			}
		case err := <-old.errs:
			t.Fatalf("old node: %v", err)
		case <-deadline:
			t.Fatalf("old node got epochs %v, fetches %v; sender stats %+v", epochs, fetches, a.Stats())
		}
	}
	want := []uint64{2, 4, 6}
	if !slices.Equal(epochs, want) || !slices.Equal(fetches, want) {
		t.Fatalf("old node got epochs %v and fetches %v, want %v each: only the default log's messages", epochs, fetches, want)
	}
	select {
	case m := <-old.frames:
		t.Fatalf("old node got %v as well", m)
	default:
	}
	if s := a.Stats(); s.DroppedNamedLog != 6 || s.Sent != 6 || s.DroppedNoConn != 0 || s.DroppedQueueFull != 0 {
		t.Fatalf("stats %+v: want 6 named messages dropped, 6 sent, nothing else dropped", s)
	}
}

// TestUnknownMessageKeepsConnection: frames a newer peer may send (a kind
// this node does not know, a wire version above its own) are dropped and
// counted, and the connection carries on: the next message on it is
// delivered and nothing counts as a bad connection. A garbled frame still
// closes it (positive control that the connection was the one watched).
func TestUnknownMessageKeepsConnection(t *testing.T) {
	b := newTestTCP(t, TCPConfig{NodeID: "b", ClusterID: "c", Resolver: newResolverMap().resolve})
	c, ans, err := rawHello(t, b.Addr(), handshake{Version: ProtocolVersion, Type: hsHello, Wire: localWire, Lane: laneControl, ClusterID: "c", NodeID: "x"})
	if err != nil || ans.Type != hsAccept {
		t.Fatalf("handshake: %+v %v", ans, err)
	}
	vote := func(epoch uint64) []byte {
		f, _ := AppendFrame(nil, protocol.Message{From: "x", To: "b", Body: &protocol.VoteRequest{Epoch: epoch, CandidateID: "x"}})
		return f
	}
	// reseal rewrites a frame's byte at i and its checksum.
	reseal := func(f []byte, i int, v byte) []byte {
		f = append([]byte(nil), f...)
		f[i] = v
		binary.BigEndian.PutUint32(f[len(f)-crcSize:], crc32.Checksum(f[:len(f)-crcSize], castagnoli))
		return f
	}
	newKind := reseal(vote(1), lenSize+1, 42)
	newVersion := reseal(vote(2), lenSize, protocol.Version+1)
	for _, f := range [][]byte{newKind, newVersion, vote(3)} {
		if _, err := c.Write(f); err != nil {
			t.Fatal(err)
		}
	}
	m := recvOne(t, b)
	if v, ok := m.Body.(*protocol.VoteRequest); !ok || v.Epoch != 3 {
		t.Fatalf("got %v, want the vote of epoch 3 (the two unknown frames dropped)", m)
	}
	if s := b.Stats(); s.UnknownMessages != 2 || s.BadConns != 0 {
		t.Fatalf("stats %+v: want 2 unknown messages, no bad connection", s)
	}
	// Still the same connection: one more message arrives on it.
	if _, err := c.Write(vote(4)); err != nil {
		t.Fatal(err)
	}
	if m := recvOne(t, b); m.Body.(*protocol.VoteRequest).Epoch != 4 {
		t.Fatalf("got %v", m)
	}
	bad := vote(5)
	bad[len(bad)-1] ^= 0xff
	if _, err := c.Write(bad); err != nil {
		t.Fatal(err)
	}
	expectClosed(t, c)
	eventually(t, "bad frame counted", func() bool { return b.Stats().BadConns == 1 })
}
