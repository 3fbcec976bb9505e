package transport

import (
	"errors"
	"fmt"
	"testing"

	"github.com/replog-io/replog/protocol"
)

// TestSecretRotationRollingOrder: a rotation from secret old to secret
// new in rolling restarts goes through (old), (old, next new), (new, next
// old), (new). Nodes in the same or adjacent steps talk both ways (each
// proves its Secret, which the other holds as Secret or NextSecret);
// (old) and (new) share nothing and refuse each other both ways. Then
// (old) and (new, old): the dialer proving old is let in, the one
// proving new is refused, as NextSecret is accepted, never proven.
func TestSecretRotationRollingOrder(t *testing.T) {
	old, next := testSecret, otherSecret
	steps := []struct {
		name          string
		secret, extra []byte
	}{
		{"(old)", old, nil},
		{"(old,new)", old, next},
		{"(new,old)", next, old},
		{"(new)", next, nil},
	}
	// talks reports whether a message from a reaches b, and b's count of
	// refused handshakes otherwise.
	talks := func(t *testing.T, i, j int) (aToB, bToA bool) {
		res := newResolverMap()
		a := newTestTCP(t, fastRetry(TCPConfig{NodeID: "a", ClusterID: "c", Resolver: res.resolve, Secret: steps[i].secret, NextSecret: steps[i].extra}))
		b := newTestTCP(t, fastRetry(TCPConfig{NodeID: "b", ClusterID: "c", Resolver: res.resolve, Secret: steps[j].secret, NextSecret: steps[j].extra}))
		res.set("a", a.Addr())
		res.set("b", b.Addr())
		one := func(from, to *TCP, toID string) bool {
			before := to.Stats().Unauthenticated
			var delivered bool
			eventually(t, fmt.Sprintf("%s to %s delivered or refused", from.cfg.NodeID, toID), func() bool {
				_ = from.Send(protocol.Message{To: toID, Body: &protocol.BeginEpoch{Epoch: 1, LeaderID: from.cfg.NodeID}})
				select {
				case m := <-to.Receive():
					delivered = m.From == from.cfg.NodeID
					return true
				default:
				}
				return to.Stats().Unauthenticated > before
			})
			return delivered
		}
		return one(a, b, "b"), one(b, a, "a")
	}
	for i := range steps {
		for j := i; j < len(steps); j++ {
			t.Run(steps[i].name+"-"+steps[j].name, func(t *testing.T) {
				ab, ba := talks(t, i, j)
				switch {
				case j-i <= 1:
					if !ab || !ba {
						t.Errorf("adjacent steps: %s to %s %v, back %v; want both", steps[i].name, steps[j].name, ab, ba)
					}
				case i == 0 && j == 3:
					if ab || ba {
						t.Errorf("(old) and (new) talk (%v, %v): nothing is shared", ab, ba)
					}
				case i == 0 && j == 2:
					if !ab || ba {
						t.Errorf("(old) to (new,old) %v, back %v; want only the dialer proving old let in", ab, ba)
					}
				}
			})
		}
	}
}

// TestNextSecretValidated: NextSecret is held to Secret's minimum length,
// and needs Secret.
func TestNextSecretValidated(t *testing.T) {
	base := TCPConfig{NodeID: "a", ListenAddr: "127.0.0.1:0", Resolver: newResolverMap().resolve}
	short := base
	short.Secret, short.NextSecret = testSecret, []byte("short")
	alone := base
	alone.NextSecret = testSecret
	for _, c := range []TCPConfig{short, alone} {
		var ce *ConfigError
		if err := c.Validate(); err == nil || !errors.As(err, &ce) || ce.Field != "NextSecret" {
			t.Errorf("Validate = %v, want a ConfigError naming NextSecret", err)
		}
	}
	ok := base
	ok.Secret, ok.NextSecret = testSecret, otherSecret
	if err := ok.Validate(); err != nil {
		t.Errorf("Secret and NextSecret: %v", err)
	}
}
