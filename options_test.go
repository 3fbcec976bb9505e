package replog

import (
	"bytes"
	"crypto/tls"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestOptionsValidateNamesTheBadField(t *testing.T) {
	ok := Options{Dir: "/tmp/x"}
	cases := []struct {
		field string
		mut   func(*Options)
	}{
		{"Dir", func(o *Options) { o.Dir = "" }},
		{"NodeID", func(o *Options) { o.NodeID = "has space" }},
		{"NodeID", func(o *Options) { o.NodeID = strings.Repeat("a", 65) }},
		{"ClusterID", func(o *Options) { o.ClusterID = "a/b" }},
		{"Voters", func(o *Options) { o.Voters = []string{"a", "a"} }},
		{"Voters", func(o *Options) { o.Voters = []string{""} }},
		{"Peers", func(o *Options) { o.Peers = map[string]string{"n2": "no-port"} }},
		{"RPCAddr", func(o *Options) { o.RPCAddr = "127.0.0.1" }},
		{"GossipAddr", func(o *Options) { o.GossipAddr = "nope" }},
		{"Join", func(o *Options) { o.Join = []string{"127.0.0.1:1"} }},
		{"GossipKey", func(o *Options) { o.GossipKey = []byte("short") }},
		{"Peers", func(o *Options) { o.Voters = []string{"node1", "n2"} }},
		{"Peers", func(o *Options) { o.Voters = []string{"node1", "n2"}; o.Peers = map[string]string{"n3": "127.0.0.1:1"} }},
		{"AdvertiseRPCAddr", func(o *Options) {
			o.Voters = []string{"node1", "n2"}
			o.GossipAddr = "127.0.0.1:0"
			o.RPCAddr = ":7400"
		}},
		{"AdvertiseRPCAddr", func(o *Options) {
			o.Voters = []string{"node1", "n2"}
			o.GossipAddr = "127.0.0.1:0"
			o.RPCAddr = "0.0.0.0:7400"
		}},
		{"TLS", func(o *Options) { o.TLS = &tls.Config{} }},
		{"TLSVerifyNodeID", func(o *Options) { o.TLSVerifyNodeID = true }},
		{"FetchMaxWait", func(o *Options) { o.FetchMaxWait = -time.Second }},
		{"FetchTimeout", func(o *Options) { o.FetchTimeout = 100 * time.Millisecond }},
		{"FetchTimeout", func(o *Options) { o.FetchTimeout = 2*time.Second - time.Millisecond }}, // defaults' bound is 2s
		{"FetchTimeout", func(o *Options) { o.FetchTimeout = time.Second; o.FetchMaxWait = 100 * time.Millisecond }},
		{"ElectionTimeout", func(o *Options) { o.ElectionTimeout = -1 }},
		{"FetchMaxBytes", func(o *Options) { o.FetchMaxBytes = -1 }},
		{"MaxRecordSize", func(o *Options) { o.MaxRecordSize = 1 << 30 }},
	}
	if err := ok.Validate(); err != nil {
		t.Fatalf("minimal options invalid: %v", err)
	}
	for _, good := range []Options{
		{Dir: "/tmp/x", Voters: []string{"node1", "n2"}, Peers: map[string]string{"n2": "127.0.0.1:1"}, Secret: testSecret},
		{Dir: "/tmp/x", Voters: []string{"node1", "n2"}, GossipAddr: "127.0.0.1:0", Insecure: true},
		{Dir: "/tmp/x", Voters: []string{"node1", "n2"}, GossipAddr: "127.0.0.1:0", RPCAddr: ":7400", AdvertiseRPCAddr: "10.0.0.1:7400", Secret: testSecret},
	} {
		if err := good.Validate(); err != nil {
			t.Errorf("valid options %+v refused: %v", good, err)
		}
	}
	for _, tc := range cases {
		o := ok
		tc.mut(&o)
		err := o.Validate()
		if !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("%s: Validate() = %v, want ErrInvalidOptions", tc.field, err)
			continue
		}
		if !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: error %q does not name the field", tc.field, err)
		}
		if _, err := Open(o); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("%s: Open accepted invalid options: %v", tc.field, err)
		}
	}
}

func TestOptionsDefaultsDoNotTouchTheCallersStruct(t *testing.T) {
	o := Options{Dir: "/tmp/x", Voters: []string{"node1", "n2"}, Peers: map[string]string{"n2": "127.0.0.1:1"}}
	before := Options{Dir: "/tmp/x", Voters: []string{"node1", "n2"}, Peers: map[string]string{"n2": "127.0.0.1:1"}}
	d := o.withDefaults()
	if !reflect.DeepEqual(o, before) {
		t.Fatalf("withDefaults changed the caller's options: %+v", o)
	}
	d.Voters[0] = "changed"
	d.Peers["n2"] = "changed"
	if o.Voters[0] != "node1" || o.Peers["n2"] != "127.0.0.1:1" {
		t.Fatal("defaulted options share slices or maps with the caller's")
	}
	if d.NodeID != DefaultNodeID || d.FetchMaxWait != DefaultFetchMaxWait || d.FetchTimeout != DefaultFetchTimeout ||
		d.RPCAddr != DefaultRPCAddr || d.GossipLabel != DefaultClusterID {
		t.Fatalf("defaults not applied: %+v", d)
	}
	single := Options{Dir: "/tmp/x"}.withDefaults()
	if single.needsTransport() || single.RPCAddr != "" {
		t.Fatalf("a lone node should need no transport: %+v", single)
	}
}

// testSecret is the cluster secret of the tests' clusters.
var testSecret = []byte("replog test secret, 32 bytes!!!!")

// A networked node must authenticate its peers (Secret or mutual TLS) or
// say Insecure; the refusal names the fields to set. Each refused case has
// its accepted twin (the positive control).
func TestOptionsValidateRequiresAuthenticationWhenNetworked(t *testing.T) {
	mtls := &tls.Config{Certificates: []tls.Certificate{{}}, ClientAuth: tls.RequireAndVerifyClientCert}
	oneWayTLS := &tls.Config{Certificates: []tls.Certificate{{}}, ClientAuth: tls.VerifyClientCertIfGiven}
	peers := map[string]string{"n2": "127.0.0.1:1"}
	cluster := func(mut func(o *Options)) Options {
		o := Options{Dir: "/tmp/x", Voters: []string{"node1", "n2"}, Peers: peers}
		mut(&o)
		return o
	}
	cases := []struct {
		name   string
		opts   Options
		fields []string // empty: valid
	}{
		{"single node, nothing set", Options{Dir: "/tmp/x"}, nil},
		{"single node with a secret", Options{Dir: "/tmp/x", Secret: testSecret}, nil},
		{"two voters, no auth", cluster(func(o *Options) {}), []string{"Secret", "Insecure"}},
		{"two voters, Secret", cluster(func(o *Options) { o.Secret = testSecret }), nil},
		{"two voters, Insecure", cluster(func(o *Options) { o.Insecure = true }), nil},
		{"two voters, mutual TLS", cluster(func(o *Options) { o.TLS = mtls }), nil},
		{"two voters, TLS without client certificates", cluster(func(o *Options) { o.TLS = oneWayTLS }), []string{"Secret", "Insecure"}},
		{"observer of one remote voter, no auth", Options{Dir: "/tmp/x", Voters: []string{"n2"}, Peers: peers}, []string{"Secret"}},
		{"single voter with Peers, no auth", Options{Dir: "/tmp/x", Peers: peers}, []string{"Secret"}},
		{"single voter with Peers, Secret", Options{Dir: "/tmp/x", Peers: peers, Secret: testSecret}, nil},
		{"single voter listening on RPCAddr, no auth", Options{Dir: "/tmp/x", RPCAddr: "127.0.0.1:0"}, []string{"Secret"}},
		{"single voter with gossip, no auth", Options{Dir: "/tmp/x", GossipAddr: "127.0.0.1:0"}, []string{"Secret"}},
		{"single voter with gossip, Secret", Options{Dir: "/tmp/x", GossipAddr: "127.0.0.1:0", Secret: testSecret}, nil},
		{"short secret", cluster(func(o *Options) { o.Secret = testSecret[:MinSecretLen-1] }), []string{"Secret", "16"}},
		{"shortest secret", cluster(func(o *Options) { o.Secret = testSecret[:MinSecretLen] }), nil},
		{"short secret on a single node", Options{Dir: "/tmp/x", Secret: []byte("x")}, []string{"Secret"}},
		{"Secret and Insecure", cluster(func(o *Options) { o.Secret, o.Insecure = testSecret, true }), []string{"Insecure", "Secret"}},
		{"mutual TLS and gossip without a key", cluster(func(o *Options) { o.TLS, o.GossipAddr = mtls, "127.0.0.1:0" }), []string{"GossipKey"}},
		{"mutual TLS and gossip with a key", cluster(func(o *Options) {
			o.TLS, o.GossipAddr, o.GossipKey = mtls, "127.0.0.1:0", testSecret[:16]
		}), nil},
		{"mutual TLS, Secret and gossip", cluster(func(o *Options) { o.TLS, o.GossipAddr, o.Secret = mtls, "127.0.0.1:0", testSecret }), nil},
	}
	for _, tc := range cases {
		err := tc.opts.Validate()
		if len(tc.fields) == 0 {
			if err != nil {
				t.Errorf("%s: refused: %v", tc.name, err)
			}
			continue
		}
		if !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("%s: Validate() = %v, want ErrInvalidOptions", tc.name, err)
			continue
		}
		for _, f := range tc.fields {
			if !strings.Contains(err.Error(), f) {
				t.Errorf("%s: error %q does not name %s", tc.name, err, f)
			}
		}
		if _, err := Open(tc.opts); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("%s: Open accepted it: %v", tc.name, err)
		}
	}
}

// The default gossip key is derived from the secret (32 bytes, AES-256),
// is not the secret itself, and an explicit GossipKey wins. Defaults copy
// the caller's Secret.
func TestOptionsGossipKeyDerivedFromSecret(t *testing.T) {
	o := Options{Dir: "/tmp/x", Secret: append([]byte(nil), testSecret...)}
	d := o.withDefaults()
	if len(d.GossipKey) != 32 || bytes.Equal(d.GossipKey, testSecret) {
		t.Fatalf("derived gossip key %x: want 32 bytes, not the secret", d.GossipKey)
	}
	if again := o.withDefaults(); !bytes.Equal(again.GossipKey, d.GossipKey) {
		t.Fatal("derived gossip key differs between two calls")
	}
	other := Options{Dir: "/tmp/x", Secret: []byte("another secret of 32 bytes......")}.withDefaults()
	if bytes.Equal(other.GossipKey, d.GossipKey) {
		t.Fatal("two secrets derive the same gossip key")
	}
	d.Secret[0] ^= 0xff
	if o.Secret[0] != testSecret[0] {
		t.Fatal("defaulted options share Secret with the caller's")
	}
	explicit := Options{Dir: "/tmp/x", Secret: testSecret, GossipKey: testSecret[:16]}.withDefaults()
	if !bytes.Equal(explicit.GossipKey, testSecret[:16]) {
		t.Fatalf("explicit GossipKey replaced: %x", explicit.GossipKey)
	}
	if none := (Options{Dir: "/tmp/x"}).withDefaults(); len(none.GossipKey) != 0 {
		t.Fatalf("gossip key without a secret: %x", none.GossipKey)
	}
}
