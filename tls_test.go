package replog

import (
	"testing"
	"time"

	"github.com/replog-io/replog/internal/testpki"
)

// Mutual TLS alone authenticates a cluster (no Secret; gossip keyed by
// GossipKey): its nodes replicate, and a node whose certificate another CA
// signed is refused while one from the cluster's CA is admitted.
func TestTLSClusterAndUntrustedNode(t *testing.T) {
	ca := testpki.New(t, "replog test CA")
	ot := newOutsiderTest(t, func(id string, o *Options) {
		o.TLS = ca.MutualTLS(t, id, ca.Pool)
		o.Secret, o.GossipKey = nil, testGossipKey
	})
	for id, l := range ot.c.nodes {
		if got := readN(t, l, 1, 20*time.Second); string(got[0].Data) != "ours" {
			t.Fatalf("%s read %q over TLS", id, got[0].Data)
		}
	}
	rogue := testpki.New(t, "rogue CA")
	ot.refusedThenAdmitted(t,
		func(o *Options) { o.TLS = rogue.MutualTLS(t, "outsider", ca.Pool) },
		func(o *Options) { o.TLS = ca.MutualTLS(t, "outsider", ca.Pool) })
}

// testGossipKey keys gossip in the clusters secured by mutual TLS alone.
var testGossipKey = []byte("gossip key 16 B.")

// With TLSVerifyNodeID a certificate from the cluster's own CA that names
// another node cannot be used to join under a made-up node ID.
func TestTLSVerifyNodeIDRefusesBorrowedCertificates(t *testing.T) {
	ca := testpki.New(t, "replog test CA")
	ot := newOutsiderTest(t, func(id string, o *Options) {
		o.TLS = ca.MutualTLS(t, id, ca.Pool)
		o.TLSVerifyNodeID = true
		o.Secret, o.GossipKey = nil, testGossipKey
	})
	ot.refusedThenAdmitted(t,
		func(o *Options) {
			o.TLS = ca.MutualTLS(t, "someone-else", ca.Pool)
			o.TLSVerifyNodeID = true
		},
		func(o *Options) {
			o.TLS = ca.MutualTLS(t, "outsider", ca.Pool)
			o.TLSVerifyNodeID = true
		})
}
