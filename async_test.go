package replog

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"
)

// TestAppendAsyncManyInFlight: one goroutine puts thousands of appends in
// flight without a goroutine each; every handle completes with a distinct
// offset holding its record.
func TestAppendAsyncManyInFlight(t *testing.T) {
	c := newCluster(t, 3, nil)
	lead := c.leader(15 * time.Second)
	l := c.nodes[lead]
	ctx, cancel := appendCtx(t)
	defer cancel()
	const n = 3000
	before := runtime.NumGoroutine()
	rs := make([]*AppendResult, n)
	buf := make([]byte, 8)
	for i := range rs {
		copy(buf, fmt.Sprintf("r%07d", i))
		rs[i] = l.AppendAsync(ctx, buf) // buf is reused: AppendAsync copies
	}
	if d := runtime.NumGoroutine() - before; d > 50 {
		t.Fatalf("%d appends in flight made %d goroutines", n, d)
	}
	seen := map[uint64]int{}
	for i, r := range rs {
		off, err := r.Wait(ctx)
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		select {
		case <-r.Done():
		default:
			t.Fatal("Wait returned before Done was closed")
		}
		if j, dup := seen[off]; dup {
			t.Fatalf("appends %d and %d both at offset %d", j, i, off)
		}
		seen[off] = i
	}
	var max uint64
	for off := range seen {
		max = maxU(max, off)
	}
	read := 0
	for e, err := range l.ReadRange(ctx, 0, max+1) {
		if err != nil {
			t.Fatal(err)
		}
		i, ok := seen[e.Offset]
		if !ok || string(e.Data) != fmt.Sprintf("r%07d", i) {
			t.Fatalf("offset %d holds %q, want append %d's record", e.Offset, e.Data, i)
		}
		read++
	}
	if read != n {
		t.Fatalf("read %d records, want %d", read, n)
	}
}

func maxU(a, b uint64) uint64 {
	if a > b {
		return a
	}
	return b
}

// TestAppendAsyncErrorsAreAppends: in each situation the handle's error is
// the one Append returns.
func TestAppendAsyncErrorsAreAppends(t *testing.T) {
	check := func(t *testing.T, what string, sync, async error, want ...error) {
		t.Helper()
		for _, w := range want {
			if !errors.Is(sync, w) || !errors.Is(async, w) {
				t.Fatalf("%s: Append %v, AppendAsync %v; want both to wrap %v", what, sync, async, w)
			}
		}
		var a, b *NotLeaderError
		if errors.As(sync, &a) != errors.As(async, &b) || errors.Is(sync, ErrUnknownOutcome) != errors.Is(async, ErrUnknownOutcome) {
			t.Fatalf("%s: Append %v, AppendAsync %v: different kinds", what, sync, async)
		}
	}
	wait := func(r *AppendResult) error {
		select {
		case <-r.Done():
		case <-time.After(20 * time.Second):
			return errors.New("the handle never completed")
		}
		_, err := r.Wait(context.Background())
		return err
	}

	t.Run("single node", func(t *testing.T) {
		l, err := Open(Options{Dir: t.TempDir(), MaxRecordSize: 4})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := appendCtx(t)
		defer cancel()
		_, serr := l.Append(ctx, []byte("large"))
		check(t, "too large", serr, wait(l.AppendAsync(ctx, []byte("large"))), ErrTooLarge)
		done, stop := context.WithCancel(ctx)
		stop()
		_, serr = l.Append(done, []byte("x"))
		aerr := wait(l.AppendAsync(done, []byte("x")))
		if !errors.Is(aerr, context.Canceled) || errors.Is(aerr, ErrUnknownOutcome) {
			t.Fatalf("done context: AppendAsync %v (Append %v), want context.Canceled alone", aerr, serr)
		}
		// Positive control: the same call with a live context commits.
		if off, err := l.AppendAsync(ctx, []byte("x")).Wait(ctx); err != nil {
			t.Fatalf("positive control: %d, %v", off, err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		_, serr = l.Append(ctx, []byte("x"))
		check(t, "closed", serr, wait(l.AppendAsync(ctx, []byte("x"))), ErrClosed)
	})

	t.Run("no leader, then unknown outcome", func(t *testing.T) {
		c := newCluster(t, 3, nil)
		lead := c.leader(15 * time.Second)
		// The leader alone: it still leads (until check-quorum), so an
		// append reaches it and cannot commit.
		l := c.nodes[lead]
		for id, n := range c.nodes {
			if id != lead {
				n.crash()
			}
		}
		short := func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 200*time.Millisecond)
		}
		ctx1, c1 := short()
		defer c1()
		_, serr := l.Append(ctx1, []byte("x"))
		ctx2, c2 := short()
		defer c2()
		if l.Status().Role == RoleLeader {
			check(t, "in flight when ctx ends", serr, wait(l.AppendAsync(ctx2, []byte("x"))), ErrUnknownOutcome, context.DeadlineExceeded)
		}
		// Once it resigned, nobody leads: not leader, nothing appended.
		waitFor(t, lead+" resigns", 15*time.Second, func() bool { return l.Status().Role != RoleLeader })
		ctx3, c3 := short()
		defer c3()
		_, serr = l.Append(ctx3, []byte("x"))
		ctx4, c4 := short()
		defer c4()
		check(t, "no leader", serr, wait(l.AppendAsync(ctx4, []byte("x"))), ErrNotLeader, context.DeadlineExceeded)
	})
}

// TestAppendAsyncClose: closing a node with appends in flight completes
// every handle (committed, or failed with ErrClosed, alone or with
// ErrUnknownOutcome), including those queued behind the loop.
func TestAppendAsyncClose(t *testing.T) {
	c := newCluster(t, 3, nil)
	lead := c.leader(15 * time.Second)
	var f *Log
	for id, l := range c.nodes {
		if id != lead {
			f = l
		}
	}
	ctx, cancel := appendCtx(t)
	defer cancel()
	rs := make([]*AppendResult, 2000)
	for i := range rs {
		rs[i] = f.AppendAsync(ctx, []byte("x"))
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	ok, closed := 0, 0
	for i, r := range rs {
		select {
		case <-r.Done():
		case <-time.After(20 * time.Second):
			t.Fatalf("handle %d never completed after Close", i)
		}
		_, err := r.Wait(ctx)
		switch {
		case err == nil:
			ok++
		case errors.Is(err, ErrClosed):
			closed++
		default:
			t.Fatalf("handle %d: %v, want success or ErrClosed", i, err)
		}
	}
	t.Logf("after Close: %d committed, %d closed", ok, closed)
}
