package hostile

import (
	"context"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replog-io/replog"
	"github.com/replog-io/replog/internal/testwait"
	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/storage"
	"github.com/replog-io/replog/transport"
)

// otherThan returns a running node other than id.
func (c *cluster) otherThan(id string) string {
	for _, nid := range c.ids() {
		if nid != id {
			return nid
		}
	}
	c.t.Fatalf("no node other than %s", id)
	return ""
}

// settle gives a node's event loop time to act on messages it has already
// taken off the connection (sendOne waits for that). What the test then
// checks must hold however long this is.
func settle() { time.Sleep(300 * time.Millisecond) }

// sameLeadership fails unless node lead still leads in epoch and every
// running node still follows it in that epoch.
func (c *cluster) sameLeadership(lead string, epoch uint64) {
	c.t.Helper()
	for _, id := range c.ids() {
		st := c.nodes[id].Status()
		if st.Epoch != epoch || st.LeaderID != lead {
			c.t.Errorf("%s: epoch %d, leader %q, role %s; before the attack: epoch %d, leader %s", id, st.Epoch, st.LeaderID, st.Role, epoch, lead)
		}
	}
	if st := c.nodes[lead].Status(); st.Role != "leader" {
		c.t.Errorf("%s is %s, was leader", lead, st.Role)
	}
}

// readStore reads every entry of a stopped node's data directory.
func readStore(t *testing.T, dir string) []protocol.Entry {
	t.Helper()
	s, _, err := storage.OpenDirReadOnly(dir, storage.DirOptions{})
	if err != nil {
		t.Fatalf("open the stopped node's data directory: %v", err)
	}
	defer s.Close()
	es, err := s.Entries(s.LogStart(), 0, math.MaxInt)
	if err != nil {
		t.Fatalf("read the stopped node's data file: %v", err)
	}
	return es
}

// TestDivergingAnswerBelowHW is finding 1's third fault over the socket: a
// voter that looks legitimate (it uses voter n3's ID and n3's configured
// address, taken over once the real n3 is down: without authentication
// nothing tells it from n3) announces a new epoch to a follower and answers
// its fetch with a diverging epoch at (0, 0), below the follower's high
// watermark. The follower must not
// truncate committed entries: it halts loudly instead (Status().Error),
// and its data file still holds every committed entry.
//
// The core's own scenario test of the rule (no network) is in replica/.
func TestDivergingAnswerBelowHW(t *testing.T) {
	var attackEpoch atomic.Uint64 // 0 until the attack starts
	var addrs atomic.Pointer[map[string]string]
	var diverging atomic.Int64
	// The real n3 bootstraps the cluster with n1 and n2 (R57), then the
	// fake takes its address (see newClusterWithImpostorOfN3).
	c, fake := newClusterWithImpostorOfN3(t, insecureMode, func(f *fakeNode, m protocol.Message) {
		req, ok := m.Body.(*protocol.FetchRequest)
		e := attackEpoch.Load()
		if !ok || e == 0 {
			return // before the attack n3 is just down
		}
		addr := (*addrs.Load())[m.From]
		resp := &protocol.FetchResponse{FetchID: req.FetchID, LeaderID: "n3", Epoch: e}
		if req.CurrentEpoch < e {
			resp.Error = protocol.FetchFencedEpoch
		} else {
			resp.Error = protocol.FetchDivergingEpoch
			diverging.Add(1)
		}
		_ = f.send(m.From, addr, resp)
	})
	lead, epoch := c.leader()
	c.appendN(lead, "committed", 20)
	want := readAll(t, c.nodes[lead], lead)
	for _, id := range c.ids() {
		c.checkPrefix(id, want)
	}
	victim := c.otherThan(lead)
	committedEnd := c.nodes[victim].Status().HighWatermark
	addrs.Store(&map[string]string{victim: c.nodes[victim].Status().RPCAddr})
	attackEpoch.Store(epoch + 1)

	sendOne(t, c.nodes[victim].Status().RPCAddr, clusterID, "n3", victim, &protocol.BeginEpoch{Epoch: epoch + 1, LeaderID: "n3"})
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && (diverging.Load() == 0 || c.nodes[victim].Status().Error == "") {
		if st := c.nodes[victim].Status(); st.LEO < committedEnd {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	st := c.nodes[victim].Status()
	t.Logf("diverging answers sent to %s: %d; its status after: role %s epoch %d LEO %d HW %d error %q",
		victim, diverging.Load(), st.Role, st.Epoch, st.LEO, st.HighWatermark, st.Error)
	if st.LEO < committedEnd {
		t.Errorf("%s truncated its log to %d, below its high watermark %d", victim, st.LEO, committedEnd)
	}
	if diverging.Load() > 0 && st.Error == "" {
		t.Errorf("%s was told to truncate below its high watermark and did not halt loudly (Status().Error empty; role %s)", victim, st.Role)
	}
	if diverging.Load() == 0 {
		t.Logf("%s never fetched from the impostor in epoch %d: the diverging answer was not delivered", victim, epoch+1)
	}
	fake.close()
	dir := c.dirs[victim]
	c.stop(victim)
	got := readStore(t, dir)
	var data []protocol.Entry
	for _, e := range got {
		if e.Type == protocol.EntryData || e.Type == protocol.EntryKeyed {
			e.Data = protocol.UserData(e) // what a reader sees (appends are keyed: R61)
			data = append(data, e)
		}
	}
	if len(data) < len(want) {
		t.Fatalf("%s's data file holds %d data entries, %d were committed", victim, len(data), len(want))
	}
	for i, w := range want {
		if data[i].Offset != w.Offset || string(data[i].Data) != string(w.Data) {
			t.Fatalf("%s's data file: entry %d is %d %q, committed was %d %q", victim, i, data[i].Offset, data[i].Data, w.Offset, w.Data)
		}
	}
}

// TestImpersonatedFollower is finding 2: with both real followers stopped,
// an outsider handshakes as follower n_i on the fetch lane and sends fetches
// with the current epoch and fetch offset = the leader's LEO, to make the
// leader count it and commit without a majority.
//
// Without authentication nothing in the protocol can tell a perfect
// impersonation from the real follower (the impostor can learn the epoch,
// the offsets and the follower's directory ID from the protocol itself):
// the insecure subtest documents that the attack works there, which also
// shows the tooling is sound. It then shows that the impersonation must be
// perfect: the same impostor without the directory ID the voter set records
// for n_i is not counted (R56), appends do not commit and the leader
// resigns on check-quorum. With a secret the impostor is
// refused at the handshake (raw hello, or the real transport with a wrong
// secret), appends do not commit and the leader resigns on check-quorum;
// the same transport with the right secret does get the leader to commit
// (positive control).
func TestImpersonatedFollower(t *testing.T) {
	t.Run("insecure/impersonation-succeeds-without-authentication", func(t *testing.T) {
		c := newCluster(t, 3, insecureMode, nil)
		lead, _ := c.leader()
		c.appendN(lead, "before", 3)
		fake := c.otherThan(lead)
		for _, id := range c.ids() {
			if id != lead {
				c.stop(id)
			}
		}
		dir := dirIDOf(t, c.dirs[fake])
		l := c.nodes[lead]
		rc, err := dialRaw(l.Status().RPCAddr, clusterID, fake, lead, laneData)
		if err != nil {
			t.Fatalf("raw hello as %s: %v", fake, err)
		}
		defer rc.close()
		stop := impersonate(l, fake, dir, func(req *protocol.FetchRequest) error { return rc.send(req) })
		off, err := appendWithin(l, "while-impersonated", 10*time.Second)
		if serr := stop(); serr != nil {
			t.Fatalf("the impostor's fetches did not all get through: %v", serr)
		}
		if err != nil {
			t.Fatalf("documented behaviour changed: without authentication the leader no longer commits on the fetches of an impostor with the follower's directory ID (%v). "+
				"If a protocol defence now exists, assert it here.", err)
		}
		t.Logf("insecure: with both followers down the leader committed offset %d on the fetches of an impostor of %s (directory %s)", off, fake, dir)

		// R56: the same impostor, on the same connection, without fake's
		// directory ID is not the voter: its fetches are not counted. The
		// part above is the positive control. (It sends none: a made-up
		// one would also set off R58's automatic replacement, the leader
		// removing fake from the voters, and a leader that counted the
		// fetch anyway would then not be caught.)
		stop = impersonate(l, fake, "", func(req *protocol.FetchRequest) error { return rc.send(req) })
		commitsNothing(t, l, "without-the-directory")
		if err := stop(); err != nil {
			t.Fatalf("the impostor's fetches without the directory ID did not all get through: %v", err)
		}
	})

	t.Run("secret/impostor-refused", func(t *testing.T) {
		c := newCluster(t, 3, secretMode, nil)
		lead, _ := c.leader()
		c.appendN(lead, "before", 3)
		fake := c.otherThan(lead)
		for _, id := range c.ids() {
			if id != lead {
				c.stop(id)
			}
		}
		dir := dirIDOf(t, c.dirs[fake])
		l := c.nodes[lead]
		addr := l.Status().RPCAddr

		// Positive control: the real transport with the cluster's secret,
		// as the follower at its directory, makes the leader commit.
		good := impostorTransport(t, fake, lead, addr, secretMode.secret)
		stop := impersonate(l, fake, dir, func(req *protocol.FetchRequest) error {
			return good.Send(protocol.Message{To: lead, Body: req})
		})
		off, err := appendWithin(l, "with-the-secret", 10*time.Second)
		serr := stop()
		good.Close()
		if serr != nil {
			t.Fatalf("the transport with the secret refused to queue a fetch: %v", serr)
		}
		if err != nil {
			t.Fatalf("positive control: fetches from a transport holding the secret did not let the leader commit: %v", err)
		}
		t.Logf("positive control: with the secret, the leader committed offset %d", off)

		// The raw hello of a node without a secret is refused, and so is
		// a bluffed proof.
		if rc, err := dialRaw(addr, clusterID, fake, lead, laneData); err == nil {
			rc.close()
			t.Errorf("a plain hello as %s was accepted by a node with a secret", fake)
		}
		if rc, err := dialBluff(addr, fake, lead, laneData); err == nil {
			rc.close()
			t.Errorf("a made-up proof as %s was accepted by a node with a secret", fake)
		}
		// The real transport with a wrong secret is refused too, fetching
		// from the right directory.
		bad := impostorTransport(t, fake, lead, addr, []byte("not the cluster's secret, but long enough"))
		defer bad.Close()
		stop = impersonate(l, fake, dir, func(req *protocol.FetchRequest) error {
			return bad.Send(protocol.Message{To: lead, Body: req})
		})
		defer stop()
		commitsNothing(t, l, "without-a-majority")
		if st := bad.Stats(); st.Sent != 0 {
			t.Errorf("the transport with a wrong secret got %d frames through the handshake (%+v)", st.Sent, st)
		}
	})
}

// commitsNothing appends data through leader l, whose followers are all
// down while an impostor fetches, and fails unless the leader resigns on
// check-quorum, the append fails and the high watermark stays where it was.
func commitsNothing(t *testing.T, l *replog.Log, data string) {
	t.Helper()
	hw := l.Status().HighWatermark
	done := make(chan error, 1)
	var appended atomic.Uint64
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		off, err := l.Append(ctx, []byte(data))
		appended.Store(off)
		done <- err
	}()
	testwait.WaitFor(t, "the leader alone to resign on check-quorum despite the impostor", 20*time.Second, func() bool {
		return l.Status().Role != "leader"
	})
	if err := <-done; err == nil {
		t.Errorf("append %q committed at offset %d with both followers down and only an impostor fetching", data, appended.Load())
	}
	if st := l.Status(); st.HighWatermark > hw {
		t.Errorf("the leader's high watermark moved from %d to %d without a majority", hw, st.HighWatermark)
	}
}

// impersonate sends, every 30 ms until stop is called, a fetch as node
// fake from directory dir at the leader's current epoch and LEO (read from
// its status: an outsider learns them from the protocol's answers). stop
// returns the first error send returned, if any.
func impersonate(l *replog.Log, fake, dir string, send func(*protocol.FetchRequest) error) (stop func() error) {
	var wg sync.WaitGroup
	var firstErr error
	quit := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(30 * time.Millisecond)
		defer tick.Stop()
		for id := uint64(1); ; id++ {
			st := l.Status()
			err := send(&protocol.FetchRequest{
				FetchID: id, ReplicaID: fake, ReplicaDirID: dir, CurrentEpoch: st.Epoch,
				FetchOffset: st.LEO, LastFetchedEpoch: st.Epoch, MaxBytes: 1 << 20,
			})
			if err != nil && firstErr == nil {
				firstErr = err
			}
			select {
			case <-quit:
				return
			case <-tick.C:
			}
		}
	}()
	var once sync.Once
	return func() error {
		once.Do(func() { close(quit); wg.Wait() })
		return firstErr
	}
}

// dirIDOf reads the directory ID of a stopped node from its identity file.
// An attacker learns it from the protocol instead: the voter set (offset 0
// of every log, and any later EntryVoters entry) records it, and fetch
// answers carry those entries; the node's own fetches and the vote
// requests it sends and receives carry it too (R56).
func dirIDOf(t *testing.T, dir string) string {
	t.Helper()
	s, id, err := storage.OpenDirReadOnly(dir, storage.DirOptions{})
	if err != nil {
		t.Fatalf("read the identity of the stopped node's directory: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if id.DirectoryID == "" {
		t.Fatalf("the stopped node's directory %s has no directory ID", dir)
	}
	return id.DirectoryID
}

// impostorTransport is replog's own transport, run by an outsider as node
// id with the given secret, dialling only the leader.
func impostorTransport(t *testing.T, id, lead, addr string, secret []byte) *transport.TCP {
	t.Helper()
	cfg := transport.TCPConfig{
		NodeID: id, ClusterID: clusterID, ListenAddr: "127.0.0.1:0",
		Resolver: transport.StaticResolver(map[string]string{lead: addr}),
	}
	withTransportSecret(&cfg, secret)
	tr, err := transport.NewTCP(cfg)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for range tr.Receive() {
		}
	}()
	return tr
}

func appendWithin(l *replog.Log, data string, d time.Duration) (uint64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return l.Append(ctx, []byte(data))
}

// TestMaxEpochVoteRequest is finding 3: one VoteRequest with epoch 2^64-1,
// sent to the leader as one of the voters, must change nothing: every
// node keeps the epoch it had, the leader keeps leading, appends commit.
func TestMaxEpochVoteRequest(t *testing.T) {
	c := newCluster(t, 3, insecureMode, nil)
	lead, epoch := c.leader()
	c.appendN(lead, "before", 3)
	as := c.otherThan(lead)
	sendOne(t, c.nodes[lead].Status().RPCAddr, clusterID, as, lead, &protocol.VoteRequest{
		Epoch: math.MaxUint64, CandidateID: as, LastEpoch: math.MaxUint64, LEO: math.MaxUint64,
	}, appendRequest(1, epoch, []byte("CONTROL-AFTER-ATTACK")))
	settle()
	for _, id := range c.ids() {
		if e := c.nodes[id].Status().Epoch; e > epoch+100 {
			t.Errorf("%s moved to epoch %d (was %d) on one vote request", id, e, epoch)
		}
	}
	c.sameLeadership(lead, epoch)
	c.keepsCommitting("max-epoch")
	c.sawControlAppend(lead, "CONTROL-AFTER-ATTACK")
}

// sawControlAppend is the positive control of an attack on the control
// lane: a forwarded append sent as the same voter right after the attack,
// on the same connection, is in the leader's log, so the attack message
// did reach the protocol core (messages on a connection arrive in order).
func (c *cluster) sawControlAppend(lead, data string) {
	c.t.Helper()
	for _, e := range readAll(c.t, c.nodes[lead], lead) {
		if string(e.Data) == data {
			return
		}
	}
	c.t.Errorf("positive control: the append sent after the attack on the same connection (%q) is not in %s's log: the attack may never have reached the core", data, lead)
}

// TestOneMessageDeposesLeader is finding 4: a non-pre-vote VoteRequest at
// epoch+1, or a FetchResponse that answers no fetch (wrong FetchID) naming
// a higher epoch, sent to the leader as one of the voters, must not depose
// it: same leader, same epoch, appends commit.
func TestOneMessageDeposesLeader(t *testing.T) {
	for _, tc := range []struct {
		name string
		body func(as string, epoch, leo uint64) protocol.Body
	}{
		{"vote-request-epoch+1", func(as string, epoch, leo uint64) protocol.Body {
			return &protocol.VoteRequest{Epoch: epoch + 1, CandidateID: as, LastEpoch: epoch, LEO: leo}
		}},
		{"unsolicited-fetch-response-epoch+1", func(as string, epoch, leo uint64) protocol.Body {
			return &protocol.FetchResponse{FetchID: 0x5eed, LeaderID: as, Epoch: epoch + 1, HighWatermark: leo}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, 3, insecureMode, nil)
			lead, epoch := c.leader()
			c.appendN(lead, "before", 3)
			as := c.otherThan(lead)
			st := c.nodes[lead].Status()
			body := tc.body(as, epoch, st.LEO)
			if body.Kind() == protocol.KindVoteRequest {
				sendOne(t, st.RPCAddr, clusterID, as, lead, body, appendRequest(1, epoch, []byte("CONTROL-AFTER-ATTACK")))
			} else {
				// The fetch lane carries no append: the impersonated-follower
				// test shows raw fetch-lane frames reach the core.
				sendOne(t, st.RPCAddr, clusterID, as, lead, body)
			}
			settle()
			c.sameLeadership(lead, epoch)
			c.keepsCommitting(tc.name)
			if body.Kind() == protocol.KindVoteRequest {
				c.sawControlAppend(lead, "CONTROL-AFTER-ATTACK")
			}
		})
	}
}

// TestUnknownAppender is finding 5: an AppendRequest from a node ID that is
// not in the cluster is not appended. Positive control: the same raw
// client as a voter (without authentication, a perfect impersonation)
// does get its forwarded append into the log, so the refusal is about the
// sender's ID.
func TestUnknownAppender(t *testing.T) {
	c := newCluster(t, 3, insecureMode, nil)
	lead, epoch := c.leader()
	addr := c.nodes[lead].Status().RPCAddr
	known := c.otherThan(lead)
	sendOne(t, addr, clusterID, known, lead, appendRequest(1, epoch, []byte("FORWARDED-BY-KNOWN")))
	// The transport may refuse an unknown node at the handshake already:
	// that is a defence too.
	if rc, err := dialRaw(addr, clusterID, "zz", lead, laneControl); err != nil {
		t.Logf("handshake as zz refused: %v", err)
	} else {
		if err := rc.send(appendRequest(1, epoch, []byte("EVIL-FROM-ZZ"))); err != nil {
			t.Logf("send as zz: %v", err)
		}
		if err := rc.drain(); err != nil {
			t.Logf("drain as zz: %v", err)
		}
	}
	settle()
	c.keepsCommitting("unknown-appender")
	got := readAll(t, c.nodes[lead], lead)
	var datas []string
	for _, e := range got {
		datas = append(datas, string(e.Data))
	}
	if !slices.Contains(datas, "FORWARDED-BY-KNOWN") {
		t.Errorf("positive control: the append forwarded as voter %s is not in the log %q", known, datas)
	}
	if slices.Contains(datas, "EVIL-FROM-ZZ") {
		t.Errorf("an append forwarded by unknown node zz was committed: %q", datas)
	}
}
