package replog

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/replog-io/replog/protocol"
)

// waitLevel waits until every node of c runs at feature level want.
func waitLevel(t *testing.T, c *testCluster, want int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("feature level %d on every node", want), 15*time.Second, func() bool {
		for _, l := range c.nodes {
			if l.Status().FeatureLevel < want {
				return false
			}
		}
		return true
	})
}

// TestWithKeyRoundTrip (R102): an entry key given on any node, alone, with
// WithID or on a batch, is what every replica's reader sees as Entry.Key,
// and still after a restart; an entry appended without one reads with
// Key "".
func TestWithKeyRoundTrip(t *testing.T) {
	c := newCluster(t, 3, nil)
	leader := c.leader(15 * time.Second)
	waitLevel(t, c, protocol.FeatureLevelKeys)
	var follower string
	for id := range c.nodes {
		if id != leader {
			follower = id
		}
	}
	ctx, cancel := appendCtx(t)
	defer cancel()
	type want struct{ key, data string }
	var wants []want
	app := func(l *Log, data, key string, opts ...AppendOption) {
		t.Helper()
		if key != "" {
			opts = append(opts, WithKey(key))
		}
		if _, err := l.Append(ctx, []byte(data), opts...); err != nil {
			t.Fatalf("append %q key %q: %v", data, key, err)
		}
		wants = append(wants, want{key, data})
	}
	app(c.nodes[leader], "a1", "a")
	app(c.nodes[follower], "b1", "b")
	app(c.nodes[leader], "plain", "")
	app(c.nodes[follower], "a2", "a", WithID("order-1"))
	app(c.nodes[leader], "", "b") // a tombstone: a key and no data
	if _, err := c.nodes[follower].AppendBatch(ctx, [][]byte{[]byte("c1"), []byte("c2"), []byte("c3")}, WithKey("c")); err != nil {
		t.Fatal(err)
	}
	wants = append(wants, want{"c", "c1"}, want{"c", "c2"}, want{"c", "c3"})
	long := strings.Repeat("k", MaxKeyLength)
	app(c.nodes[follower], "long", long)

	check := func(when string) {
		t.Helper()
		for id, l := range c.nodes {
			got := readN(t, l, len(wants), 15*time.Second)
			for i, w := range wants {
				if got[i].Key != w.key || string(got[i].Data) != w.data {
					t.Fatalf("%s, %s: entry %d is key %q data %q; want key %q data %q", when, id, i, got[i].Key, got[i].Data, w.key, w.data)
				}
			}
		}
	}
	check("replicated")
	if err := c.nodes[follower].Close(); err != nil {
		t.Fatal(err)
	}
	delete(c.nodes, follower)
	c.restart(follower)
	check("after a restart")
}

// TestWithKeyLevelGate (R102): below feature level 10 a keyed append is
// refused with ErrFeatureLevelTooLow and nothing is appended, on the
// leader and forwarded from a follower; the same append without the key
// succeeds there (positive control), and one at level 10 succeeds with
// the key. An empty or too long key is ErrInvalidArgument.
func TestWithKeyLevelGate(t *testing.T) {
	c := newCluster(t, 3, func(_ string, o *Options) { o.MaxFeatureLevel = protocol.FeatureLevelKeys - 1 })
	leader := c.leader(15 * time.Second)
	waitLevel(t, c, protocol.FeatureLevelKeys-1)
	ctx, cancel := appendCtx(t)
	defer cancel()
	for id, l := range c.nodes {
		_, err := l.Append(ctx, []byte("v"), WithKey("k"))
		if !errors.Is(err, ErrFeatureLevelTooLow) {
			t.Fatalf("%s (leader %s): keyed append at level %d: %v; want ErrFeatureLevelTooLow", id, leader, l.Status().FeatureLevel, err)
		}
		if _, err := l.Append(ctx, []byte("v")); err != nil {
			t.Fatalf("%s: the same append without the key: %v", id, err)
		}
	}
	for _, e := range readN(t, c.nodes[leader], 3, 10*time.Second) {
		if e.Key != "" || string(e.Data) != "v" {
			t.Fatalf("entry %d: key %q data %q; want only the unkeyed appends", e.Offset, e.Key, e.Data)
		}
	}

	l := openSingle(t, Options{})
	waitFor(t, "level 10", 10*time.Second, func() bool { return l.Status().FeatureLevel >= protocol.FeatureLevelKeys })
	if _, err := l.Append(ctx, []byte("v"), WithKey("k")); err != nil {
		t.Fatalf("keyed append at level %d: %v", l.Status().FeatureLevel, err)
	}
	for _, k := range []string{"", strings.Repeat("k", MaxKeyLength+1)} {
		if _, err := l.Append(ctx, []byte("v"), WithKey(k)); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("key of %d bytes: %v; want ErrInvalidArgument", len(k), err)
		}
	}
}
