package hostile

import (
	"bytes"
	"crypto/rand"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/replog-io/replog"
	"github.com/replog-io/replog/internal/testwait"
	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/transport"
)

// Victims of the refusal test get long IDs, so that finding one in a few
// random bytes (a checksum, a nonce) cannot happen by chance.
var refusalVoters = []string{"refusal-victim-node-a", "refusal-victim-node-b", "refusal-victim-node-c"}

// exchange connects to addr, writes each message of script in turn (each
// after reading whatever the node sent so far), and returns every byte the
// node sent until it closed the connection (or 5 s passed).
func exchange(t *testing.T, addr string, script ...[]byte) []byte {
	t.Helper()
	return exchangeWithin(t, addr, 5*time.Second, script...)
}

func exchangeWithin(t *testing.T, addr string, d time.Duration, script ...[]byte) []byte {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(d))
	var got []byte
	for i, m := range script {
		if _, err := c.Write(m); err != nil {
			break
		}
		if i < len(script)-1 {
			// Read one handshake answer before the next step.
			_, raw, _ := readHandshakeMsg(c)
			got = append(got, raw...)
		}
	}
	rest, _ := io.ReadAll(c)
	return append(got, rest...)
}

// revealsNothing fails if b contains the cluster ID or a node ID.
func revealsNothing(t *testing.T, what string, b []byte) {
	t.Helper()
	for _, s := range append([]string{clusterID}, refusalVoters...) {
		if bytes.Contains(b, []byte(s)) {
			t.Errorf("%s: the node's answer (%d bytes) contains %q: %q", what, len(b), s, b)
		}
	}
}

// TestHandshakeRefusalsRevealNothing is finding 9's first part: an
// outsider refused at the handshake (wrong cluster ID, no secret, wrong
// secret, another protocol version) learns neither the cluster ID nor a
// node ID from the bytes the node sends back. Positive controls: a peer
// with the right cluster ID (insecure) or the right secret (the real
// transport) is accepted.
func TestHandshakeRefusalsRevealNothing(t *testing.T) {
	t.Run("secret", func(t *testing.T) {
		c := newClusterOf(t, refusalVoters, refusalVoters[:1], secretMode, nil)
		addr := c.nodes[refusalVoters[0]].Status().RPCAddr
		v := uint8(transport.ProtocolVersion)
		for _, tc := range []struct {
			name   string
			script [][]byte
		}{
			{"plain-hello-right-cluster", [][]byte{helloBytes(clusterID, "outsider", laneControl)}},
			{"plain-hello-wrong-cluster", [][]byte{helloBytes("some-other-cluster", "outsider", laneData)}},
			{"other-version", [][]byte{encodeHandshake(hsMsg{Version: v + 1, Type: hsHello, ClusterID: clusterID, NodeID: "outsider"})}},
			{"garbage", [][]byte{[]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")}},
			{"wrong-secret-proof", [][]byte{
				encodeHandshake(hsMsg{Version: v, Type: hsAuthHello, Lane: laneControl, NodeID: "outsider", Nonce: randomBytes(32)}),
				encodeHandshake(hsMsg{Version: v, Type: hsProof, Lane: laneControl, MAC: randomBytes(32)}),
			}},
			{"wrong-secret-proof-as-voter", [][]byte{
				encodeHandshake(hsMsg{Version: v, Type: hsAuthHello, Lane: laneData, NodeID: refusalVoters[1], Nonce: randomBytes(32)}),
				encodeHandshake(hsMsg{Version: v, Type: hsProof, Lane: laneData, MAC: randomBytes(32)}),
			}},
			// A node of this build answers the previous handshake version
			// as that release did: the same refusals, as bare.
			{"v2-plain-hello-right-cluster", [][]byte{helloBytesIn(legacyHandshake, clusterID, "outsider", laneControl)}},
			{"v2-wrong-secret-proof-as-voter", [][]byte{
				encodeHandshake(hsMsg{Version: legacyHandshake, Type: hsAuthHello, Lane: laneControl, NodeID: refusalVoters[1], Nonce: randomBytes(32)}),
				encodeHandshake(hsMsg{Version: legacyHandshake, Type: hsProof, Lane: laneControl, MAC: randomBytes(32)}),
			}},
		} {
			got := exchange(t, addr, tc.script...)
			t.Logf("%s: the node sent %d bytes", tc.name, len(got))
			// The voter ID the outsider sent itself does not count.
			check := got
			if strings.HasSuffix(tc.name, "wrong-secret-proof-as-voter") {
				check = bytes.ReplaceAll(got, []byte(refusalVoters[1]), nil)
			}
			revealsNothing(t, tc.name, check)
			if accepted(got) {
				t.Errorf("%s: the outsider was accepted", tc.name)
			}
		}
		// Positive control: the real transport with the secret connects.
		good := impostorTransport(t, refusalVoters[1], refusalVoters[0], addr, secretMode.secret)
		defer good.Close()
		testwait.WaitFor(t, "a transport with the secret to get a message through", 10*time.Second, func() bool {
			_ = good.Send(protocol.Message{To: refusalVoters[0], Body: &protocol.VoteResponse{Epoch: 0, VoterID: refusalVoters[1]}})
			return good.Stats().Sent > 0
		})
	})
	t.Run("insecure", func(t *testing.T) {
		c := newClusterOf(t, refusalVoters, refusalVoters[:1], insecureMode, nil)
		addr := c.nodes[refusalVoters[0]].Status().RPCAddr
		got := exchange(t, addr, helloBytes("some-other-cluster", "outsider", laneControl))
		revealsNothing(t, "wrong cluster ID", got)
		got = exchange(t, addr, encodeHandshake(hsMsg{Version: uint8(transport.ProtocolVersion) + 1, Type: hsHello, ClusterID: clusterID, NodeID: "outsider"}))
		revealsNothing(t, "other protocol version", got)
		got = exchange(t, addr, helloBytesIn(legacyHandshake, "some-other-cluster", "outsider", laneControl))
		revealsNothing(t, "wrong cluster ID in handshake version 2", got)
		// The right cluster ID, but no wire version in common: refused
		// (after the cluster ID checked out) as bare as the others.
		noCommon := [2]uint8{protocol.Version + 1, protocol.Version + 1}
		got = exchange(t, addr, encodeHandshake(hsMsg{Version: uint8(transport.ProtocolVersion), Type: hsHello, ClusterID: clusterID, NodeID: "outsider", Wire: noCommon}))
		revealsNothing(t, "no common wire version", got)
		if accepted(got) {
			t.Errorf("a hello offering only wire version %d was accepted", noCommon[0])
		}
		// Positive control: the right cluster ID is accepted (and the
		// accept names the node, as it may to a peer of the cluster), in
		// this build's handshake at this build's wire version and in the
		// previous one at the wire version it implies.
		rc, err := dialRaw(addr, clusterID, "outsider", refusalVoters[0], laneControl)
		if err != nil {
			t.Fatalf("positive control: a hello with the right cluster ID was refused: %v", err)
		}
		if rc.wire != protocol.Version {
			t.Errorf("positive control: a hello offering wire %d..%d got wire version %d, want %d", localWire[0], localWire[1], rc.wire, protocol.Version)
		}
		rc.close()
		rc, err = dialRawIn(legacyHandshake, addr, clusterID, "outsider", refusalVoters[0], laneControl)
		if err != nil {
			t.Fatalf("positive control: a version-2 hello with the right cluster ID was refused: %v", err)
		}
		rc.close()
	})
}

// accepted reports whether the handshake messages in b include an accept.
func accepted(b []byte) bool {
	r := bytes.NewReader(b)
	for {
		h, _, err := readHandshakeMsg(r)
		if err != nil {
			return false
		}
		if h.Type == hsAccept || h.Type == hsAuthAccept {
			return true
		}
	}
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

// lineCounter counts log lines written to it that contain want.
type lineCounter struct {
	mu     sync.Mutex
	want   string
	lines  int
	all    int
	sample string
}

func (w *lineCounter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, line := range bytes.Split(p, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		w.all++
		if bytes.Contains(line, []byte(w.want)) {
			w.lines++
			if len(w.sample) < 2000 {
				w.sample += string(line) + "\n"
			}
		}
	}
	return len(p), nil
}

func (w *lineCounter) count() (matching, all int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lines, w.all
}

// TestRefusalLogIsRateLimited is finding 9's second part: a flood of bad
// connections (garbage, plain hellos to a node with a secret, wrong
// proofs) must not flood the node's log: refusals are logged, but
// rate-limited. Positive control: the refusals are reported at all.
func TestRefusalLogIsRateLimited(t *testing.T) {
	const attempts = 300
	logs := &lineCounter{want: "transport:"} // the logger passes Warn and above
	c := newClusterOf(t, refusalVoters, refusalVoters[:1], secretMode, func(id string, o *replog.Options) {
		o.Logger = hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: logs})
	})
	addr := c.nodes[refusalVoters[0]].Status().RPCAddr
	v := uint8(transport.ProtocolVersion)
	for i := range attempts {
		var script [][]byte
		switch i % 3 {
		case 0:
			script = [][]byte{[]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")}
		case 1:
			script = [][]byte{helloBytes(clusterID, "outsider", laneControl)}
		case 2:
			script = [][]byte{
				encodeHandshake(hsMsg{Version: v, Type: hsAuthHello, Lane: laneControl, NodeID: "outsider", Nonce: randomBytes(32)}),
				encodeHandshake(hsMsg{Version: v, Type: hsProof, Lane: laneControl, MAC: randomBytes(32)}),
			}
		}
		// A node closes a refused connection at once; the short bound
		// only keeps a node that does not from making this slow.
		exchangeWithin(t, addr, 200*time.Millisecond, script...)
	}
	warn, all := logs.count()
	t.Logf("%d bad connections: %d warning lines (%d lines in all): %s", attempts, warn, all, logs.sample)
	if warn == 0 {
		t.Errorf("positive control: %d refused connections logged no warning at all", attempts)
	}
	if warn > attempts/10 {
		t.Errorf("%d bad connections produced %d warning lines: the log is not rate-limited", attempts, warn)
	}
}

// TestImpostorAcceptorNotBelieved is the other direction of the
// handshake: an outsider listening at a voter's configured address (voter
// n3 is down; its address is the outsider's) answers the nodes' dials. It
// does not hold the secret, so it bluffs: a challenge, then an accept with
// a made-up MAC. A node with a secret must not believe it: not one frame
// (vote request, BeginEpoch, fetch) reaches the impostor. Positive
// control: without a secret the same impostor is sent frames.
//
// The legacy variants pose as a node of the previous release: the
// impostor refuses this build's handshake version in version 2, which any
// party on the path can forge, so the node dials again in version 2 (the
// fallback to older peers). The fallback must not skip the proof: with a
// secret the version-2 bluff gets no frame either. Positive control: the
// node did fall back (the impostor saw version-2 dials; without a secret,
// it is sent frames over them).
//
// The real n3 helps bootstrap the cluster first (a new cluster's first
// election needs every voter, R57; see newClusterWithImpostorOfN3). Nodes
// then dial n3 when they look for votes, so once the impostor listens the
// leader is stopped: the other node campaigns, and its vote requests go to
// n3's address.
func TestImpostorAcceptorNotBelieved(t *testing.T) {
	for _, legacy := range []bool{false, true} {
		for _, sec := range []security{insecureMode, secretMode} {
			name := sec.String()
			var opts []func(*fakeNode)
			if legacy {
				name += "/legacy"
				opts = append(opts, legacyImpostor)
			}
			t.Run(name, func(t *testing.T) {
				c, fake := newClusterWithImpostorOfN3(t, sec, nil, opts...)
				lead, _ := c.leader()
				c.appendN(lead, "committed", 5)
				c.stop(lead)
				frames, bluffs := &fake.frames, &fake.bluffs
				if legacy {
					frames, bluffs = &fake.legacyFrames, &fake.legacyBluffs
				}
				if sec.secret == nil {
					testwait.WaitFor(t, "the impostor of n3 to be sent frames without a secret", 10*time.Second, func() bool {
						return frames.Load() > 0
					})
					t.Logf("the impostor received %d frames (%d over version 2 after %d refusals of version 3)", fake.frames.Load(), fake.legacyFrames.Load(), fake.downgrades.Load())
					return
				}
				testwait.WaitFor(t, "a node with a secret to dial the impostor of n3 (the bluff to be tried)", 10*time.Second, func() bool {
					return bluffs.Load() > 0
				})
				// Long enough for more rounds of the election (each asks n3).
				time.Sleep(time.Second)
				if n := fake.frames.Load(); n > 0 {
					t.Errorf("nodes with a secret sent %d frames (%d over version 2) to an impostor that bluffed through the handshake", n, fake.legacyFrames.Load())
				}
				t.Logf("the impostor bluffed through %d authenticated dials (%d in version 2 after %d refusals of version 3) and received %d frames",
					fake.bluffs.Load(), fake.legacyBluffs.Load(), fake.downgrades.Load(), fake.frames.Load())
			})
		}
	}
}
