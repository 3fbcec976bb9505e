package transport

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net"
	"sync/atomic"
	"testing"
	"time"

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

// rotCA is a CA for TestTLSRotation, whose certificate can go into pools
// of several CAs.
type rotCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newRotCA(t *testing.T, name string) *rotCA {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &rotCA{cert: cert, key: key}
}

func (ca *rotCA) issue(t *testing.T, name string) *tls.Certificate {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		DNSNames: []string{name, "localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func poolOf(cas ...*rotCA) *x509.CertPool {
	p := x509.NewCertPool()
	for _, ca := range cas {
		p.AddCert(ca.cert)
	}
	return p
}

// TestTLSRotation: a CA rotation with mutual TLS. Nodes that trust both
// the old and the new CA talk whichever issued their certificates; nodes
// that trust only the CA of their own certificate do not (the control).
// A node whose certificate comes from GetCertificate and
// GetClientCertificate (read per handshake, e.g. from files an agent
// renews) moves to a new certificate without a restart: refused by a peer
// that trusts only the new CA while it presents the old one, then let in
// both ways once the callback returns the new one.
func TestTLSRotation(t *testing.T) {
	oldCA, newCA := newRotCA(t, "old CA"), newRotCA(t, "new CA")
	mtls := func(cert *tls.Certificate, trust *x509.CertPool) *tls.Config {
		return &tls.Config{Certificates: []tls.Certificate{*cert}, RootCAs: trust, ClientCAs: trust,
			ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS13}
	}
	// delivered sends from a to b until b receives it.
	delivered := func(t *testing.T, a, b *TCP) {
		t.Helper()
		eventually(t, a.cfg.NodeID+" to "+b.cfg.NodeID, func() bool {
			mustSend(t, a, protocol.Message{To: b.cfg.NodeID, Body: &protocol.BeginEpoch{Epoch: 1, LeaderID: a.cfg.NodeID}})
			select {
			case m := <-b.Receive():
				return m.From == a.cfg.NodeID
			case <-time.After(50 * time.Millisecond):
				return false
			}
		})
	}
	// refused sends from a to b until b has refused a connection, then
	// checks that nothing was delivered.
	refused := func(t *testing.T, a, b *TCP) {
		t.Helper()
		before := b.Stats().BadConns
		eventually(t, b.cfg.NodeID+" refuses "+a.cfg.NodeID, func() bool {
			mustSend(t, a, protocol.Message{To: b.cfg.NodeID, Body: &protocol.BeginEpoch{Epoch: 1, LeaderID: a.cfg.NodeID}})
			return b.Stats().BadConns > before
		})
		expectNothing(t, b)
	}
	t.Run("both CAs trusted", func(t *testing.T) {
		res := newResolverMap()
		both := poolOf(oldCA, newCA)
		a := newTestTCP(t, fastRetry(TCPConfig{NodeID: "a", ClusterID: "c", Resolver: res.resolve, TLS: mtls(oldCA.issue(t, "a"), both)}))
		b := newTestTCP(t, fastRetry(TCPConfig{NodeID: "b", ClusterID: "c", Resolver: res.resolve, TLS: mtls(newCA.issue(t, "b"), both)}))
		res.set("a", a.Addr())
		res.set("b", b.Addr())
		delivered(t, a, b)
		delivered(t, b, a)
	})
	t.Run("own CA only", func(t *testing.T) {
		res := newResolverMap()
		a := newTestTCP(t, fastRetry(TCPConfig{NodeID: "a", ClusterID: "c", Resolver: res.resolve, TLS: mtls(oldCA.issue(t, "a"), poolOf(oldCA)), HandshakeTimeout: time.Second}))
		b := newTestTCP(t, fastRetry(TCPConfig{NodeID: "b", ClusterID: "c", Resolver: res.resolve, TLS: mtls(newCA.issue(t, "b"), poolOf(newCA)), HandshakeTimeout: time.Second}))
		res.set("a", a.Addr())
		res.set("b", b.Addr())
		refused(t, a, b)
		refused(t, b, a)
	})
	t.Run("certificate reloaded per handshake", func(t *testing.T) {
		res := newResolverMap()
		var cur atomic.Pointer[tls.Certificate]
		cur.Store(oldCA.issue(t, "a"))
		cfgA := &tls.Config{
			GetCertificate:       func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return cur.Load(), nil },
			GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cur.Load(), nil },
			RootCAs:              poolOf(oldCA, newCA), ClientCAs: poolOf(oldCA, newCA),
			ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS13,
		}
		a := newTestTCP(t, fastRetry(TCPConfig{NodeID: "a", ClusterID: "c", Resolver: res.resolve, TLS: cfgA, HandshakeTimeout: time.Second}))
		b := newTestTCP(t, fastRetry(TCPConfig{NodeID: "b", ClusterID: "c", Resolver: res.resolve, TLS: mtls(newCA.issue(t, "b"), poolOf(newCA)), HandshakeTimeout: time.Second}))
		res.set("a", a.Addr())
		res.set("b", b.Addr())
		refused(t, a, b)
		cur.Store(newCA.issue(t, "a"))
		delivered(t, a, b)
		delivered(t, b, a)
	})
}
