package replog

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"testing"
	"time"
)

// testCA is a throwaway certificate authority for TLS tests.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool}
}

// config returns a mutual-TLS config for node id signed by ca, trusting
// trust.
func (ca *testCA) config(t *testing.T, id string, trust *x509.CertPool) *tls.Config {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: id},
		DNSNames:     []string{id, "localhost"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}},
		RootCAs:      trust,
		ClientCAs:    trust,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		MinVersion:   tls.VersionTLS13,
	}
}

func TestTLSClusterAndUntrustedNode(t *testing.T) {
	ca := newTestCA(t, "replog test CA")
	c := newCluster(t, 3, func(id string, o *Options) {
		if o.TLS == nil {
			o.TLS = ca.config(t, id, ca.pool)
		}
	})
	lead := c.leader(15 * time.Second)
	ctx, cancel := appendCtx(t)
	defer cancel()
	for i := range 5 {
		if _, err := c.nodes[lead].Append(ctx, []byte{byte('a' + i)}); err != nil {
			t.Fatalf("append over TLS: %v", err)
		}
	}
	for id, l := range c.nodes {
		got := readN(t, l, 5, 20*time.Second)
		if string(got[4].Data) != "e" {
			t.Fatalf("%s read %q at 4", id, got[4].Data)
		}
	}

	// An observer whose certificate comes from another CA: the cluster's
	// nodes must refuse it, so it never fetches anything.
	rogue := newTestCA(t, "rogue CA")
	peers := map[string]string{}
	for id, l := range c.nodes {
		peers[id] = l.Status().RPCAddr
	}
	o := Options{
		Dir: t.TempDir(), NodeID: "rogue", ClusterID: "test", Voters: c.opts["n1"].Voters,
		Peers: peers, TLS: rogue.config(t, "rogue", ca.pool),
		FetchMaxWait: 100 * time.Millisecond, FetchTimeout: time.Second, NoSync: true,
	}
	r, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	time.Sleep(2 * time.Second)
	if st := r.Status(); st.LEO != 0 || st.HighWatermark != 0 {
		t.Fatalf("an untrusted node fetched from the TLS cluster: %+v", st)
	}
}
