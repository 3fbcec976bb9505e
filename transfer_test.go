package replog

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestTransferLeadership: the refusals (on a follower, to a non-voter, to
// itself), and a transfer to a named follower, which leads when the call
// returns; appends work on every node afterwards.
func TestTransferLeadership(t *testing.T) {
	c := newCluster(t, 3, nil)
	lead := c.leader(10 * time.Second)
	ctx, cancel := appendCtx(t)
	defer cancel()
	if _, err := c.nodes[lead].Append(ctx, []byte("before")); err != nil {
		t.Fatal(err)
	}
	var succ, other string
	for id := range c.nodes {
		switch {
		case id == lead:
		case succ == "":
			succ = id
		default:
			other = id
		}
	}
	var nle *NotLeaderError
	if err := c.nodes[other].TransferLeadership(ctx, succ); !errors.As(err, &nle) || nle.LeaderID != lead {
		t.Fatalf("on a follower: %v, want a NotLeaderError naming %s", err, lead)
	}
	for _, to := range []string{"zz", lead} {
		if err := c.nodes[lead].TransferLeadership(ctx, to); !errors.Is(err, ErrNoSuccessor) {
			t.Fatalf("to %q: %v, want ErrNoSuccessor", to, err)
		}
	}
	if st := c.nodes[lead].Status(); st.Role != RoleLeader {
		t.Fatalf("a refused transfer changed the leader's role: %s", st.Role)
	}

	if err := c.nodes[lead].TransferLeadership(ctx, succ); err != nil {
		t.Fatalf("transfer to %s: %v", succ, err)
	}
	// TransferLeadership returns once the old leader knows the new one,
	// which has led since.
	if st := c.nodes[lead].Status(); st.LeaderID != succ || st.Role != RoleFollower {
		t.Fatalf("old leader after the transfer: %s following %q, want a follower of %s", st.Role, st.LeaderID, succ)
	}
	// (It publishes its Status right after it sends BeginEpoch.)
	waitFor(t, succ+" leads", 10*time.Second, func() bool { return c.nodes[succ].Status().Role == RoleLeader })
	for id, l := range c.nodes {
		if _, err := l.Append(ctx, []byte("after "+id)); err != nil {
			t.Fatalf("append on %s after the transfer: %v", id, err)
		}
	}
}

// TestTransferKeepsAppends: appends made on every node while the
// leadership moves (twice, to the most caught-up voter) wait instead of
// failing, and each is committed exactly once: those the old leader held
// are refused as never appended and sent again to the new leader.
func TestTransferKeepsAppends(t *testing.T) {
	c := newCluster(t, 3, nil)
	c.leader(10 * time.Second)
	ids := slices.Sorted(func(yield func(string) bool) {
		for id := range c.nodes {
			if !yield(id) {
				return
			}
		}
	})
	ctx, cancel := appendCtx(t)
	defer cancel()
	var stop atomic.Bool
	var wg sync.WaitGroup
	var mu sync.Mutex
	acked := map[string]uint64{} // payload -> offset
	var failures []error
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := c.nodes[ids[g%len(ids)]]
			for i := 0; !stop.Load(); i++ {
				p := fmt.Sprintf("g%d-%d", g, i)
				off, err := l.Append(ctx, []byte(p))
				mu.Lock()
				if err != nil {
					failures = append(failures, fmt.Errorf("%s on %s: %w", p, l.opts.NodeID, err))
				} else {
					acked[p] = off
				}
				mu.Unlock()
			}
		}()
	}
	for range 2 {
		time.Sleep(100 * time.Millisecond)
		lead := c.leader(10 * time.Second)
		if err := c.nodes[lead].TransferLeadership(ctx, ""); err != nil {
			t.Errorf("transfer from %s: %v", lead, err)
		}
	}
	time.Sleep(100 * time.Millisecond)
	stop.Store(true)
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("%d appends failed during the transfers, first: %v", len(failures), failures[0])
	}
	checkCommittedOnce(t, c.nodes[c.leader(10*time.Second)], acked, nil)
}

// checkCommittedOnce reads l's committed log and checks that every acked
// payload is there once, at its offset, that no payload is there twice,
// and that nothing is there that was neither acked nor maybe (an append
// whose outcome was unknown). It returns how many entries it read.
func checkCommittedOnce(t *testing.T, l *Log, acked map[string]uint64, maybe map[string]bool) int {
	t.Helper()
	ctx, cancel := appendCtx(t)
	defer cancel()
	if err := l.Barrier(ctx); err != nil {
		t.Fatalf("barrier: %v", err)
	}
	hw := l.Status().ReadableHW
	seen := map[string]uint64{}
	n := 0
	for e, err := range l.ReadRange(ctx, 0, hw) {
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		n++
		p := string(e.Data)
		if prev, dup := seen[p]; dup {
			t.Fatalf("%q committed twice, at %d and %d", p, prev, e.Offset)
		}
		seen[p] = e.Offset
		if _, ok := acked[p]; !ok && !maybe[p] {
			t.Fatalf("%q at %d was neither acknowledged nor in doubt", p, e.Offset)
		}
	}
	for p, off := range acked {
		if got, ok := seen[p]; !ok || got != off {
			t.Fatalf("acknowledged %q at %d: in the log at %d (present %v)", p, off, got, ok)
		}
	}
	return n
}

// TestCloseHandsOver: Close on the leader hands its leadership over
// before it closes (Options.CloseTransferTimeout): when Close returns,
// another node already leads, without an election timeout.
func TestCloseHandsOver(t *testing.T) {
	c := newCluster(t, 3, func(id string, o *Options) { o.CloseTransferTimeout = 20 * time.Second })
	lead := c.leader(10 * time.Second)
	before := c.nodes[lead].Status().Epoch
	l := c.nodes[lead]
	delete(c.nodes, lead)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	var leaders []string
	for id, o := range c.nodes {
		if st := o.Status(); st.Role == RoleLeader && st.Epoch == before+1 {
			leaders = append(leaders, id)
		}
	}
	if len(leaders) != 1 {
		t.Fatalf("when Close returned, the leaders of epoch %d were %v, want one", before+1, leaders)
	}
}

// Flags of TestRollingRestart's figures (its assertions do not change).
var (
	rollingDefaults = flag.Bool("rolling.defaults", false,
		"TestRollingRestart: the Options' default timings (FetchTimeout 700ms, ElectionTimeout 200ms, FetchMaxWait 150ms) instead of the tests' fast ones")
	rollingNoTransfer = flag.Bool("rolling.notransfer", false,
		"TestRollingRestart: Close does not hand the leadership over (CloseTransferTimeout -1), for comparison")
)

// TestRollingRestart closes and reopens each node of a 3-node cluster in
// turn (a rolling restart) under 8 appenders. It checks correctness only:
// every node is back and caught up, every acknowledged append is in the
// log once at its offset, nothing is in it twice. It logs (go test -v -run
// TestRollingRestart) the longest time without a successful append around
// each restart: what leadership transfer is for (at most 300 ms per restart;
// before leadership transfer a leader's restart cost about 2.2 s with the
// default timings: -rolling.defaults, and -rolling.notransfer to compare).
func TestRollingRestart(t *testing.T) {
	c := newCluster(t, 3, func(id string, o *Options) {
		if *rollingDefaults {
			o.FetchTimeout, o.ElectionTimeout, o.FetchMaxWait = 0, 0, 0
		}
		if *rollingNoTransfer {
			o.CloseTransferTimeout = -1
		}
	})
	c.leader(10 * time.Second)
	ids := slices.Sorted(func(yield func(string) bool) {
		for id := range c.nodes {
			if !yield(id) {
				return
			}
		}
	})
	var nodesMu sync.RWMutex // c.nodes changes as nodes close and open
	pick := func(r *rand.Rand) *Log {
		nodesMu.RLock()
		defer nodesMu.RUnlock()
		for {
			if l, ok := c.nodes[ids[r.Intn(len(ids))]]; ok {
				return l
			}
		}
	}
	ctx, cancel := appendCtx(t)
	defer cancel()
	var (
		stop      atomic.Bool
		wg        sync.WaitGroup
		mu        sync.Mutex
		acked     = map[string]uint64{}
		maybe     = map[string]bool{}
		successes []time.Time // when each append returned successfully
	)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewSource(int64(g)))
			for i := 0; !stop.Load(); i++ {
				p := fmt.Sprintf("g%d-%d", g, i)
				l := pick(r)
				actx, acancel := context.WithTimeout(ctx, 5*time.Second)
				off, err := l.Append(actx, []byte(p))
				acancel()
				now := time.Now()
				mu.Lock()
				switch {
				case err == nil:
					acked[p] = off
					successes = append(successes, now)
				case errors.Is(err, ErrUnknownOutcome):
					maybe[p] = true // closed under it, or its context ended
				case errors.Is(err, ErrClosed), errors.Is(err, ErrNotLeader), errors.Is(err, context.DeadlineExceeded):
					// Nothing appended: try the next payload elsewhere.
				default:
					mu.Unlock()
					t.Errorf("append %s on %s: %v", p, l.opts.NodeID, err)
					return
				}
				mu.Unlock()
			}
		}()
	}
	type window struct {
		node, role string
		from, to   time.Time
	}
	var windows []window
	time.Sleep(300 * time.Millisecond)
	for _, id := range ids {
		l := c.nodes[id]
		w := window{node: id, role: string(l.Status().Role), from: time.Now()}
		nodesMu.Lock()
		delete(c.nodes, id)
		nodesMu.Unlock()
		if err := l.Close(); err != nil {
			t.Fatalf("close %s: %v", id, err)
		}
		o := c.opts[id]
		o.Join = nil
		for nid, other := range c.nodes {
			if nid != id {
				o.Join = append(o.Join, other.Status().GossipAddr)
			}
		}
		nl, err := Open(o)
		if err != nil {
			t.Fatalf("reopen %s: %v", id, err)
		}
		nodesMu.Lock()
		c.nodes[id] = nl
		nodesMu.Unlock()
		// Back: following a leader, and caught up with what was committed
		// when it came back.
		lead := c.leader(20 * time.Second)
		target := c.nodes[lead].Status().HighWatermark
		waitFor(t, id+" caught up", 20*time.Second, func() bool { return nl.Status().ReadableHW >= target })
		time.Sleep(300 * time.Millisecond)
		w.to = time.Now()
		windows = append(windows, w)
	}
	stop.Store(true)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	slices.SortFunc(successes, func(a, b time.Time) int { return a.Compare(b) })
	if len(acked) == 0 {
		t.Fatal("no append succeeded")
	}
	for _, w := range windows {
		gap, last := time.Duration(0), w.from
		for _, s := range successes {
			if s.Before(w.from) {
				continue
			}
			if s.After(w.to) {
				break
			}
			gap = max(gap, s.Sub(last))
			last = s
		}
		gap = max(gap, w.to.Sub(last))
		t.Logf("restart of %s (%s): longest gap without a successful append %v", w.node, w.role, gap.Round(time.Millisecond))
	}
	n := checkCommittedOnce(t, c.nodes[c.leader(10*time.Second)], acked, maybe)
	t.Logf("%d appends acknowledged, %d in doubt, %d entries committed", len(acked), len(maybe), n)
}
