package replog

import (
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
		{"ElectionTimeout", func(o *Options) { o.ElectionTimeout = -1 }},
		{"FetchMaxBytes", func(o *Options) { o.FetchMaxBytes = -1 }},
		{"MaxRecordSize", func(o *Options) { o.MaxRecordSize = 1 << 30 }},
	}
	if err := ok.Validate(); err != nil {
		t.Fatalf("minimal options invalid: %v", err)
	}
	for _, good := range []Options{
		{Dir: "/tmp/x", Voters: []string{"node1", "n2"}, Peers: map[string]string{"n2": "127.0.0.1:1"}},
		{Dir: "/tmp/x", Voters: []string{"node1", "n2"}, GossipAddr: "127.0.0.1:0"},
		{Dir: "/tmp/x", Voters: []string{"node1", "n2"}, GossipAddr: "127.0.0.1:0", RPCAddr: ":7400", AdvertiseRPCAddr: "10.0.0.1:7400"},
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
