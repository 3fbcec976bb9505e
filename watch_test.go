package replog

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/replog-io/replog/replica"
)

// TestStatusRolesAndClose: Status names roles with the typed constants,
// which encode in JSON as the words they always were; after Close it says
// closed and names no leader.
func TestStatusRolesAndClose(t *testing.T) {
	l, err := Open(Options{Dir: t.TempDir(), NodeID: "solo"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := appendCtx(t)
	defer cancel()
	if _, err := l.Append(ctx, []byte("x")); err != nil {
		t.Fatal(err)
	}
	st := l.Status()
	if st.Role != RoleLeader || st.LeaderID != "solo" {
		t.Fatalf("role %q leader %q, want leader solo", st.Role, st.LeaderID)
	}
	b, err := json.Marshal(st)
	if err != nil || !strings.Contains(string(b), `"role":"leader"`) || !strings.Contains(string(b), `"leader_id":"solo"`) {
		t.Fatalf("JSON %s (%v): want role \"leader\" as before Role was typed", b, err)
	}
	var back Status
	if err := json.Unmarshal(b, &back); err != nil || back.Role != RoleLeader {
		t.Fatalf("decoded role %q (%v)", back.Role, err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	st2 := l.Status()
	if st2.Role != RoleClosed || st2.LeaderID != "" {
		t.Fatalf("after Close: role %q leader %q, want closed and no leader", st2.Role, st2.LeaderID)
	}
	if st2.LEO != st.LEO || st2.HighWatermark != st.HighWatermark || st2.NodeID != "solo" {
		t.Fatalf("after Close the last values are gone: %+v, was %+v", st2, st)
	}
}

// TestBelievedLeader: the API names no leader for a prospective or
// candidate node, although the core keeps the name of the leader it lost.
func TestBelievedLeader(t *testing.T) {
	for _, tc := range []struct {
		role replica.Role
		want string
	}{
		{replica.RoleLeader, "L"},
		{replica.RoleFollower, "L"},
		{replica.RoleObserver, "L"},
		{replica.RoleProspective, ""},
		{replica.RoleCandidate, ""},
	} {
		if got := believedLeader(replica.Status{Role: tc.role, LeaderID: "L"}); got != tc.want {
			t.Errorf("%s naming L: leader %q, want %q", tc.role, got, tc.want)
		}
		if got := roleOf(tc.role); string(got) != tc.role.String() {
			t.Errorf("roleOf(%s) = %q", tc.role, got)
		}
	}
}

// TestWatchSingleNode: the first event is the current view; ctx ending,
// and Close, end the iterator with their errors; breaking out early
// leaves nothing running (goleak checks the package).
func TestWatchSingleNode(t *testing.T) {
	l, err := Open(Options{Dir: t.TempDir(), NodeID: "solo"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := appendCtx(t)
	defer cancel()
	var first Event
	for ev, err := range l.Watch(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Role == RoleLeader {
			first = ev
			break // an early break: nothing may be left running
		}
	}
	if first.LeaderID != "solo" || first.Epoch == 0 || !slices.Equal(first.Voters, []string{"solo"}) {
		t.Fatalf("view %+v, want solo leading itself", first)
	}
	first.Voters[0] = "changed" // the caller owns it
	if l.watch.view().ev.Voters[0] != "solo" || l.Status().Voters[0].ID != "solo" {
		t.Fatal("an event's Voters aliases the node's")
	}

	short, stop := context.WithTimeout(ctx, 50*time.Millisecond)
	defer stop()
	var n int
	var last error
	for _, err := range l.Watch(short) {
		if err != nil {
			last = err
			break
		}
		n++
	}
	if n != 1 || !errors.Is(last, context.DeadlineExceeded) {
		t.Fatalf("%d events then %v, want the current view once, then the context's error", n, last)
	}

	done := make(chan error, 1)
	go func() {
		var last error
		for _, err := range l.Watch(ctx) {
			last = err
		}
		done <- last
	}()
	time.Sleep(20 * time.Millisecond)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Fatalf("watch ended with %v, want ErrClosed", err)
	}
	for _, err := range l.Watch(ctx) {
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("watch after Close: %v, want ErrClosed", err)
		}
	}
}

// TestWatchSeesFailoverAndNoStaleLeader: a follower's watcher sees its
// leader die: the follower stops naming it (a prospective or candidate
// names no leader), then follows a new one in a later epoch. A watcher
// that does not come back meanwhile holds nobody up and then gets the
// latest view at once.
func TestWatchSeesFailoverAndNoStaleLeader(t *testing.T) {
	c := newCluster(t, 3, nil)
	old := c.leader(15 * time.Second)
	var fid string
	for id := range c.nodes {
		if id != old {
			fid = id
			break
		}
	}
	f := c.nodes[fid]
	ctx, cancel := appendCtx(t)
	defer cancel()

	events := make(chan Event, 1000)
	werr := make(chan error, 1)
	go func() {
		for ev, err := range f.Watch(ctx) {
			if err != nil {
				werr <- err
				return
			}
			events <- ev
		}
	}()
	// The slow watcher: it takes the first view, then does not come back
	// until released.
	release := make(chan struct{})
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	slowFirst := make(chan Event, 1)
	slowNext := make(chan Event, 1)
	go func() {
		n := 0
		for ev, err := range f.Watch(ctx) {
			if err != nil {
				return
			}
			if n++; n == 1 {
				slowFirst <- ev
				<-release
				continue
			}
			slowNext <- ev
			return
		}
	}()
	first := <-slowFirst
	if first.LeaderID != old {
		t.Fatalf("%s's first view names %q, want %s", fid, first.LeaderID, old)
	}

	c.nodes[old].crash()
	delete(c.nodes, old)
	var sawNoLeader bool
	var final Event
	deadline := time.After(20 * time.Second)
	for final.LeaderID == "" || final.LeaderID == old {
		select {
		case ev := <-events:
			if (ev.Role == RoleProspective || ev.Role == RoleCandidate) && ev.LeaderID != "" {
				t.Fatalf("%s is %s but names leader %q", fid, ev.Role, ev.LeaderID)
			}
			if ev.LeaderID == "" {
				sawNoLeader = true
			}
			final = ev
		case err := <-werr:
			t.Fatal(err)
		case <-deadline:
			t.Fatalf("no new leader seen; last view %+v", final)
		}
	}
	if !sawNoLeader {
		t.Fatalf("%s went from %s to %s without ever naming no leader", fid, old, final.LeaderID)
	}
	if final.Epoch <= first.Epoch {
		t.Fatalf("new leader %s in epoch %d, not after %d", final.LeaderID, final.Epoch, first.Epoch)
	}
	// The cluster went on while the slow watcher was away: a commit
	// through the new leader.
	if _, err := f.Append(ctx, []byte("after")); err != nil {
		t.Fatal(err)
	}
	close(release)
	select {
	case ev := <-slowNext:
		st := f.Status()
		if ev.LeaderID != st.LeaderID || ev.Epoch != st.Epoch {
			t.Fatalf("the slow watcher's next view %+v, want the latest (leader %s, epoch %d)", ev, st.LeaderID, st.Epoch)
		}
	case <-deadline:
		t.Fatal("the slow watcher got nothing after coming back")
	}
}
