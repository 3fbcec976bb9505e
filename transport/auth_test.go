package transport

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/replog-io/replog/internal/testpki"
	"github.com/replog-io/replog/protocol"
)

var (
	testSecret  = []byte("0123456789abcdef0123456789abcdef")
	otherSecret = []byte("fedcba9876543210fedcba9876543210")
)

// fastRetry makes a dialer retry refused connects quickly.
func fastRetry(cfg TCPConfig) TCPConfig {
	cfg.BackoffMin = 5 * time.Millisecond
	cfg.BackoffMax = 20 * time.Millisecond
	return cfg
}

// TestAuthHandshakeBothLanes: two nodes with the same secret exchange
// control and fetch traffic in both directions, each message carrying the
// authenticated From; no handshake failed.
func TestAuthHandshakeBothLanes(t *testing.T) {
	res := newResolverMap()
	a := newTestTCP(t, TCPConfig{NodeID: "a", ClusterID: "c", Resolver: res.resolve, Secret: testSecret})
	b := newTestTCP(t, TCPConfig{NodeID: "b", ClusterID: "c", Resolver: res.resolve, Secret: testSecret})
	res.set("a", a.Addr())
	res.set("b", b.Addr())
	for _, p := range []struct {
		from, to *TCP
		id       string
	}{{a, b, "a"}, {b, a, "b"}} {
		mustSend(t, p.from, protocol.Message{To: map[string]string{"a": "b", "b": "a"}[p.id], Body: &protocol.VoteRequest{Epoch: 7, CandidateID: p.id}})
		mustSend(t, p.from, protocol.Message{To: map[string]string{"a": "b", "b": "a"}[p.id], Body: &protocol.FetchRequest{FetchID: 9, ReplicaID: p.id}})
		gotVote, gotFetch := false, false
		for !gotVote || !gotFetch {
			m := recvOne(t, p.to)
			if m.From != p.id {
				t.Fatalf("got %v, want From %s", m, p.id)
			}
			switch body := m.Body.(type) {
			case *protocol.VoteRequest:
				gotVote = body.Epoch == 7
			case *protocol.FetchRequest:
				gotFetch = body.FetchID == 9
			}
		}
	}
	for _, tr := range []*TCP{a, b} {
		if s := tr.Stats(); s.BadConns != 0 || s.Unauthenticated != 0 {
			t.Fatalf("failed handshakes: %+v", s)
		}
	}
}

// TestAuthWithTLS: the secret handshake runs inside TLS too.
func TestAuthWithTLS(t *testing.T) {
	pki := testpki.New(t, "replog test CA")
	res := newResolverMap()
	cfgFor := func(name string) *tls.Config {
		return &tls.Config{Certificates: []tls.Certificate{pki.Issue(t, name)}, RootCAs: pki.Pool, MinVersion: tls.VersionTLS13}
	}
	a := newTestTCP(t, TCPConfig{NodeID: "a", ClusterID: "c", Resolver: res.resolve, TLS: cfgFor("a"), Secret: testSecret})
	b := newTestTCP(t, TCPConfig{NodeID: "b", ClusterID: "c", Resolver: res.resolve, TLS: cfgFor("b"), Secret: testSecret})
	res.set("b", b.Addr())
	mustSend(t, a, protocol.Message{To: "b", Body: &protocol.FetchRequest{FetchID: 3, ReplicaID: "a"}})
	if m := recvOne(t, b); m.From != "a" || m.Body.(*protocol.FetchRequest).FetchID != 3 {
		t.Fatalf("got %v", m)
	}
}

// TestAuthWrongSecretRefused: dialers with a wrong secret, no secret, or
// the right secret but another cluster ID deliver nothing, and the
// acceptor counts them as unauthenticated; a dialer with the right secret
// (positive control) delivers to the same node. Both sides of each refusal
// see it: the dialer reports ErrUnauthenticated.
func TestAuthWrongSecretRefused(t *testing.T) {
	res := newResolverMap()
	b := newTestTCP(t, TCPConfig{NodeID: "b", ClusterID: "c", Resolver: res.resolve, Secret: testSecret})
	res.set("b", b.Addr())
	for _, c := range []struct {
		name      string
		cluster   string
		secret    []byte
		dialerErr error
	}{
		{"wrong secret", "c", otherSecret, ErrUnauthenticated},
		{"no secret", "c", nil, ErrUnauthenticated},
		{"other cluster", "c2", testSecret, ErrUnauthenticated},
	} {
		t.Run(c.name, func(t *testing.T) {
			logM, bufM := captureLogger("m")
			m := newTestTCP(t, fastRetry(TCPConfig{NodeID: "m", ClusterID: c.cluster, Resolver: res.resolve, Secret: c.secret, Logger: logM, RefusalLogInterval: time.Nanosecond}))
			before := b.Stats().Unauthenticated
			eventually(t, "refusals", func() bool {
				_ = m.Send(protocol.Message{To: "b", Body: &protocol.VoteRequest{Epoch: 5, CandidateID: "m"}})
				return m.Stats().DroppedNoConn >= 2 && b.Stats().Unauthenticated >= before+2
			})
			if m.Stats().Sent != 0 {
				t.Fatalf("dialer wrote %d frames to a node that refused it", m.Stats().Sent)
			}
			expectNothing(t, b)
			if !strings.Contains(bufM.String(), c.dialerErr.Error()) {
				t.Fatalf("dialer did not log %v:\n%s", c.dialerErr, bufM.String())
			}
		})
	}
	t.Run("positive control", func(t *testing.T) {
		good := newTestTCP(t, TCPConfig{NodeID: "g", ClusterID: "c", Resolver: res.resolve, Secret: testSecret})
		mustSend(t, good, protocol.Message{To: "b", Body: &protocol.VoteRequest{Epoch: 5, CandidateID: "g"}})
		if m := recvOne(t, b); m.From != "g" {
			t.Fatalf("got %v", m)
		}
	})
}

// impostor listens where a peer should be and plays the acceptor's side
// without the secret: it answers the challenge step, then a forged
// acceptor proof (or a plain accept), and records whether the dialer ever
// sent anything after the handshake.
type impostor struct {
	ln        net.Listener
	answer    func(hello handshake) []byte
	wg        sync.WaitGroup
	mu        sync.Mutex
	handshook int
	postBytes int
}

func newImpostor(t *testing.T, answer func(hello handshake) []byte) *impostor {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	im := &impostor{ln: ln, answer: answer}
	im.wg.Add(1)
	go func() {
		defer im.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			im.wg.Add(1)
			go func() {
				defer im.wg.Done()
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(waitTimeout))
				h, err := readHandshake(c)
				if err != nil {
					return
				}
				if h.Type == hsAuthHello {
					// Challenge, and take whatever proof comes back.
					if _, err := c.Write(appendHandshake(nil, handshake{Version: ProtocolVersion, Type: hsChallenge, Lane: h.Lane, Nonce: [nonceSize]byte{42}})); err != nil {
						return
					}
					if _, err := readHandshake(c); err != nil {
						return
					}
				}
				if _, err := c.Write(im.answer(h)); err != nil {
					return
				}
				im.mu.Lock()
				im.handshook++
				im.mu.Unlock()
				n, _ := io.Copy(io.Discard, c)
				im.mu.Lock()
				im.postBytes += int(n)
				im.mu.Unlock()
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); im.wg.Wait() })
	return im
}

func (im *impostor) counts() (handshook, postBytes int) {
	im.mu.Lock()
	defer im.mu.Unlock()
	return im.handshook, im.postBytes
}

// TestAuthImpostorAcceptor: an acceptor without the secret cannot make a
// real dialer accept it, whatever it answers: a forged proof, a plain
// accept, or its own proof reflected. The dialer closes without writing a
// byte after the handshake and reports ErrUnauthenticated. Positive
// control: the same dialer reaches the real node.
func TestAuthImpostorAcceptor(t *testing.T) {
	for _, c := range []struct {
		name   string
		answer func(h handshake) []byte
	}{
		{"forged proof", func(h handshake) []byte {
			return appendHandshake(nil, handshake{Version: ProtocolVersion, Type: hsAuthAccept, Lane: h.Lane, MAC: [macSize]byte{1, 2, 3}})
		}},
		{"plain accept", func(h handshake) []byte {
			return appendHandshake(nil, handshake{Version: ProtocolVersion, Type: hsAccept, Lane: h.Lane, ClusterID: "c", NodeID: "b"})
		}},
		{"proof under another key", func(h handshake) []byte {
			tr := authTranscript{lane: h.Lane, clusterID: "c", dialerID: h.NodeID, acceptorID: "b", nonceD: h.Nonce, nonceA: [nonceSize]byte{42}}
			return appendHandshake(nil, handshake{Version: ProtocolVersion, Type: hsAuthAccept, Lane: h.Lane, MAC: authMAC(deriveAuthKey(otherSecret), tr, dirAcceptor)})
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			im := newImpostor(t, c.answer)
			res := newResolverMap()
			res.set("b", im.ln.Addr().String())
			logA, bufA := captureLogger("a")
			a := newTestTCP(t, fastRetry(TCPConfig{NodeID: "a", ClusterID: "c", Resolver: res.resolve, Secret: testSecret, Logger: logA, RefusalLogInterval: time.Nanosecond}))
			eventually(t, "impostor answered twice", func() bool {
				_ = a.Send(protocol.Message{To: "b", Body: &protocol.VoteRequest{Epoch: 5, CandidateID: "a"}})
				n, _ := im.counts()
				return n >= 2 && a.Stats().DroppedNoConn >= 2
			})
			a.Close()
			im.ln.Close()
			im.wg.Wait()
			if _, post := im.counts(); post != 0 || a.Stats().Sent != 0 {
				t.Fatalf("dialer sent %d bytes (%d frames) to an impostor", post, a.Stats().Sent)
			}
			if !strings.Contains(bufA.String(), ErrUnauthenticated.Error()) {
				t.Fatalf("dialer did not log ErrUnauthenticated:\n%s", bufA.String())
			}
		})
	}
	t.Run("positive control", func(t *testing.T) {
		res := newResolverMap()
		a := newTestTCP(t, TCPConfig{NodeID: "a", ClusterID: "c", Resolver: res.resolve, Secret: testSecret})
		b := newTestTCP(t, TCPConfig{NodeID: "b", ClusterID: "c", Resolver: res.resolve, Secret: testSecret})
		res.set("b", b.Addr())
		mustSend(t, a, protocol.Message{To: "b", Body: &protocol.VoteRequest{Epoch: 5, CandidateID: "a"}})
		recvOne(t, b)
		if a.Stats().Sent == 0 {
			t.Fatal("no frame counted as sent")
		}
	})
}

// recordingProxy forwards one connection to target and records what
// each side sent.
type recordingProxy struct {
	ln           net.Listener
	wg           sync.WaitGroup
	mu           sync.Mutex
	fromDialer   bytes.Buffer
	fromAcceptor bytes.Buffer
}

func newRecordingProxy(t *testing.T, target string) *recordingProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &recordingProxy{ln: ln}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		s, err := net.Dial("tcp", target)
		if err != nil {
			return
		}
		defer s.Close()
		pipe := func(dst, src net.Conn, rec *bytes.Buffer) {
			buf := make([]byte, 4096)
			for {
				n, err := src.Read(buf)
				if n > 0 {
					p.mu.Lock()
					rec.Write(buf[:n])
					p.mu.Unlock()
					if _, werr := dst.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		}
		done := make(chan struct{})
		go func() { pipe(c, s, &p.fromAcceptor); close(done) }()
		pipe(s, c, &p.fromDialer)
		s.Close()
		c.Close()
		<-done
	}()
	t.Cleanup(func() { ln.Close(); p.wg.Wait() })
	return p
}

// splitHandshakes splits a recorded byte stream into its leading
// handshake messages (n of them).
func splitHandshakes(t *testing.T, b []byte, n int) [][]byte {
	t.Helper()
	var out [][]byte
	r := bytes.NewReader(b)
	for range n {
		start := len(b) - r.Len()
		if _, err := readHandshake(r); err != nil {
			t.Fatalf("recorded handshake %d: %v", len(out), err)
		}
		out = append(out, b[start:len(b)-r.Len()])
	}
	return out
}

// TestAuthReplayRefused: a recorded, successful handshake (a dialer's
// hello and proof) played back on a new connection is refused, since the
// acceptor's nonce is fresh; so is the acceptor's recorded proof reflected
// back as a dialer's. Every byte the acceptor sends to the replayer is a
// challenge or a bare refusal, naming neither the cluster nor the node.
func TestAuthReplayRefused(t *testing.T) {
	res := newResolverMap()
	b := newTestTCP(t, TCPConfig{NodeID: "node-bbb", ClusterID: "cluster-ccc", Resolver: res.resolve, Secret: testSecret})
	proxy := newRecordingProxy(t, b.Addr())
	res.set("node-bbb", proxy.ln.Addr().String())
	a := newTestTCP(t, TCPConfig{NodeID: "a", ClusterID: "cluster-ccc", Resolver: res.resolve, Secret: testSecret})
	// The recorded session works (positive control).
	mustSend(t, a, protocol.Message{To: "node-bbb", Body: &protocol.VoteRequest{Epoch: 5, CandidateID: "a"}})
	if m := recvOne(t, b); m.From != "a" {
		t.Fatalf("got %v", m)
	}
	a.Close()
	proxy.ln.Close()
	proxy.wg.Wait()
	fromDialer := splitHandshakes(t, proxy.fromDialer.Bytes(), 2)     // authHello, proof
	fromAcceptor := splitHandshakes(t, proxy.fromAcceptor.Bytes(), 2) // challenge, authAccept
	accepted, _ := decodeHandshake(fromAcceptor[1])
	if accepted.Type != hsAuthAccept {
		t.Fatalf("recorded acceptor answer %+v", accepted)
	}
	// The frames the dialer sent after its proof.
	frames := proxy.fromDialer.Bytes()[len(fromDialer[0])+len(fromDialer[1]):]

	// The acceptor's MAC sent back as the dialer's proof.
	reflected := appendHandshake(nil, handshake{Version: accepted.Version, Type: hsProof, Lane: accepted.Lane, MAC: accepted.MAC})

	for _, c := range []struct {
		name  string
		proof []byte
	}{
		{"replayed proof", fromDialer[1]},
		{"reflected acceptor proof", reflected},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := b.Stats()
			conn, err := net.Dial("tcp", b.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(waitTimeout))
			if _, err := conn.Write(fromDialer[0]); err != nil {
				t.Fatal(err)
			}
			ch, err := readHandshake(conn)
			if err != nil || ch.Type != hsChallenge {
				t.Fatalf("challenge: %+v %v", ch, err)
			}
			recorded, _ := decodeHandshake(fromAcceptor[0])
			if ch.Nonce == recorded.Nonce {
				t.Fatal("the acceptor reused its nonce")
			}
			// The proof, then the frames, as if the replay had worked.
			_, _ = conn.Write(append(append([]byte(nil), c.proof...), frames...))
			rest, _ := io.ReadAll(conn)
			expectBareRefusal(t, rest, hsRefuse, "cluster-ccc", "node-bbb")
			all := append(appendHandshake(nil, ch), rest...)
			if bytes.Contains(all, []byte("cluster-ccc")) || bytes.Contains(all, []byte("node-bbb")) {
				t.Fatalf("acceptor revealed an ID to the replayer: %q", all)
			}
			eventually(t, "unauthenticated counted", func() bool { return b.Stats().Unauthenticated > before.Unauthenticated })
			if s := b.Stats(); s.Received != before.Received {
				t.Fatalf("replayed frames delivered: %+v", s)
			}
			expectNothing(t, b)
		})
	}
}

// TestAuthRefusalRevealsNothing: to a stranger (no secret, or a plain
// hello naming the right cluster), a node with a secret answers only a
// nonce and a bare refusal: the raw bytes name neither cluster nor node.
func TestAuthRefusalRevealsNothing(t *testing.T) {
	b := newTestTCP(t, TCPConfig{NodeID: "node-bbb", ClusterID: "cluster-ccc", Resolver: newResolverMap().resolve, Secret: testSecret})
	hidden := []string{"cluster-ccc", "node-bbb", "ccc", "bbb"}
	t.Run("plain hello with the right cluster", func(t *testing.T) {
		raw := rawExchange(t, b.Addr(), appendHandshake(nil, handshake{Version: ProtocolVersion, Type: hsHello, ClusterID: "cluster-ccc", NodeID: "a"}))
		expectBareRefusal(t, raw, hsRefuse, hidden...)
	})
	t.Run("wrong version", func(t *testing.T) {
		raw := rawExchange(t, b.Addr(), appendHandshake(nil, handshake{Version: ProtocolVersion + 1, Type: hsHello, ClusterID: "cluster-ccc", NodeID: "a"}))
		expectBareRefusal(t, raw, hsRefuseCluster, hidden...)
	})
	t.Run("wrong proof", func(t *testing.T) {
		msgs := append(appendHandshake(nil, handshake{Version: ProtocolVersion, Type: hsAuthHello, NodeID: "a", Nonce: [nonceSize]byte{7}}),
			appendHandshake(nil, handshake{Version: ProtocolVersion, Type: hsProof, MAC: [macSize]byte{9}})...)
		raw := rawExchange(t, b.Addr(), msgs)
		for _, s := range hidden {
			if bytes.Contains(raw, []byte(s)) {
				t.Fatalf("answer %q reveals %q", raw, s)
			}
		}
		parts := splitHandshakes(t, raw, 1)
		if ch, _ := decodeHandshake(parts[0]); ch.Type != hsChallenge {
			t.Fatalf("first answer %+v, want a challenge", ch)
		}
		expectBareRefusal(t, raw[len(parts[0]):], hsRefuse, hidden...)
	})
}

// TestAuthModeMismatch: a node with a secret and one without refuse each
// other in both directions (no downgrade).
func TestAuthModeMismatch(t *testing.T) {
	res := newResolverMap()
	logS, bufS := captureLogger("s")
	logP, bufP := captureLogger("p")
	s := newTestTCP(t, fastRetry(TCPConfig{NodeID: "s", ClusterID: "c", Resolver: res.resolve, Secret: testSecret, Logger: logS, RefusalLogInterval: time.Nanosecond}))
	p := newTestTCP(t, fastRetry(TCPConfig{NodeID: "p", ClusterID: "c", Resolver: res.resolve, Logger: logP, RefusalLogInterval: time.Nanosecond}))
	res.set("s", s.Addr())
	res.set("p", p.Addr())
	eventually(t, "refusals both ways", func() bool {
		_ = s.Send(protocol.Message{To: "p", Body: &protocol.BeginEpoch{Epoch: 1, LeaderID: "s"}})
		_ = p.Send(protocol.Message{To: "s", Body: &protocol.BeginEpoch{Epoch: 1, LeaderID: "p"}})
		return s.Stats().Unauthenticated >= 2 && p.Stats().Unauthenticated >= 2
	})
	expectNothing(t, s)
	expectNothing(t, p)
	for name, buf := range map[string]*syncBuffer{"s": bufS, "p": bufP} {
		if !strings.Contains(buf.String(), ErrUnauthenticated.Error()) {
			t.Fatalf("%s did not log ErrUnauthenticated:\n%s", name, buf.String())
		}
	}
}

// TestAuthHandshakeUnit runs both sides over a pipe: errors are classified
// as documented, and a successful handshake names the dialer.
func TestAuthHandshakeUnit(t *testing.T) {
	key := deriveAuthKey(testSecret)
	run := func(dialer, acceptor hsSide, peer string) (handshake, error, error) {
		_, h, dialErr, acceptErr := pipeHandshake(t, dialer, acceptor, peer)
		return h, dialErr, acceptErr
	}
	rnd := func() io.Reader { return bytes.NewReader(bytes.Repeat([]byte{1, 2, 3}, 100)) }
	d := hsSide{key: key, clusterID: "c", nodeID: "a", lane: laneData, rand: rnd()}
	acc := hsSide{key: key, clusterID: "c", nodeID: "b", rand: rnd()}
	if h, de, ae := run(d, acc, "b"); de != nil || ae != nil || h.NodeID != "a" || h.Lane != laneData {
		t.Fatalf("good handshake: %v / %v / %+v", de, ae, h)
	}
	wrong := d
	wrong.key = deriveAuthKey(otherSecret)
	if _, de, ae := run(wrong, acc, "b"); !errors.Is(de, ErrUnauthenticated) || !errors.Is(ae, ErrUnauthenticated) {
		t.Fatalf("wrong secret: %v / %v", de, ae)
	}
	if _, de, ae := run(d, acc, "not-b"); !errors.Is(de, ErrUnauthenticated) || !errors.Is(ae, ErrUnauthenticated) {
		t.Fatalf("wrong node: %v / %v", de, ae)
	}
	self := d
	self.nodeID = "b"
	if _, de, ae := run(self, acc, "b"); !errors.Is(de, ErrUnauthenticated) || !errors.Is(ae, ErrPeerNotVerified) {
		t.Fatalf("own node ID: %v / %v", de, ae)
	}
	plain := hsSide{clusterID: "c", nodeID: "b"}
	if _, de, ae := run(d, plain, "b"); !errors.Is(de, ErrUnauthenticated) || !errors.Is(ae, ErrUnauthenticated) {
		t.Fatalf("secret dialer, plain acceptor: %v / %v", de, ae)
	}
	plainD := hsSide{clusterID: "c", nodeID: "a"}
	if _, de, ae := run(plainD, hsSide{clusterID: "x", nodeID: "b"}, "b"); !errors.Is(de, ErrWrongCluster) || !errors.Is(ae, ErrWrongCluster) {
		t.Fatalf("plain, wrong cluster: %v / %v", de, ae)
	}
	if h, de, ae := run(plainD, plain, "b"); de != nil || ae != nil || h.NodeID != "a" {
		t.Fatalf("plain: %v / %v / %+v", de, ae, h)
	}
}

// oracleMAC computes a handshake MAC from the layout documented in
// auth.go, independently of authMAC: HMAC-SHA256 keyed by
// HKDF-SHA256(secret, info "replog transport handshake v2") over
// "replog-auth" 0 version lane, the cluster ID, dialer and acceptor IDs
// (each a uint16 length and bytes), nonceD, nonceA and the direction; in
// version 3 then the dialer's wire range (here the package's, which the
// fuzzed dialer offers) and, in the acceptor's, the version it chose
// (here protocol.Version).
func oracleMAC(key []byte, version, lane uint8, cluster, dialer, acceptor string, nonceD, nonceA []byte, dir byte) []byte {
	var b []byte
	b = append(b, "replog-auth\x00"...)
	b = append(b, version, lane)
	for _, s := range []string{cluster, dialer, acceptor} {
		b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
		b = append(b, s...)
	}
	b = append(b, nonceD...)
	b = append(b, nonceA...)
	b = append(b, dir)
	if version >= 3 {
		b = append(b, protocol.MinVersion, protocol.Version)
		if dir == 'A' {
			b = append(b, protocol.Version)
		}
	}
	m := hmac.New(sha256.New, key)
	m.Write(b)
	return m.Sum(nil)
}

// FuzzAuthHandshake plays a peer against either side of the authenticated
// handshake. The peer's two messages are built from fuzzed fields (types,
// lane, node ID, nonce, MAC) in valid envelopes, so the fuzzer reaches the
// MAC checks instead of stalling on checksums; a non-empty raw input is
// sent as is instead. Whatever the input: no panic; nothing either side
// writes names the cluster ID or (for the acceptor) its node ID; and a
// side accepts only if the peer's proof is the MAC the documented layout
// gives (oracleMAC, computed independently) for the node ID and lane the
// peer claimed.
func FuzzAuthHandshake(f *testing.F) {
	const cluster, acceptorID, dialerID = "fuzz-cluster-Q", "fuzz-node-Z", "n1"
	key := deriveAuthKey(testSecret)
	nonceA := bytes.Repeat([]byte{0xA5}, nonceSize)
	nonceD := bytes.Repeat([]byte{0x5A}, nonceSize)
	// Seeds: valid transcripts for both sides and lanes, broken ones, raw
	// bytes.
	// side: bit 0 picks the side under test, bit 2 the handshake version
	// (3, or 2 as a node of the previous release speaks it).
	for _, v := range []uint8{ProtocolVersion, minProtocolVersion} {
		vb := uint8(0)
		if v == minProtocolVersion {
			vb = 4
		}
		dialerSide, acceptorSide := vb, vb|1
		for _, lane := range []uint8{laneControl, laneData} {
			f.Add(dialerSide, uint8(hsAuthHello), uint8(hsProof), lane, dialerID, nonceD, oracleMAC(key, v, lane, cluster, dialerID, acceptorID, nonceD, nonceA, 'D'), []byte(nil))
			f.Add(acceptorSide, uint8(hsChallenge), uint8(hsAuthAccept), lane, "", nonceA, oracleMAC(key, v, lane, cluster, dialerID, acceptorID, nonceD, nonceA, 'A'), []byte(nil))
			f.Add(dialerSide, uint8(hsAuthHello), uint8(hsProof), lane, dialerID, nonceD, oracleMAC(key, v, lane, cluster, dialerID, acceptorID, nonceD, nonceA, 'A'), []byte(nil))
			f.Add(acceptorSide, uint8(hsChallenge), uint8(hsAuthAccept), lane, "", nonceA, oracleMAC(key, v, lane, cluster, dialerID, acceptorID, nonceD, nonceA, 'D'), []byte(nil))
			f.Add(acceptorSide, uint8(hsAccept), uint8(0), lane, acceptorID, []byte(nil), []byte(nil), []byte(nil))
		}
	}
	f.Add(uint8(0), uint8(hsHello), uint8(0), uint8(0), dialerID, []byte(nil), []byte(nil), []byte(nil))
	f.Add(uint8(0), uint8(0), uint8(0), uint8(0), "", []byte(nil), []byte(nil), []byte{'R', 'P', 'L', 'G', 2, 5})

	f.Fuzz(func(t *testing.T, side, typ1, typ2, lane uint8, nodeID string, nonce, mac, raw []byte) {
		if len(nodeID) > maxIDLen {
			return
		}
		in := raw
		ver := uint8(ProtocolVersion)
		if side&4 != 0 {
			ver = minProtocolVersion
		}
		if len(in) == 0 {
			m1 := handshake{Version: ver, Type: typ1, Lane: lane, NodeID: nodeID, Wire: localWire, Chosen: protocol.Version}
			if typ1 == hsHello || typ1 == hsAccept {
				m1.ClusterID = cluster
			}
			copy(m1.Nonce[:], nonce)
			m2 := handshake{Version: ver, Type: typ2, Lane: lane, Chosen: protocol.Version}
			copy(m2.MAC[:], mac)
			in = appendHandshake(appendHandshake(nil, m1), m2)
		}
		peerBytes := bytes.NewReader(in)
		var out bytes.Buffer
		rw := struct {
			io.Reader
			io.Writer
		}{peerBytes, &out}
		consumed := func() []byte { return in[:len(in)-peerBytes.Len()] }
		if side%2 == 0 {
			// The acceptor under test; the input is the dialer.
			side := hsSide{key: key, clusterID: cluster, nodeID: acceptorID, rand: bytes.NewReader(nonceA)}
			h, err := acceptHandshake(rw, side, nil)
			for _, s := range []string{cluster, acceptorID} {
				if bytes.Contains(out.Bytes(), []byte(s)) {
					t.Fatalf("acceptor wrote %q, naming %q", out.Bytes(), s)
				}
			}
			if err != nil {
				// Completeness: a valid transcript must be accepted.
				var n [nonceSize]byte
				copy(n[:], nonce)
				if len(raw) == 0 && typ1 == hsAuthHello && typ2 == hsProof && lane < 2 && nodeID != "" && nodeID != acceptorID &&
					bytes.Equal(mac, oracleMAC(key, ver, lane, cluster, nodeID, acceptorID, n[:], nonceA, 'D')) {
					t.Fatalf("valid dialer transcript refused: %v", err)
				}
				return
			}
			// Accepted: the input must be authHello + the right proof.
			r := bytes.NewReader(consumed())
			hello, err1 := readHandshake(r)
			if err1 != nil || hello.Type != hsAuthHello || hello.NodeID != h.NodeID || hello.Lane != h.Lane {
				t.Fatalf("accepted without an authHello: %+v / %+v %v", h, hello, err1)
			}
			proof, err2 := readHandshake(r)
			want := oracleMAC(key, hello.Version, h.Lane, cluster, h.NodeID, acceptorID, hello.Nonce[:], nonceA, 'D')
			if err2 != nil || proof.Type != hsProof || proof.Lane != h.Lane || !bytes.Equal(proof.MAC[:], want) {
				t.Fatalf("accepted %q with proof %+v %v, want MAC %x", h.NodeID, proof, err2, want)
			}
			return
		}
		// The dialer under test; the input is the acceptor.
		ds := hsSide{key: key, clusterID: cluster, nodeID: dialerID, lane: side / 2 % 2, version: ver, rand: bytes.NewReader(nonceD)}
		if len(raw) == 0 {
			ds.lane = lane % 2
		}
		_, err := dialHandshake(rw, ds, acceptorID)
		if bytes.Contains(out.Bytes(), []byte(cluster)) {
			t.Fatalf("dialer wrote the cluster ID: %q", out.Bytes())
		}
		if err != nil {
			// Completeness: a valid transcript must be accepted.
			var n [nonceSize]byte
			copy(n[:], nonce)
			if len(raw) == 0 && typ1 == hsChallenge && typ2 == hsAuthAccept && lane < 2 &&
				bytes.Equal(mac, oracleMAC(key, ver, ds.lane, cluster, dialerID, acceptorID, nonceD, n[:], 'A')) {
				t.Fatalf("valid acceptor transcript refused: %v", err)
			}
			return
		}
		r := bytes.NewReader(consumed())
		ch, err1 := readHandshake(r)
		if err1 != nil || ch.Type != hsChallenge || ch.Lane != ds.lane {
			t.Fatalf("dialer accepted without a challenge: %+v %v", ch, err1)
		}
		acc, err2 := readHandshake(r)
		want := oracleMAC(key, ver, ds.lane, cluster, dialerID, acceptorID, nonceD, ch.Nonce[:], 'A')
		if err2 != nil || acc.Type != hsAuthAccept || acc.Lane != ds.lane || !bytes.Equal(acc.MAC[:], want) {
			t.Fatalf("dialer accepted %+v %v, want MAC %x", acc, err2, want)
		}
	})
}

// TestAuthSpoofedFromClosed: a peer that proved the secret as "m" still
// cannot speak for another node: its own message is delivered (positive
// control), one claiming From "a" is dropped and the connection closed.
func TestAuthSpoofedFromClosed(t *testing.T) {
	b := newTestTCP(t, TCPConfig{NodeID: "b", ClusterID: "c", Resolver: newResolverMap().resolve, Secret: testSecret})
	conn, err := net.Dial("tcp", b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(waitTimeout))
	side := hsSide{key: deriveAuthKey(testSecret), clusterID: "c", nodeID: "m", lane: laneControl, rand: bytes.NewReader(bytes.Repeat([]byte{9}, nonceSize))}
	if _, err := dialHandshake(conn, side, "b"); err != nil {
		t.Fatal(err)
	}
	own, _ := AppendFrame(nil, protocol.Message{From: "m", To: "b", Body: &protocol.VoteRequest{Epoch: 1, CandidateID: "m"}})
	spoofed, _ := AppendFrame(nil, protocol.Message{From: "a", To: "b", Body: &protocol.VoteRequest{Epoch: 2, CandidateID: "a"}})
	after, _ := AppendFrame(nil, protocol.Message{From: "m", To: "b", Body: &protocol.VoteRequest{Epoch: 3, CandidateID: "m"}})
	if _, err := conn.Write(append(append(own, spoofed...), after...)); err != nil {
		t.Fatal(err)
	}
	if m := recvOne(t, b); m.From != "m" || m.Body.(*protocol.VoteRequest).Epoch != 1 {
		t.Fatalf("got %v, want m's own vote", m)
	}
	expectClosed(t, conn)
	eventually(t, "spoof counted", func() bool { return b.Stats().DroppedInbound == 1 })
	expectNothing(t, b)
	if s := b.Stats(); s.Received != 1 {
		t.Fatalf("received %d, want 1", s.Received)
	}
}
