package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"github.com/replog-io/replog"
	"github.com/replog-io/replog/kv"
)

// kvResult is what the KV mode measured: one load per operation.
type kvResult struct {
	put, get, getLin loadResult
}

// runKV measures package kv on the leader's log with c.kvClients clients,
// each for c.duration: Put (through the KV on the leader: an append, then
// its apply on the leader), Get (local: the leader's state, committed,
// maybe stale on a follower), and GetLinearizable (a read barrier
// first). Keys are c.kvKeys at random, values c.size bytes; before the
// reads every key is set.
func runKV(c config, leader *replog.Log, w io.Writer) (*kvResult, error) {
	for leader.Status().FeatureLevel < replog.FeatureLevelKeys {
		time.Sleep(20 * time.Millisecond) // the KV's keyed entries need level 10
	}
	ctx, cancel := context.WithTimeout(context.Background(), catchupTimeout)
	defer cancel()
	store, err := kv.Open(ctx, leader, kv.Options{})
	if err != nil {
		return nil, err
	}
	defer store.Close()
	value := make([]byte, c.size)
	for i := range value {
		value[i] = byte('a' + i%26)
	}
	key := func(rng *rand.Rand) string { return fmt.Sprintf("key-%d", rng.IntN(c.kvKeys)) }
	r := &kvResult{}
	r.put = kvLoad(c, func(ctx context.Context, rng *rand.Rand) error {
		_, err := store.Put(ctx, key(rng), value)
		return err
	})
	printOps(w, "kv put", c.kvClients, r.put)
	for i := range c.kvKeys {
		k := fmt.Sprintf("key-%d", i)
		if _, err := store.Get(k); errors.Is(err, kv.ErrNotFound) {
			if _, err := store.Put(ctx, k, value); err != nil {
				return nil, fmt.Errorf("setting %s: %w", k, err)
			}
		}
	}
	r.get = kvLoad(c, func(_ context.Context, rng *rand.Rand) error {
		_, err := store.Get(key(rng))
		return err
	})
	printOps(w, "kv get", c.kvClients, r.get)
	r.getLin = kvLoad(c, func(ctx context.Context, rng *rand.Rand) error {
		_, err := store.GetLinearizable(ctx, key(rng))
		return err
	})
	printOps(w, "kv get-linearizable", c.kvClients, r.getLin)
	if len(r.put.lat) == 0 || len(r.getLin.lat) == 0 {
		return r, fmt.Errorf("no KV operation completed (put failed %d, linearizable get failed %d)", r.put.failed, r.getLin.failed)
	}
	st := store.Stats()
	fmt.Fprintf(w, "kv stats keys=%d applied=%d snapshots=%d snapshot-errors=%d next=%d\n", st.Keys, st.Applied, st.Snapshots, st.SnapshotErrors, st.Next)
	return r, nil
}

// kvLoad runs c.kvClients clients calling op one after another for
// c.duration, each with a random source of its own.
func kvLoad(c config, op func(context.Context, *rand.Rand) error) loadResult {
	ctx, cancel := context.WithTimeout(context.Background(), c.duration)
	defer cancel()
	return runClients(ctx, c.kvClients, func(i int) ([]time.Duration, int) {
		rng := rand.New(rand.NewPCG(uint64(i), 7))
		return timeOps(ctx, func(int) error { return op(ctx, rng) })
	})
}

// printOps writes one operation's line: its rate and latencies.
func printOps(w io.Writer, name string, clients int, r loadResult) {
	fmt.Fprintf(w, "%s clients=%d ops=%d failed=%d ops/s=%.0f p50=%v p99=%v max=%v over %v\n", name, clients, len(r.lat), r.failed, r.opsPerSec(),
		fine(r.pct(0.50)), fine(r.pct(0.99)), fine(r.max()), r.elapsed.Round(time.Millisecond))
}

// fine rounds d for printing: to 10ns below 10µs (a local Get takes
// about a microsecond), to the microsecond above.
func fine(d time.Duration) time.Duration {
	if d < 10*time.Microsecond {
		return d.Round(10 * time.Nanosecond)
	}
	return d.Round(time.Microsecond)
}
