package replog

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// TestRequireLeaderReaderFailsWhenCutOff: a reader on a follower, with
// WithRequireLeader, follows the log while the cluster has a leader
// (positive control: it is not failed, through appends and quiet spells
// longer than its bound); once the follower is cut off from both other
// voters it fails with ErrNoLeader, while a plain reader on the same node
// keeps waiting silently until its own context ends.
func TestRequireLeaderReaderFailsWhenCutOff(t *testing.T) {
	c := newCluster(t, 3, nil)
	lead := c.leader(15 * time.Second)
	var fid string
	for id := range c.nodes {
		if id != lead {
			fid = id
			break
		}
	}
	f := c.nodes[fid]
	ctx, cancel := appendCtx(t)
	defer cancel()

	const bound = 200 * time.Millisecond
	type result struct {
		n   int
		err error
	}
	got := make(chan int, 100)
	guarded := make(chan result, 1)
	go func() {
		n := 0
		for _, err := range f.Read(WithRequireLeader(ctx, bound), 0) {
			if err != nil {
				guarded <- result{n, err}
				return
			}
			n++
			got <- n
		}
	}()
	plainCtx, plainCancel := context.WithCancel(ctx)
	defer plainCancel()
	plain := make(chan error, 1)
	go func() {
		var last error
		for _, err := range f.Read(plainCtx, 0) {
			last = err
		}
		plain <- last
	}()

	// With a leader: appends flow, with pauses of several bounds between
	// them, and the reader keeps going.
	for i := range 5 {
		if _, err := c.nodes[lead].Append(ctx, fmt.Appendf(nil, "e%d", i)); err != nil {
			t.Fatal(err)
		}
		select {
		case n := <-got:
			if n != i+1 {
				t.Fatalf("reader at entry %d, want %d", n, i+1)
			}
		case r := <-guarded:
			t.Fatalf("the reader failed with a leader present, after %d entries: %v", r.n, r.err)
		case <-time.After(15 * time.Second):
			t.Fatalf("entry %d not read", i)
		}
		time.Sleep(3 * bound)
	}
	select {
	case r := <-guarded:
		t.Fatalf("the reader failed with a leader present: %v", r.err)
	default:
	}

	// Cut off: both other voters die.
	cut := time.Now()
	for id, l := range c.nodes {
		if id != fid {
			l.crash()
			delete(c.nodes, id)
		}
	}
	select {
	case r := <-guarded:
		if !errors.Is(r.err, ErrNoLeader) || r.n != 5 {
			t.Fatalf("reader ended after %d entries with %v, want 5 and ErrNoLeader", r.n, r.err)
		}
		t.Logf("the reader failed %v after the cut: %v", time.Since(cut).Round(time.Millisecond), r.err)
	case <-time.After(15 * time.Second):
		t.Fatal("the reader with WithRequireLeader still waits 15s after its node was cut off")
	}
	// The plain reader is still waiting; it ends only with its context.
	select {
	case err := <-plain:
		t.Fatalf("the plain reader ended by itself: %v", err)
	default:
	}
	plainCancel()
	if err := <-plain; !errors.Is(err, context.Canceled) {
		t.Fatalf("plain reader ended with %v, want its context's error", err)
	}
	// A new guarded reader on the cut-off node fails at once; one with a
	// bound longer than the node has been without a leader does not, yet.
	var last error
	for _, err := range f.Read(WithRequireLeader(ctx, 0), 0) {
		last = err
	}
	if !errors.Is(last, ErrNoLeader) {
		t.Fatalf("new reader with bound 0: %v, want ErrNoLeader", last)
	}
	short, stop := context.WithTimeout(WithRequireLeader(ctx, time.Hour), 100*time.Millisecond)
	defer stop()
	for _, err := range f.Read(short, 0) {
		last = err
	}
	if !errors.Is(last, context.DeadlineExceeded) {
		t.Fatalf("reader with a bound of an hour: %v, want its deadline", last)
	}
}
