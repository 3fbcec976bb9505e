package kv_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/replog-io/replog/kv"
)

// The porcupine model of one key. A write whose outcome is unknown (it
// failed, so it may or may not have committed) may take effect at any
// point after its call, at a revision nobody saw: the state then holds
// the value with an unknown revision, which the next read or mismatch
// that reports one pins down.

type kvInput struct {
	op       string // put, get, create, update
	value    string
	expected uint64
}

type kvOutput struct {
	unknown  bool   // a write that failed: it may or may not have applied
	ok       bool   // a write that succeeded; a get that found the key
	exists   bool   // a create that found the key
	mismatch bool   // an update whose revision was not the key's
	value    string // a get's
	rev      uint64 // a write's or a get's revision; a mismatch's current one
}

type kvState struct {
	present bool
	value   string
	rev     uint64
	known   bool // rev is known (a write of unknown outcome sets none)
}

func (s kvState) revIs(r uint64) bool { return !s.known || s.rev == r }

func kvStep(st any, in any, out any) []any {
	s, i, o := st.(kvState), in.(kvInput), out.(kvOutput)
	applied := kvState{present: true, value: i.value, rev: o.rev, known: !o.unknown}
	switch i.op {
	case "put":
		if o.unknown {
			return []any{s, applied}
		}
		return []any{applied}
	case "get":
		if o.ok != s.present || o.ok && (o.value != s.value || !s.revIs(o.rev)) {
			return nil
		}
		if o.ok {
			s.rev, s.known = o.rev, true
		}
		return []any{s}
	case "create":
		switch {
		case o.unknown && s.present, o.exists && s.present:
			return []any{s}
		case o.unknown:
			return []any{s, applied}
		case o.ok && !s.present:
			return []any{applied}
		}
		return nil
	case "update":
		matches := s.present && s.revIs(i.expected) || !s.present && i.expected == 0
		switch {
		case o.unknown && matches:
			return []any{s, applied}
		case o.unknown:
			return []any{s}
		case o.ok && matches:
			return []any{applied}
		case o.mismatch && !s.present && o.rev == 0:
			return []any{s}
		case o.mismatch && s.present && o.rev != i.expected && s.revIs(o.rev):
			s.rev, s.known = o.rev, true
			return []any{s}
		}
		return nil
	}
	return nil
}

var kvModel = porcupine.NondeterministicModel{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range h {
			k := op.Metadata.(string)
			if byKey[k] == nil {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		var out [][]porcupine.Operation
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init:  func() []any { return []any{kvState{}} },
	Step:  kvStep,
	Equal: func(a, b any) bool { return a.(kvState) == b.(kvState) },
	DescribeOperation: func(in, out any) string {
		return fmt.Sprintf("%+v → %+v", in, out)
	},
}

// TestLinearizable runs clients on every node doing Put, GetLinearizable,
// Create and Update on a few keys while the leader is cut off from the
// others and healed, and checks the history with porcupine.
func TestLinearizable(t *testing.T) {
	c, kvs := cluster(t)
	ctx := testCtx(t)
	ids := c.IDs()
	start := time.Now()
	now := func() int64 { return int64(time.Since(start)) }

	var mu sync.Mutex
	var history []porcupine.Operation
	record := func(client int, key string, in kvInput, call int64, out kvOutput) {
		ret := now()
		if out.unknown {
			ret = math.MaxInt64 // it may take effect at any time after its call
		}
		mu.Lock()
		history = append(history, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret, Metadata: key})
		mu.Unlock()
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	for client := range 6 {
		s := kvs[ids[client%len(ids)]]
		rng := rand.New(rand.NewPCG(uint64(client), 7))
		wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				key := fmt.Sprint("key", rng.IntN(3))
				in := kvInput{value: fmt.Sprintf("c%d-%d", client, n)}
				opCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
				call := now()
				var out kvOutput
				var err error
				switch rng.IntN(4) {
				case 0:
					in.op = "put"
					out.rev, err = s.Put(opCtx, key, []byte(in.value))
				case 1:
					in.op, in.value = "get", ""
					var e kv.Entry
					e, err = s.GetLinearizable(opCtx, key)
					if errors.Is(err, kv.ErrNotFound) {
						err = nil
					} else if err == nil {
						out.ok, out.value, out.rev = true, string(e.Value), e.Revision
					}
					if err != nil {
						cancel()
						continue // a read that failed did nothing
					}
				case 2:
					in.op = "create"
					out.rev, err = s.Create(opCtx, key, []byte(in.value))
					if errors.Is(err, kv.ErrExists) {
						out.exists, err = true, nil
					}
				case 3:
					in.op = "update"
					// Name the revision this client last saw, or one just
					// read (stale reads make some updates fail).
					if e, gerr := s.Get(key); gerr == nil {
						in.expected = e.Revision
					}
					out.rev, err = s.Update(opCtx, key, []byte(in.value), in.expected)
					var m *kv.RevisionMismatchError
					if errors.As(err, &m) {
						out.mismatch, out.rev, err = true, m.Current, nil
					}
				}
				cancel()
				if in.op != "get" {
					out.ok = err == nil && !out.exists && !out.mismatch
					out.unknown = err != nil
				}
				record(client, key, in, call, out)
			}
		})
	}

	time.Sleep(700 * time.Millisecond)
	lead := c.WaitLeader()
	c.Partition(lead) // the leader alone on one side: the others elect
	time.Sleep(1500 * time.Millisecond)
	c.Heal()
	time.Sleep(700 * time.Millisecond)
	close(stop)
	wg.Wait()

	oks := 0
	for _, op := range history {
		if o := op.Output.(kvOutput); o.ok || o.exists || o.mismatch {
			oks++
		}
	}
	if oks < 20 {
		t.Fatalf("only %d of %d operations completed: the history checks little", oks, len(history))
	}
	res := porcupine.CheckOperationsTimeout(kvModel.ToModel(), history, time.Minute)
	if res == porcupine.Illegal {
		t.Fatalf("the history of %d operations is not linearizable", len(history))
	}
	if res == porcupine.Unknown {
		t.Fatalf("porcupine could not decide on %d operations within its time", len(history))
	}
	t.Logf("%d operations (%d completed), %v", len(history), oks, res)
	sameEverywhere(t, ctx, kvs)
}
