package membership

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func validConfig() Config {
	return Config{
		NodeID:    "n1",
		ClusterID: "c1",
		BindAddr:  "127.0.0.1:0",
		RPCAddr:   "127.0.0.1:7000",
	}
}

func TestValidate(t *testing.T) {
	if err := validConfig().Validate(); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	cases := []struct {
		field string
		mod   func(*Config)
	}{
		{"NodeID", func(c *Config) { c.NodeID = "" }},
		{"ClusterID", func(c *Config) { c.ClusterID = "" }},
		{"BindAddr", func(c *Config) { c.BindAddr = "" }},
		{"BindAddr", func(c *Config) { c.BindAddr = "localhost:0" }},
		{"BindAddr", func(c *Config) { c.BindAddr = "127.0.0.1:99999" }},
		{"AdvertiseAddr", func(c *Config) { c.AdvertiseAddr = "nohost" }},
		{"RPCAddr", func(c *Config) { c.RPCAddr = "" }},
		{"RPCAddr", func(c *Config) { c.RPCAddr = "no-port" }},
		{"Join[1]", func(c *Config) { c.Join = []string{"127.0.0.1:1", "bad"} }},
		{"SecretKey", func(c *Config) { c.SecretKey = make([]byte, 15) }},
		{"Label", func(c *Config) { c.Label = strings.Repeat("l", 256) }},
		{"ClusterID", func(c *Config) { c.ClusterID = strings.Repeat("c", 300) }},
		{"HintBuffer", func(c *Config) { c.HintBuffer = -1 }},
		{"Tuning.ProbeInterval", func(c *Config) { c.Tuning.ProbeInterval = -time.Second }},
		{"Tuning.SuspicionMult", func(c *Config) { c.Tuning.SuspicionMult = -1 }},
		{"Tuning.ProbeTimeout", func(c *Config) { c.Tuning = FastForTests(); c.Tuning.ProbeTimeout = time.Second }},
		{"NodeID/ClusterID/RPCAddr", func(c *Config) { c.NodeID = strings.Repeat("n", 600) }},
	}
	for _, tc := range cases {
		t.Run(tc.field, func(t *testing.T) {
			c := validConfig()
			tc.mod(&c)
			err := c.Validate()
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("want ErrInvalidConfig, got %v", err)
			}
			if !strings.Contains(err.Error(), tc.field+":") {
				t.Fatalf("error does not name %s: %v", tc.field, err)
			}
		})
	}
}

func TestValidateAcceptsOptionalFields(t *testing.T) {
	c := validConfig()
	c.AdvertiseAddr = "10.0.0.1:0"
	c.SecretKey = make([]byte, 32)
	c.Label = "custom"
	c.Join = []string{"127.0.0.1:7946", "[::1]:7946"}
	c.Tuning = FastForTests()
	c.HintBuffer = 1
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestOversizeMetaRefusedAtNew(t *testing.T) {
	c := validConfig()
	c.RPCAddr = strings.Repeat("h", 520) + ":1"
	m, err := New(c)
	if m != nil || !errors.Is(err, ErrMetaTooLarge) || !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("want ErrMetaTooLarge and ErrInvalidConfig, got %v, %v", m, err)
	}
}

func TestTuningDefaults(t *testing.T) {
	got := Tuning{ProbeInterval: 3 * time.Second}
	got.EnsureDefaults()
	want := LAN()
	want.ProbeInterval = 3 * time.Second
	if got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	f := FastForTests()
	if g := f; func() bool { g.EnsureDefaults(); return g != f }() {
		t.Fatalf("FastForTests has zero fields: %+v", f)
	}
}

func TestConfigEnsureDefaults(t *testing.T) {
	c := validConfig()
	c.EnsureDefaults()
	if c.Label != c.ClusterID || c.HintBuffer != DefaultHintBuffer || c.Tuning != LAN() || c.Logger == nil {
		t.Fatalf("defaults not applied: %+v", c)
	}
	set := validConfig()
	set.Label, set.HintBuffer, set.Tuning = "own", 3, FastForTests()
	set.EnsureDefaults()
	if set.Label != "own" || set.HintBuffer != 3 || set.Tuning != FastForTests() {
		t.Fatalf("set fields changed: %+v", set)
	}
}

// Validate and New work on copies: the caller's Config keeps its zero
// fields (and its slices their contents).
func TestConfigNotModified(t *testing.T) {
	c := validConfig()
	c.Join = []string{}
	c.SecretKey = make([]byte, 16)
	before := fmt.Sprintf("%+v", c)
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	m, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if after := fmt.Sprintf("%+v", c); after != before {
		t.Fatalf("config modified:\n%s\n%s", before, after)
	}
}

// The errors are *ConfigError naming the field; the metadata one also
// wraps ErrMetaTooLarge.
func TestValidateReturnsConfigError(t *testing.T) {
	c := validConfig()
	c.Join = []string{"127.0.0.1:1", "bad"}
	var ce *ConfigError
	if err := c.Validate(); !errors.As(err, &ce) || ce.Field != "Join[1]" || ce.Err != nil {
		t.Fatalf("got %v (%+v)", err, ce)
	}
	c = validConfig()
	c.RPCAddr = strings.Repeat("h", 520) + ":1"
	err := c.Validate()
	if !errors.As(err, &ce) || ce.Field != "NodeID/ClusterID/RPCAddr" || !errors.Is(err, ErrMetaTooLarge) || !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("got %v", err)
	}
}
