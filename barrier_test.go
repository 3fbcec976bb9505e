package replog

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// TestBarrierReadYourWritesAcrossNodes: an append acknowledged on the
// leader is readable on a follower once Barrier on the follower returned,
// every time; right after the ack, without a barrier, the follower has
// often not caught up yet (logged: it is what the barrier is for).
func TestBarrierReadYourWritesAcrossNodes(t *testing.T) {
	c := newCluster(t, 3, nil)
	lead := c.leader(15 * time.Second)
	var f *Log
	for id, l := range c.nodes {
		if id != lead {
			f = l
			break
		}
	}
	ctx, cancel := appendCtx(t)
	defer cancel()
	stale := 0
	const rounds = 30
	for i := range rounds {
		rec := fmt.Sprintf("w%d", i)
		off, err := c.nodes[lead].Append(ctx, []byte(rec))
		if err != nil {
			t.Fatal(err)
		}
		if f.Status().ReadableHW <= off {
			stale++
		}
		if err := f.Barrier(ctx); err != nil {
			t.Fatalf("barrier %d: %v", i, err)
		}
		hw := f.Status().ReadableHW
		if hw <= off {
			t.Fatalf("after Barrier the follower's readable HW is %d, the append acknowledged before it is at %d", hw, off)
		}
		var got *Entry
		for e, err := range f.ReadRange(ctx, off, hw) {
			if err != nil {
				t.Fatal(err)
			}
			if e.Offset == off {
				got = &e
				break
			}
		}
		if got == nil || string(got.Data) != rec {
			t.Fatalf("after Barrier the follower reads %+v at %d, want %q", got, off, rec)
		}
	}
	t.Logf("%d of %d appends were not yet readable on the follower right after their ack", stale, rounds)
}

// TestBarrierSingleNodeAndErrors: a single node's barrier returns at
// once; on a node that knows no leader it waits until ctx ends and says
// there was no leader; after Close it says closed.
func TestBarrierSingleNodeAndErrors(t *testing.T) {
	l, err := Open(Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := appendCtx(t)
	defer cancel()
	off, err := l.Append(ctx, []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Barrier(ctx); err != nil {
		t.Fatal(err)
	}
	if st := l.Status(); st.ReadableHW <= off+1 {
		t.Fatalf("readable HW %d: the barrier entry after offset %d is not below it", st.ReadableHW, off)
	}
	// The barrier entry takes an offset readers never see.
	next, err := l.Append(ctx, []byte("y"))
	if err != nil || next != off+2 {
		t.Fatalf("next append at %d (%v), want %d: one offset for the barrier", next, err, off+2)
	}
	var got []string
	for e, err := range l.ReadRange(ctx, 0, next+1) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(e.Data))
	}
	if fmt.Sprint(got) != "[x y]" {
		t.Fatalf("read %q, want only x and y", got)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Barrier(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("barrier after Close: %v, want ErrClosed", err)
	}
}

// TestBarrierWithoutLeader: a follower whose other voters are gone cannot
// get a barrier committed; when ctx ends it says no leader would take it
// (WaitReady says the same).
func TestBarrierWithoutLeader(t *testing.T) {
	c := newCluster(t, 3, nil)
	lead := c.leader(15 * time.Second)
	var fid string
	for id := range c.nodes {
		if id != lead {
			fid = id
		}
	}
	f := c.nodes[fid]
	for id, l := range c.nodes {
		if id != fid {
			l.crash()
			delete(c.nodes, id)
		}
	}
	waitFor(t, fid+" knows no leader", 15*time.Second, func() bool { return f.Status().LeaderID == "" })
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err := f.Barrier(ctx)
	if !errors.Is(err, ErrNoLeader) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("barrier without a leader: %v, want ErrNoLeader and the deadline", err)
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel2()
	if err := f.WaitReady(ctx2); !errors.Is(err, ErrNoLeader) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitReady without a leader: %v, want ErrNoLeader and the deadline", err)
	}
}

// TestWaitReady: on a fresh cluster every node becomes ready, and then
// knows its leader and has read what was acknowledged before the call.
func TestWaitReady(t *testing.T) {
	c := newCluster(t, 3, nil)
	ctx, cancel := appendCtx(t)
	defer cancel()
	errs := make(chan error, len(c.nodes))
	for _, l := range c.nodes {
		go func() { errs <- l.WaitReady(ctx) }()
	}
	for range c.nodes {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	lead := c.leader(15 * time.Second)
	off, err := c.nodes[lead].Append(ctx, []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	for id, l := range c.nodes {
		if err := l.WaitReady(ctx); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		if st := l.Status(); st.LeaderID != lead || st.ReadableHW <= off {
			t.Fatalf("%s ready with leader %q and readable HW %d; want %s and above %d", id, st.LeaderID, st.ReadableHW, lead, off)
		}
	}
}
