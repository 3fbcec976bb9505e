package kv_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/replog-io/replog/kv"
	"github.com/replog-io/replog/replogtest"
)

// cluster starts three nodes with a KV on each, by node ID.
func cluster(t *testing.T) (*replogtest.Cluster, map[string]*kv.KV) {
	t.Helper()
	c := replogtest.NewCluster(t, 3)
	c.WaitLeader()
	kvs := map[string]*kv.KV{}
	for _, id := range c.IDs() {
		kvs[id] = openKV(t, c.Node(id), kv.Options{})
	}
	return c, kvs
}

// sameEverywhere takes a barrier on every node and checks that each KV
// then holds the same keys, values and revisions.
func sameEverywhere(t *testing.T, ctx context.Context, kvs map[string]*kv.KV) {
	t.Helper()
	var ref map[string]kv.Entry
	var refID string
	for id, s := range kvs {
		if err := s.Barrier(ctx); err != nil {
			t.Fatalf("%s: barrier: %v", id, err)
		}
		got := map[string]kv.Entry{}
		for _, key := range s.Keys("") {
			e, err := s.Get(key)
			if err != nil {
				t.Fatalf("%s: Get(%s): %v", id, key, err)
			}
			got[key] = e
		}
		if ref == nil {
			ref, refID = got, id
			continue
		}
		if len(got) != len(ref) {
			t.Fatalf("%s holds %d keys, %s %d", id, len(got), refID, len(ref))
		}
		for key, e := range ref {
			g := got[key]
			if string(g.Value) != string(e.Value) || g.Revision != e.Revision {
				t.Fatalf("%s: %s = %q@%d, on %s %q@%d", key, id, g.Value, g.Revision, refID, e.Value, e.Revision)
			}
		}
	}
}

// TestConcurrentUpdatesOneWins: two writers on two nodes Update one key
// naming the same revision; exactly one wins, the other is told the
// winner's revision, and every node agrees.
func TestConcurrentUpdatesOneWins(t *testing.T) {
	c, kvs := cluster(t)
	ctx := testCtx(t)
	ids := c.IDs()
	rev, err := kvs[ids[0]].Create(ctx, "lock", []byte("free"))
	if err != nil {
		t.Fatal(err)
	}
	for round := range 8 {
		// Both writers must see the revision they name; a barrier on the
		// second writer's node makes sure.
		a, b := kvs[ids[round%3]], kvs[ids[(round+1)%3]]
		if err := b.Barrier(ctx); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		revs, errs := make([]uint64, 2), make([]error, 2)
		for i, s := range []*kv.KV{a, b} {
			wg.Go(func() {
				revs[i], errs[i] = s.Update(ctx, "lock", fmt.Appendf(nil, "writer %d of round %d", i, round), rev)
			})
		}
		wg.Wait()
		var won []int
		var mismatch *kv.RevisionMismatchError
		for i, err := range errs {
			switch {
			case err == nil:
				won = append(won, i)
			case !errors.As(err, &mismatch):
				t.Fatalf("round %d, writer %d: %v", round, i, err)
			}
		}
		if len(won) != 1 {
			t.Fatalf("round %d: %d writers won (%v)", round, len(won), errs)
		}
		w := won[0]
		if mismatch.Current != revs[w] || mismatch.Expected != rev {
			t.Fatalf("round %d: the loser was told %+v, the winner's revision is %d", round, mismatch, revs[w])
		}
		sameEverywhere(t, ctx, kvs)
		for id, s := range kvs {
			e, _ := s.Get("lock")
			if e.Revision != revs[w] || string(e.Value) != fmt.Sprintf("writer %d of round %d", w, round) {
				t.Fatalf("round %d: %s holds %q@%d, the winner wrote at %d", round, id, e.Value, e.Revision, revs[w])
			}
		}
		rev = revs[w]
	}
}

// TestFollowerReadsItsWrites: a Put through a follower's KV is applied
// there before Put returns, and a linearizable Get on another node sees it.
func TestFollowerReadsItsWrites(t *testing.T) {
	c, kvs := cluster(t)
	ctx := testCtx(t)
	lead := c.WaitLeader()
	var follower, other string
	for _, id := range c.IDs() {
		switch {
		case id == lead:
		case follower == "":
			follower = id
		default:
			other = id
		}
	}
	rev, err := kvs[follower].Put(ctx, "k", []byte("v"))
	if err != nil {
		t.Fatal(err)
	}
	if e, err := kvs[follower].Get("k"); err != nil || e.Revision != rev {
		t.Fatalf("the writer's own Get: %+v, %v", e, err)
	}
	if e, err := kvs[other].GetLinearizable(ctx, "k"); err != nil || e.Revision != rev {
		t.Fatalf("a linearizable Get elsewhere: %+v, %v", e, err)
	}
}
