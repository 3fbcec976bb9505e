package replog

import (
	"testing"
	"time"

	"github.com/replog-io/replog/internal/testpki"
)

func TestTLSClusterAndUntrustedNode(t *testing.T) {
	ca := testpki.New(t, "replog test CA")
	c := newCluster(t, 3, func(id string, o *Options) {
		if o.TLS == nil {
			o.TLS = ca.MutualTLS(t, id, ca.Pool)
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
	rogue := testpki.New(t, "rogue CA")
	peers := map[string]string{}
	for id, l := range c.nodes {
		peers[id] = l.Status().RPCAddr
	}
	o := Options{
		Dir: t.TempDir(), NodeID: "rogue", ClusterID: "test", Voters: c.opts["n1"].Voters,
		Peers: peers, TLS: rogue.MutualTLS(t, "rogue", ca.Pool),
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
