package replog

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestSecretRotationRolling: a three-node cluster (gossip on, secret A)
// rotates to secret B in three rolling restarts, one node at a time:
// NextSecret B added; then Secret B with NextSecret A; then B alone. After
// every restart the cluster elects, takes an append, and every node, the
// restarted one included, reads every entry so far: the transport and the
// gossip keyring of nodes in adjacent steps accept each other.
func TestSecretRotationRolling(t *testing.T) {
	a := testSecret
	b := []byte("the next cluster secret, 32 B...")
	c := newCluster(t, 3, nil)
	n := 0
	appendAll := func(step string) {
		t.Helper()
		lead := c.leader(20 * time.Second)
		ctx, cancel := appendCtx(t)
		defer cancel()
		if _, err := c.nodes[lead].Append(ctx, fmt.Appendf(nil, "e%d", n)); err != nil {
			t.Fatalf("%s: append: %v", step, err)
		}
		n++
		for id, l := range c.nodes {
			if got := readN(t, l, n, 20*time.Second); len(got) != n || string(got[n-1].Data) != fmt.Sprintf("e%d", n-1) {
				t.Fatalf("%s: %s read %d entries, want %d ending e%d", step, id, len(got), n, n-1)
			}
		}
	}
	appendAll("secret A")
	for _, step := range []struct {
		name         string
		secret, next []byte
	}{{"(A, next B)", a, b}, {"(B, next A)", b, a}, {"(B)", b, nil}} {
		for _, id := range []string{"n1", "n2", "n3"} {
			if err := c.nodes[id].Close(); err != nil {
				t.Fatal(err)
			}
			delete(c.nodes, id)
			o := c.opts[id]
			o.Secret, o.NextSecret = step.secret, step.next
			c.start(id, o)
			appendAll(id + " on " + step.name)
		}
	}
}

// Options.NextSecret reaches the transport, and the gossip key derived
// from it reaches membership as an extra key beside GossipKey (derived
// from Secret or explicit). Defaults copy it; Validate names it.
func TestOptionsNextSecret(t *testing.T) {
	next := []byte("the next cluster secret, 32 B...")
	o := Options{Dir: "/tmp/x", Secret: append([]byte(nil), testSecret...), NextSecret: append([]byte(nil), next...)}
	d := o.withDefaults()
	o.NextSecret[0] ^= 0xff
	if !bytes.Equal(d.NextSecret, next) {
		t.Fatal("defaulted options share NextSecret with the caller's")
	}
	c := d.components(nil)
	if !bytes.Equal(c.transport.NextSecret, next) || !bytes.Equal(c.transport.Secret, testSecret) {
		t.Fatalf("transport secrets %q, %q", c.transport.Secret, c.transport.NextSecret)
	}
	if len(c.membership.ExtraKeys) != 1 || !bytes.Equal(c.membership.ExtraKeys[0], deriveGossipKey(next)) ||
		!bytes.Equal(c.membership.SecretKey, deriveGossipKey(testSecret)) {
		t.Fatalf("gossip keys: primary %x, extra %x", c.membership.SecretKey, c.membership.ExtraKeys)
	}
	explicit := Options{Dir: "/tmp/x", Secret: testSecret, NextSecret: next, GossipKey: testSecret[:16]}.withDefaults().components(nil)
	if !bytes.Equal(explicit.membership.SecretKey, testSecret[:16]) || len(explicit.membership.ExtraKeys) != 1 {
		t.Fatalf("explicit GossipKey: primary %x, extra %x", explicit.membership.SecretKey, explicit.membership.ExtraKeys)
	}
	if none := (Options{Dir: "/tmp/x", Secret: testSecret}).withDefaults().components(nil); len(none.membership.ExtraKeys) != 0 || none.transport.NextSecret != nil {
		t.Fatalf("without NextSecret: %x, %x", none.membership.ExtraKeys, none.transport.NextSecret)
	}
	for _, bad := range []Options{
		{Dir: "/tmp/x", Secret: testSecret, NextSecret: []byte("short")},
		{Dir: "/tmp/x", Voters: []string{"node1", "n2"}, Peers: map[string]string{"n2": "127.0.0.1:1"}, Insecure: true, NextSecret: next},
	} {
		if err := bad.Validate(); !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), "NextSecret") {
			t.Errorf("Validate(%+v) = %v, want ErrInvalidOptions naming NextSecret", bad.NextSecret, err)
		}
	}
}
