package replog

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestBalanceStateBacksOff: a log handed to its preferred leader is not
// handed over again within the hold after the hand-over; a hand-over
// undone within twice the hold (the log came back) doubles the hold, up
// to balanceBackoffMax; one that held resets it.
func TestBalanceStateBacksOff(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	var b balanceState
	if !b.due(t0) {
		t.Fatal("a log never handed over is not due")
	}
	b.moved(t0)
	if b.backoff != 0 {
		t.Fatalf("first hand-over: backoff %v, want 0", b.backoff)
	}
	if b.due(t0.Add(balanceBackoffMin - time.Millisecond)) {
		t.Fatal("due within the hold after a hand-over")
	}
	// Back within twice the hold: undone, the hold doubles each time.
	now := t0.Add(balanceBackoffMin)
	if !b.due(now) {
		t.Fatal("not due once the hold ended")
	}
	want := 2 * balanceBackoffMin
	for i := 0; i < 10; i++ {
		b.moved(now)
		if b.backoff != want {
			t.Fatalf("hand-over %d undone at once: backoff %v, want %v", i+2, b.backoff, want)
		}
		if b.due(now.Add(b.backoff - time.Millisecond)) {
			t.Fatalf("hand-over %d: due before its backoff %v ended", i+2, b.backoff)
		}
		now = now.Add(b.backoff)
		want = min(2*want, balanceBackoffMax)
	}
	if b.backoff != balanceBackoffMax {
		t.Fatalf("backoff %v after many undone hand-overs, want the cap %v", b.backoff, balanceBackoffMax)
	}
	// A hand-over that held for longer than twice the hold resets it.
	now = now.Add(2*b.backoff + time.Second)
	b.moved(now)
	if b.backoff != 0 || b.due(now.Add(balanceBackoffMin-time.Millisecond)) || !b.due(now.Add(balanceBackoffMin)) {
		t.Fatalf("after a hand-over that held: backoff %v, want 0 and the minimum hold", b.backoff)
	}
}

// TestBalancePassRunsTransfersAtOnce checks R107's pass: up to its limit
// of hand-overs under way at once (a pass that ran them one after
// another never has two in flight, and this test's moves wait until the
// limit is reached), never more, every move counted; after closing, none
// is started.
func TestBalancePassRunsTransfersAtOnce(t *testing.T) {
	const limit, logs = 4, 10
	lls := make([]*localLog, logs)
	for i := range lls {
		lls[i] = &localLog{}
	}
	var mu sync.Mutex
	inFlight, most := 0, 0
	full := make(chan struct{})
	var once sync.Once
	move := func(ll *localLog) bool {
		mu.Lock()
		inFlight++
		most = max(most, inFlight)
		if inFlight == limit {
			once.Do(func() { close(full) })
		}
		mu.Unlock()
		select {
		case <-full:
		case <-time.After(20 * time.Second): // a liveness bound, not a timing assertion
			t.Errorf("a move waited 20s for %d moves under way at once", limit)
		}
		mu.Lock()
		inFlight--
		mu.Unlock()
		return ll != lls[0] // one log does not move
	}
	if got := runBalancePass(lls, limit, nil, move); got != logs-1 {
		t.Fatalf("pass moved %d logs, want %d", got, logs-1)
	}
	if most != limit {
		t.Fatalf("at most %d moves under way at once, want %d", most, limit)
	}
	closing := make(chan struct{})
	close(closing)
	calls := 0
	runBalancePass(lls, limit, closing, func(*localLog) bool { calls++; return true })
	if calls != 0 {
		t.Fatalf("a pass after closing started %d moves", calls)
	}
}

// TestNodeRestartRebalancesLeaders: 24 logs on 3 nodes, each led by its
// preferred leader (8 a node). A node closed (its leaders handed over)
// and opened again gets its logs back, and so does one that crashed
// (its logs fail over by election, R106: every one must get a leader,
// none left with its two voters asking for pre-votes for ever): leaders
// end 8 a node again, each log on its preferred leader (R86, R107).
func TestNodeRestartRebalancesLeaders(t *testing.T) {
	c := newNodeCluster(t, 3)
	c.ready()
	ctx := nodeCtx(t)
	const logs = 24
	for i := range logs {
		if _, err := c.nodes[fmt.Sprintf("n%d", i%3+1)].CreateLog(ctx, fmt.Sprintf("r%d", i), LogOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	even := func() bool {
		if !c.preferredLeading() {
			return false
		}
		ls := c.leaders()
		for id := range c.nodes {
			if ls[id] < logs/3-1 || ls[id] > logs/3+1 {
				return false
			}
		}
		return true
	}
	var unled, logged time.Time // since when some log has had no leader; the last report
	allLed := func() bool {
		total := 0
		for _, n := range c.leaders() {
			total += n
		}
		if total == logs {
			unled = time.Time{}
			return true
		}
		if unled.IsZero() {
			unled = time.Now()
		}
		if time.Since(unled) < 10*time.Second || time.Since(logged) < time.Second {
			return false
		}
		logged = time.Now()
		// Say which logs have had no leader for long and how their
		// replicas stand, for the timeout's message.
		for i := range logs {
			name, led, state := fmt.Sprintf("r%d", i), false, ""
			for id, n := range c.nodes {
				if l, err := n.Log(name); err == nil {
					st := l.Status()
					led = led || st.Role == RoleLeader
					state += fmt.Sprintf(" %s:%s/e%d/leader=%q", id, st.Role, st.Epoch, st.LeaderID)
				}
			}
			if !led {
				t.Logf("%s has no leader:%s", name, state)
			}
		}
		return false
	}
	waitFor(t, "every log on its preferred leader", 30*time.Second, even)

	c.stop("n3")
	waitFor(t, "every log led while n3 is closed", 30*time.Second, allLed)
	c.start("n3", c.opts["n3"])
	waitFor(t, "leaders even again after n3 reopened", 30*time.Second, even)

	c.nodes["n2"].crash()
	delete(c.nodes, "n2")
	waitFor(t, "every log led after n2 crashed", 30*time.Second, allLed)
	c.start("n2", c.opts["n2"])
	waitFor(t, "leaders even again after n2 restarted", 30*time.Second, even)
}
