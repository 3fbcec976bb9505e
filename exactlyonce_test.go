package replog

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestAppendsExactlyOnceAcrossFailover (R63): appends through the
// followers, synchronous and asynchronous, while the leader crashes: none
// ends with an unknown outcome (their context outlives the fail-over), and
// every acknowledged append is in the log once, at its acknowledged
// offset.
func TestAppendsExactlyOnceAcrossFailover(t *testing.T) {
	c := newCluster(t, 3, nil)
	old := c.leader(15 * time.Second)
	var appenders []*Log
	for id, l := range c.nodes {
		if id != old {
			appenders = append(appenders, l)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var mu sync.Mutex
	acked := map[string]uint64{}
	var wg sync.WaitGroup
	crash := make(chan struct{})
	const perWorker = 40
	for w := range 4 {
		l := appenders[w%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWorker {
				if i == perWorker/4 && w == 0 {
					close(crash)
				}
				data := fmt.Sprintf("w%d-%d", w, i)
				var off uint64
				var err error
				if w%2 == 0 {
					off, err = l.Append(ctx, []byte(data))
				} else {
					off, err = l.AppendAsync(ctx, []byte(data)).Wait(ctx)
				}
				if err != nil {
					t.Errorf("%s: append %s: %v", l.opts.NodeID, data, err)
					return
				}
				mu.Lock()
				acked[data] = off
				mu.Unlock()
			}
		}()
	}
	<-crash
	c.nodes[old].crash()
	delete(c.nodes, old)
	wg.Wait()
	if t.Failed() {
		return
	}
	c.leader(15 * time.Second)
	checkExactlyOnce(t, ctx, appenders[0], acked)
}

// checkExactlyOnce reads l's whole log and checks that every acknowledged
// payload is in it once, at its acknowledged offset.
func checkExactlyOnce(t *testing.T, ctx context.Context, l *Log, acked map[string]uint64) {
	t.Helper()
	var last uint64
	for _, off := range acked {
		last = max(last, off)
	}
	seen := map[string][]uint64{}
	for e, err := range l.ReadRange(ctx, 0, last+1) {
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		seen[string(e.Data)] = append(seen[string(e.Data)], e.Offset)
	}
	for data, off := range acked {
		if got := seen[data]; len(got) != 1 || got[0] != off {
			t.Errorf("%s acknowledged at %d, in the log at %v", data, off, got)
		}
	}
}

// TestWithIDIsAppendedOnce (R64): the same ID through two nodes is
// appended once; the second call gets the original's offset and
// ErrDuplicate. Another ID (the positive control) is appended.
func TestWithIDIsAppendedOnce(t *testing.T) {
	c := newCluster(t, 3, nil)
	c.leader(15 * time.Second)
	ctx, cancel := appendCtx(t)
	defer cancel()
	var logs []*Log
	for _, l := range c.nodes {
		logs = append(logs, l)
	}
	off, err := logs[0].Append(ctx, []byte("order"), WithID("order-123"))
	if err != nil {
		t.Fatal(err)
	}
	off2, err := logs[1].Append(ctx, []byte("order"), WithID("order-123"))
	if !errors.Is(err, ErrDuplicate) || off2 != off {
		t.Fatalf("second append of the ID: %d, %v; want %d and ErrDuplicate", off2, err, off)
	}
	r := logs[2].AppendAsync(ctx, []byte("order"), WithID("order-123"))
	if off3, err := r.Wait(ctx); !errors.Is(err, ErrDuplicate) || off3 != off {
		t.Fatalf("async append of the ID: %d, %v", off3, err)
	}
	other, err := logs[1].Append(ctx, []byte("order"), WithID("order-124"))
	if err != nil || other == off {
		t.Fatalf("another ID: %d, %v", other, err)
	}
	checkExactlyOnce(t, ctx, logs[2], map[string]uint64{"order": off})
	if _, err := logs[0].Append(ctx, []byte("x"), WithID("")); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("empty ID: %v", err)
	}
}

// TestCursorOnAnyNode (R65, R66): a cursor committed on one node reads back
// on every other, after the newest commit, after a restart and after
// retention deleted everything below the leader's HW.
func TestCursorOnAnyNode(t *testing.T) {
	c := newCluster(t, 3, nil)
	leader := c.leader(15 * time.Second)
	ctx, cancel := appendCtx(t)
	defer cancel()
	var follower string
	for id := range c.nodes {
		if id != leader {
			follower = id
		}
	}
	if _, err := c.nodes[leader].Cursor(ctx, "pipeline"); !errors.Is(err, ErrNoCursor) {
		t.Fatalf("a cursor never committed: %v", err)
	}
	if err := c.nodes[follower].CommitCursor(ctx, "pipeline", 7); err != nil {
		t.Fatal(err)
	}
	if err := c.nodes[leader].CommitCursor(ctx, "pipeline", 9); err != nil {
		t.Fatal(err)
	}
	for id, l := range c.nodes {
		if next, err := l.Cursor(ctx, "pipeline"); err != nil || next != 9 {
			t.Fatalf("%s: Cursor = %d, %v; want 9", id, next, err)
		}
	}
	for i := range 20 {
		if _, err := c.nodes[follower].Append(ctx, fmt.Appendf(nil, "e%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	st := c.nodes[leader].Status()
	if _, err := c.nodes[leader].DeleteBefore(ctx, st.HighWatermark); err != nil {
		t.Fatal(err)
	}
	if err := c.nodes[follower].Close(); err != nil {
		t.Fatal(err)
	}
	delete(c.nodes, follower)
	l := c.restart(follower)
	if next, err := l.Cursor(ctx, "pipeline"); err != nil || next != 9 {
		t.Fatalf("after retention and a restart: Cursor = %d, %v; want 9", next, err)
	}
	if ls := l.Status().LogStart; ls == 0 {
		t.Fatalf("retention deleted nothing (log start %d): the test proves nothing", ls)
	}
}

func TestOptionsValidateExactlyOnceFields(t *testing.T) {
	for _, f := range []struct {
		name string
		set  func(*Options)
	}{
		{"DedupWindow", func(o *Options) { o.DedupWindow = -time.Second }},
		{"ProducerIdleTimeout", func(o *Options) { o.ProducerIdleTimeout = -time.Second }},
	} {
		o := Options{Dir: t.TempDir()}
		if err := o.Validate(); err != nil {
			t.Fatalf("positive control: %v", err)
		}
		f.set(&o)
		if err := o.Validate(); !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), f.name) {
			t.Fatalf("%s: %v", f.name, err)
		}
	}
	d := Options{Dir: "x"}.withDefaults()
	if d.DedupWindow != DefaultDedupWindow || d.ProducerIdleTimeout != DefaultProducerIdleTimeout {
		t.Fatalf("defaults: %v %v", d.DedupWindow, d.ProducerIdleTimeout)
	}
}
