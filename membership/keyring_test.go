package membership

import (
	"context"
	"errors"
	"testing"
)

// TestGossipKeyRotation: a gossip key rotation in rolling order, (old),
// (old, extra new), (new, extra old), (new): a member joins one in the
// same or an adjacent step and both list each other; (old) and (new)
// share no key and cannot join.
func TestGossipKeyRotation(t *testing.T) {
	old := []byte("0123456789abcdef")
	next := []byte("fedcba9876543210fedcba9876543210")
	steps := []struct {
		name  string
		key   []byte
		extra [][]byte
	}{
		{"(old)", old, nil},
		{"(old,new)", old, [][]byte{next}},
		{"(new,old)", next, [][]byte{old}},
		{"(new)", next, nil},
	}
	for i := range steps {
		for _, j := range []int{i, i + 1} {
			if j == len(steps) {
				continue
			}
			t.Run(steps[i].name+"-"+steps[j].name, func(t *testing.T) {
				ca := fastConfig("a")
				ca.SecretKey, ca.ExtraKeys = steps[i].key, steps[i].extra
				a := start(t, ca)
				cb := fastConfig("b", a.GossipAddr())
				cb.SecretKey, cb.ExtraKeys = steps[j].key, steps[j].extra
				b := start(t, cb)
				waitFor(t, "a sees b", func() bool { return allAlive(a, "a", "b") })
				waitFor(t, "b sees a", func() bool { return allAlive(b, "a", "b") })
			})
		}
	}
	t.Run("(old)-(new)", func(t *testing.T) {
		ca := fastConfig("a")
		ca.SecretKey = old
		a := start(t, ca)
		cx := fastConfig("x")
		cx.SecretKey = next
		x := start(t, cx)
		if n, err := x.Join(context.Background(), []string{a.GossipAddr()}); !errors.Is(err, ErrJoin) || n != 0 {
			t.Fatalf("(new) joined (old): %d, %v", n, err)
		}
	})
}

// TestExtraKeysValidated: extra keys need SecretKey and AES key sizes;
// the caller's keys are not kept (the keyring has copies).
func TestExtraKeysValidated(t *testing.T) {
	c := fastConfig("a")
	c.ExtraKeys = [][]byte{make([]byte, 16)}
	var ce *ConfigError
	if err := c.Validate(); !errors.As(err, &ce) || ce.Field != "ExtraKeys" {
		t.Errorf("extra key without SecretKey: %v", err)
	}
	c.SecretKey = make([]byte, 16)
	c.ExtraKeys = [][]byte{make([]byte, 16), make([]byte, 20)}
	if err := c.Validate(); !errors.As(err, &ce) || ce.Field != "ExtraKeys[1]" {
		t.Errorf("20-byte extra key: %v", err)
	}
	key := []byte("0123456789abcdef")
	c.ExtraKeys = [][]byte{key}
	kr, err := c.keyring()
	if err != nil {
		t.Fatal(err)
	}
	key[0] = 'X'
	for _, k := range kr.GetKeys() {
		if k[0] == 'X' {
			t.Fatal("the keyring shares the caller's key")
		}
	}
	if p := kr.GetPrimaryKey(); string(p) != string(c.SecretKey) {
		t.Fatalf("primary key %x, want SecretKey", p)
	}
}
