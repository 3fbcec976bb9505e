package replog

import (
	"bytes"
	"crypto/tls"
	"errors"
	"math"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/replog-io/replog/membership"
	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/replica"
	"github.com/replog-io/replog/storage"
	"github.com/replog-io/replog/transport"
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
		{"TLS", func(o *Options) {
			o.TLS = &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert,
				GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return nil, nil }}
		}},
		{"TLSVerifyNodeID", func(o *Options) { o.TLSVerifyNodeID = true }},
		{"FetchMaxWait", func(o *Options) { o.FetchMaxWait = -time.Second }},
		{"FetchTimeout", func(o *Options) { o.FetchTimeout = 100 * time.Millisecond }},
		// The defaults' bound is 700ms; with FetchMaxWait 100ms it is 600ms.
		{"FetchTimeout", func(o *Options) { o.FetchTimeout = 700*time.Millisecond - time.Millisecond }},
		{"FetchTimeout", func(o *Options) { o.FetchTimeout = 500 * time.Millisecond; o.FetchMaxWait = 100 * time.Millisecond }},
		{"ElectionTimeout", func(o *Options) { o.ElectionTimeout = -1 }},
		{"FetchMaxBytes", func(o *Options) { o.FetchMaxBytes = -1 }},
		{"MaxRecordSize", func(o *Options) { o.MaxRecordSize = 1 << 30 }},
		{"MaxRecordSize", func(o *Options) { o.MaxRecordSize = maxRecordSize + 1 }},
		{"FetchMaxBytes", func(o *Options) { o.FetchMaxBytes = maxConfiguredSize + 1 }},
		// Checked by the components' Validate (see the next test).
		{"GossipAddr", func(o *Options) { o.GossipAddr = "localhost:7946"; o.Insecure = true }},
		{"AdvertiseRPCAddr", func(o *Options) { o.AdvertiseRPCAddr = "no-port" }},
		{"GossipLabel", func(o *Options) { o.GossipLabel = strings.Repeat("l", 256) }},
		{"GossipTuning.ProbeTimeout", func(o *Options) {
			o.GossipTuning = membership.Tuning{ProbeInterval: time.Second, ProbeTimeout: 2 * time.Second}
		}},
		{"GossipTuning.SuspicionMult", func(o *Options) { o.GossipTuning.SuspicionMult = -1 }},
		{"Secret", func(o *Options) { o.Secret = []byte("short") }},
		{"Compaction.MinDirtyRatio", func(o *Options) { o.Compaction.MinDirtyRatio = 1.5 }},
		{"Compaction.MinDirtyRatio", func(o *Options) { o.Compaction.MinDirtyRatio = math.NaN() }},
	}
	if err := ok.Validate(); err != nil {
		t.Fatalf("minimal options invalid: %v", err)
	}
	for _, good := range []Options{
		{Dir: "/tmp/x", Voters: []string{"node1", "n2"}, Peers: map[string]string{"n2": "127.0.0.1:1"}, Secret: testSecret},
		{Dir: "/tmp/x", FetchMaxBytes: maxConfiguredSize, MaxRecordSize: maxRecordSize, GossipTuning: membership.FastForTests()},
		{Dir: "/tmp/x", Voters: []string{"node1", "n2"}, GossipAddr: "127.0.0.1:0", Insecure: true},
		{Dir: "/tmp/x", Compaction: Compaction{Enabled: true, MinDirtyRatio: 1}},
		{Dir: "/tmp/x", Compaction: Compaction{Enabled: true, MinDirtyRatio: -1}},
		{Dir: "/tmp/x", Voters: []string{"node1", "n2"}, GossipAddr: "127.0.0.1:0", RPCAddr: ":7400", AdvertiseRPCAddr: "10.0.0.1:7400", Secret: testSecret},
		// Certificates from callbacks, both ways (the positive control of the GetCertificate-only case).
		{Dir: "/tmp/x", Secret: testSecret, TLS: &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert,
			GetCertificate:       func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return nil, nil },
			GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return nil, nil }}},
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
		d.RPCAddr != DefaultRPCAddr {
		t.Fatalf("defaults not applied: %+v", d)
	}
	single := Options{Dir: "/tmp/x"}.withDefaults()
	if single.needsTransport() || single.RPCAddr != "" {
		t.Fatalf("a lone node should need no transport: %+v", single)
	}
}

// Errors about what a component owns name the Options field first, the
// component's field after it, and wrap both sentinels and the component's
// typed error.
func TestOptionsValidateDelegatesToComponents(t *testing.T) {
	cases := []struct {
		name      string
		opts      Options
		field     string // Options field
		component string // the component's field, as named in parentheses; its package says which typed error is wrapped
	}{
		{"RPCAddr", Options{Dir: "/tmp/x", RPCAddr: "127.0.0.1", Insecure: true}, "RPCAddr", "transport.TCPConfig.ListenAddr"},
		{"Secret", Options{Dir: "/tmp/x", Secret: []byte("short")}, "Secret", "transport.TCPConfig.Secret"},
		{"GossipAddr", Options{Dir: "/tmp/x", GossipAddr: "nope", Insecure: true}, "GossipAddr", "membership.Config.BindAddr"},
		{"GossipKey", Options{Dir: "/tmp/x", GossipKey: []byte("short")}, "GossipKey", "membership.Config.SecretKey"},
		{"AdvertiseRPCAddr", Options{Dir: "/tmp/x", AdvertiseRPCAddr: "no-port"}, "AdvertiseRPCAddr", "membership.Config.RPCAddr"},
		{"GossipTuning", Options{Dir: "/tmp/x", GossipTuning: membership.Tuning{TCPTimeout: -1}}, "GossipTuning.TCPTimeout", "membership.Config.Tuning.TCPTimeout"},
		{"FetchTimeout", Options{Dir: "/tmp/x", FetchTimeout: 500 * time.Millisecond}, "FetchTimeout", "replica.Config.FetchTimeout"},
		{"FetchMaxWait", Options{Dir: "/tmp/x", FetchMaxWait: 1 << 62}, "FetchMaxWait", "replica.Config.FetchMaxWait"},
		{"ElectionTimeout", Options{Dir: "/tmp/x", ElectionTimeout: -1}, "ElectionTimeout", "replica.Config.ElectionTimeout"},
		{"MaxFeatureLevel", Options{Dir: "/tmp/x", MaxFeatureLevel: 5}, "MaxFeatureLevel", "replica.Config.MaxFeatureLevel"},
		{"gossip metadata too large", Options{Dir: "/tmp/x", AdvertiseRPCAddr: strings.Repeat("h", 600) + ":1"},
			"NodeID/ClusterID/AdvertiseRPCAddr", "membership.Config.NodeID/ClusterID/RPCAddr"},
	}
	for _, tc := range cases {
		err := tc.opts.Validate()
		if !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("%s: Validate() = %v, want ErrInvalidOptions", tc.name, err)
			continue
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, ErrInvalidOptions.Error()+": "+tc.field+" ") || !strings.Contains(msg, "("+tc.component+")") {
			t.Errorf("%s: %q does not name %s, then (%s)", tc.name, msg, tc.field, tc.component)
		}
		var te *transport.ConfigError
		var me *membership.ConfigError
		var re *replica.ConfigError
		ok := errors.As(err, &te) && errors.Is(err, transport.ErrInvalidConfig)
		switch {
		case strings.HasPrefix(tc.component, "membership."):
			ok = errors.As(err, &me) && errors.Is(err, membership.ErrInvalidConfig)
		case strings.HasPrefix(tc.component, "replica."):
			ok = errors.As(err, &re) && errors.Is(err, replica.ErrInvalidConfig)
		}
		if !ok {
			t.Errorf("%s: %v does not wrap the component's error", tc.name, err)
		}
	}
}

// components carries every Options value into the component that uses
// it, and each component's own defaults for the rest.
func TestOptionsComponentsCarryValuesAndDefaults(t *testing.T) {
	tlsCfg := &tls.Config{Certificates: []tls.Certificate{{}}, ClientAuth: tls.RequireAndVerifyClientCert}
	o := Options{
		Dir: "/tmp/x", NodeID: "n1", ClusterID: "c1", Voters: []string{"n1", "n2", "n3"},
		RPCAddr: "10.0.0.1:7400", GossipAddr: "10.0.0.1:7946", Join: []string{"10.0.0.2:7946"},
		Secret: testSecret, TLS: tlsCfg, TLSVerifyNodeID: true,
		GossipTuning: membership.Tuning{ProbeInterval: 3 * time.Second},
		FetchMaxWait: 100 * time.Millisecond, FetchTimeout: 5 * time.Second, ElectionTimeout: time.Second,
		FetchMaxBytes: 2 << 20, MaxRecordSize: 3 << 20, NoSync: true, ManualVoterChanges: true,
		CatchUpBytesPerSecond: 48 << 20, MaxUncommittedBytes: -1,
	}
	d := o.withDefaults()
	c := d.components(nil)

	r := c.replica
	if r.ID != "n1" || !reflect.DeepEqual(r.Voters, o.Voters) || r.FetchMaxWait != o.FetchMaxWait ||
		r.FetchTimeout != o.FetchTimeout || r.ElectionTimeout != o.ElectionTimeout ||
		r.FetchMaxBytes != o.FetchMaxBytes || r.MaxRecordSize != o.MaxRecordSize || r.Logger == nil || !r.ManualVoterChanges ||
		r.CatchUpBytesPerSecond != o.CatchUpBytesPerSecond || r.MaxUncommittedBytes != o.MaxUncommittedBytes {
		t.Errorf("replica config: %+v", r)
	}
	// Left zero, both take the core's defaults, written back into Options.
	if z := (Options{Dir: "/tmp/x"}).withDefaults(); z.CatchUpBytesPerSecond != DefaultCatchUpBytesPerSecond || z.MaxUncommittedBytes != DefaultMaxUncommittedBytes {
		t.Errorf("defaults: CatchUpBytesPerSecond %d, MaxUncommittedBytes %d", z.CatchUpBytesPerSecond, z.MaxUncommittedBytes)
	}

	tc := c.transport
	if tc.NodeID != "n1" || tc.ClusterID != "c1" || tc.ListenAddr != o.RPCAddr || !bytes.Equal(tc.Secret, testSecret) ||
		tc.TLS != tlsCfg || tc.VerifyPeer == nil || tc.Logger == nil || tc.Resolver != nil {
		t.Errorf("transport config: %+v", tc)
	}
	if tc.MaxFrameSize != transport.DefaultMaxFrameSize || tc.DialTimeout != transport.DefaultDialTimeout ||
		tc.QueueSize != transport.DefaultQueueSize || tc.IdleTimeout != transport.DefaultIdleTimeout {
		t.Errorf("transport defaults not applied: %+v", tc)
	}
	// The size ceilings are what a frame of the derived size carries.
	if maxConfiguredSize != transport.MaxPayload(tc.MaxFrameSize) || maxRecordSize != maxConfiguredSize-protocol.EntryOverhead ||
		maxBatchBytes != maxConfiguredSize {
		t.Errorf("size ceilings %d/%d/%d do not follow the frame size %d", maxConfiguredSize, maxRecordSize, maxBatchBytes, tc.MaxFrameSize)
	}

	mc := c.membership
	wantTuning := membership.LAN()
	wantTuning.ProbeInterval = 3 * time.Second
	if mc.NodeID != "n1" || mc.ClusterID != "c1" || mc.BindAddr != o.GossipAddr || mc.RPCAddr != o.RPCAddr ||
		!mc.Voter || !reflect.DeepEqual(mc.Join, o.Join) || !bytes.Equal(mc.SecretKey, d.GossipKey) || len(mc.SecretKey) != 32 ||
		mc.Label != "c1" || mc.Tuning != wantTuning || mc.HintBuffer != membership.DefaultHintBuffer || mc.Logger == nil {
		t.Errorf("membership config: %+v", mc)
	}
	if adv := (Options{Dir: "/tmp/x", RPCAddr: ":7400", AdvertiseRPCAddr: "10.0.0.9:7400", GossipLabel: "l"}).withDefaults().components(nil).membership; adv.RPCAddr != "10.0.0.9:7400" || adv.Label != "l" || adv.Voter != true {
		t.Errorf("membership config with AdvertiseRPCAddr and GossipLabel: %+v", adv)
	}
	if obs := (Options{Dir: "/tmp/x", Voters: []string{"n2"}}).withDefaults().components(nil).membership; obs.Voter {
		t.Error("an observer is advertised as a voter")
	}

	if c.store.NoSync != true || c.store.Timeout != storage.DefaultLockTimeout || c.store.Logger == nil {
		t.Errorf("store options: %+v", c.store)
	}
	if c.identity != (storage.Identity{ClusterID: "c1", NodeID: "n1"}) {
		t.Errorf("identity: %+v", c.identity)
	}
	// Every derived configuration is valid (with its run-time fields).
	tc.Resolver = func(string) (string, bool) { return "", false }
	if err := tc.Validate(); err != nil {
		t.Error(err)
	}
	if err := mc.Validate(); err != nil {
		t.Error(err)
	}
	if err := o.Validate(); err != nil {
		t.Error(err)
	}
}

// Validate, withDefaults, components and Open leave the caller's Options
// as they were, and later changes to the caller's slices and maps do not
// reach the derived configurations.
func TestOptionsNeverMutated(t *testing.T) {
	mk := func(dir string) Options {
		return Options{
			Dir: dir, Voters: []string{"node1"}, Peers: map[string]string{"n2": "127.0.0.1:1"},
			Join: []string{}, Secret: append([]byte(nil), testSecret...), NoSync: true,
		}
	}
	dir := t.TempDir()
	o, before := mk(dir), mk(dir)
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	c := o.withDefaults().components(nil)
	l, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(o, before) {
		t.Fatalf("the caller's options changed:\n got %+v\nwant %+v", o, before)
	}
	o.Voters[0] = "changed"
	o.Secret[0] ^= 0xff
	if c.replica.Voters[0] != "node1" || c.transport.Secret[0] != testSecret[0] {
		t.Fatal("derived configurations share slices with the caller's options")
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

// configsOf lists c's configurations by the names derivations give them;
// it fails the test if components gained a part the list lacks.
func configsOf(t *testing.T, c components) map[string]any {
	t.Helper()
	m := map[string]any{
		coreConfig:       c.replica,
		transportConfig:  c.transport,
		membershipConfig: c.membership,
		storeConfig:      c.store,
		identityConfig:   c.identity,
	}
	if n := reflect.TypeOf(c).NumField(); n != len(m) {
		t.Fatalf("components has %d parts, configsOf lists %d", n, len(m))
	}
	return m
}

// perturb changes v (a settable field of Options) to another value of its
// type; it returns false for a kind it cannot change (the Logger).
func perturb(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.String:
		v.SetString(v.String() + "-p")
	case reflect.Bool:
		v.SetBool(!v.Bool())
	case reflect.Int, reflect.Int64:
		v.SetInt(v.Int() + 7)
	case reflect.Slice:
		switch v.Type().Elem().Kind() {
		case reflect.String:
			v.Set(reflect.ValueOf([]string{"perturbed"}))
		case reflect.Uint8:
			v.SetBytes(bytes.Repeat([]byte{'p'}, 32))
		default:
			return false
		}
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		m.SetMapIndex(reflect.ValueOf("perturbed"), reflect.ValueOf("127.0.0.1:9"))
		v.Set(m)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
	case reflect.Struct:
		return perturb(v.Field(0))
	default:
		return false
	}
	return true
}

// sameValue compares two component field values; functions by identity.
func sameValue(a, b reflect.Value) bool {
	if a.Kind() == reflect.Func {
		return a.IsNil() == b.IsNil() && (a.IsNil() || a.Pointer() == b.Pointer())
	}
	return reflect.DeepEqual(a.Interface(), b.Interface())
}

// Every row of derivations names a real Options field and a real field of
// its component, and carries the value: changing the Options field changes
// that component field. Conversely, every component field that an Options
// field changes has a row naming that Options field, so that Validate's
// errors about it name the right Options field: a row lost, a field set
// outside derivations, or a row naming the wrong field fails here.
func TestOptionsDerivationsNameEveryDerivedField(t *testing.T) {
	// Every field set (and TLS non-zero), AdvertiseRPCAddr empty so that
	// RPCAddr feeds gossip's address (the perturbation sets it).
	base := Options{
		Dir: "/tmp/x", NodeID: "n1", ClusterID: "c1", Voters: []string{"n1", "n2"}, ManualVoterChanges: false,
		RPCAddr: "10.0.0.1:7400", Peers: map[string]string{"n2": "10.0.0.2:7400"},
		TLS: &tls.Config{ServerName: "base"}, Secret: testSecret, GossipAddr: "10.0.0.1:7946",
		Join: []string{"10.0.0.2:7946"}, GossipKey: testSecret[:16], GossipLabel: "l",
		GossipTuning: membership.Tuning{ProbeInterval: 3 * time.Second},
		FetchMaxWait: 100 * time.Millisecond, FetchTimeout: 5 * time.Second, ElectionTimeout: time.Second,
		FetchMaxBytes: 2 << 20, MaxRecordSize: 3 << 20, DedupWindow: time.Minute, ProducerIdleTimeout: time.Hour,
		CloseTransferTimeout: time.Second, RetentionBytes: 1 << 30, RetentionAge: time.Hour, SegmentBytes: 1 << 20,
	}
	// Component fields that follow an Options field by a component's own
	// default or by a second input, not by a row of their own.
	followers := map[string]bool{
		"NodeID " + membershipConfig + ".Voter": true, // the node is a voter if Voters lists its NodeID
	}
	ot := reflect.TypeOf(Options{})
	for _, d := range derivations {
		if _, ok := ot.FieldByName(d.option); !ok {
			t.Errorf("row %s.%s: Options has no field %s", d.component, d.field, d.option)
		}
		cfg, ok := configsOf(t, components{})[d.component]
		if !ok {
			t.Errorf("row %s.%s: no component %s", d.component, d.field, d.component)
			continue
		}
		if _, ok := reflect.TypeOf(cfg).FieldByName(d.field); !ok {
			t.Errorf("row %s.%s: %s has no field %s", d.component, d.field, d.component, d.field)
		}
	}
	// Values for the Options fields perturb cannot change (interfaces):
	// a field of such a kind that feeds a component needs one here.
	samples := map[string]any{
		"Logger":   hclog.NewNullLogger(),
		"Listener": &net.TCPListener{}, // compared, never used
	}
	before := configsOf(t, base.components(nil))
	carried := map[int]bool{} // rows seen to carry their value
	for i := 0; i < ot.NumField(); i++ {
		name := ot.Field(i).Name
		o := base
		if f := reflect.ValueOf(&o).Elem().Field(i); !perturb(f) {
			v, ok := samples[name]
			if !ok {
				t.Errorf("perturb cannot change Options.%s (%s): add a value to samples", name, f.Type())
				continue
			}
			f.Set(reflect.ValueOf(v))
		}
		after := configsOf(t, o.components(nil))
		for comp, cfg := range after {
			av, bv := reflect.ValueOf(cfg), reflect.ValueOf(before[comp])
			for j := 0; j < av.NumField(); j++ {
				field := av.Type().Field(j).Name
				if sameValue(av.Field(j), bv.Field(j)) {
					continue
				}
				row := -1
				for k, d := range derivations {
					if d.option == name && d.component == comp && d.field == field && d.applies(&o) {
						row = k
					}
				}
				if row >= 0 {
					carried[row] = true
				} else if !followers[name+" "+comp+"."+field] {
					t.Errorf("Options.%s changes %s.%s, and no row of derivations says so", name, comp, field)
				}
				if got := o.optionFor(comp, field); row >= 0 && got != name {
					t.Errorf("optionFor(%s, %s) = %q, want %s", comp, field, got, name)
				}
			}
		}
	}
	for k, d := range derivations {
		if !carried[k] {
			t.Errorf("row %s -> %s.%s: changing Options.%s does not change %s.%s", d.option, d.component, d.field, d.option, d.component, d.field)
		}
	}
	// The other branch of a row with a condition: AdvertiseRPCAddr set
	// feeds gossip's address, and errors name it.
	adv := base
	adv.AdvertiseRPCAddr = "10.0.0.9:7400"
	if got := adv.optionFor(membershipConfig, "RPCAddr"); got != "AdvertiseRPCAddr" {
		t.Errorf("with AdvertiseRPCAddr, optionFor(membership RPCAddr) = %q", got)
	}
	if got := base.optionFor(membershipConfig, "NodeID/ClusterID/RPCAddr"); got != "NodeID/ClusterID/RPCAddr" {
		t.Errorf("optionFor of a joined path = %q", got)
	}
	if got := base.optionFor(membershipConfig, "Tuning.ProbeTimeout"); got != "GossipTuning.ProbeTimeout" {
		t.Errorf("optionFor of a nested path = %q", got)
	}
	if got := base.optionFor(coreConfig, "MaxForwardBytes"); got != "" {
		t.Errorf("optionFor of a field no Options field feeds = %q, want empty", got)
	}
}

// EnsureDefaults takes the core's defaults for the fields that feed the
// core (its rows' way back), and nothing from the other components'.
func TestOptionsEnsureDefaultsTakesTheCoresDefaults(t *testing.T) {
	o := Options{Dir: "/tmp/x"}
	o.EnsureDefaults()
	var rc replica.Config
	rc.ID, rc.Voters = o.NodeID, o.Voters
	rc.EnsureDefaults()
	if o.FetchTimeout != rc.FetchTimeout || o.ElectionTimeout != rc.ElectionTimeout || o.FetchMaxWait != rc.FetchMaxWait ||
		o.FetchMaxBytes != rc.FetchMaxBytes || o.MaxRecordSize != rc.MaxRecordSize || o.DedupWindow != rc.DedupWindow ||
		o.ProducerIdleTimeout != rc.ProducerIdleTimeout {
		t.Errorf("Options defaults %+v differ from the core's %+v", o, rc)
	}
	if o.GossipLabel != "" || o.GossipTuning != (membership.Tuning{}) || o.SegmentBytes != 0 {
		t.Errorf("EnsureDefaults filled a component's own defaults: %+v", o)
	}
	set := Options{Dir: "/tmp/x", FetchTimeout: 9 * time.Second, MaxRecordSize: 5}
	set.EnsureDefaults()
	if set.FetchTimeout != 9*time.Second || set.MaxRecordSize != 5 {
		t.Errorf("EnsureDefaults replaced set fields: %+v", set)
	}
}
