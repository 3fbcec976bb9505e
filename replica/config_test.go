package replica

import (
	"errors"
	"math"
	"math/rand"
	"slices"
	"testing"
	"time"

	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/storage"
)

func TestConfigValidateNamesField(t *testing.T) {
	ok := Config{ID: "a", Voters: []string{"a", "b", "c"}}
	for _, tc := range []struct {
		field string
		edit  func(*Config)
	}{
		{"ID", func(c *Config) { c.ID = "" }},
		{"Voters", func(c *Config) { c.Voters = nil }},
		{"Voters", func(c *Config) { c.Voters = []string{"a", "a"} }},
		{"Voters", func(c *Config) { c.Voters = []string{"a", ""} }},
		{"ElectionTimeout", func(c *Config) { c.ElectionTimeout = -1 }},
		{"FetchMaxWait", func(c *Config) { c.FetchMaxWait = -1 }},
		{"FetchMaxWait", func(c *Config) { c.FetchMaxWait = (math.MaxUint32 + 1) * time.Millisecond }},
		{"FetchTimeout", func(c *Config) { c.FetchTimeout = MinFetchTimeout(DefaultFetchMaxWait, DefaultElectionTimeout) - 1 }},
		{"FetchTimeout", func(c *Config) { c.FetchMaxWait = DefaultFetchTimeout }},
		{"FetchMaxBytes", func(c *Config) { c.FetchMaxBytes = -1 }},
		{"MaxRecordSize", func(c *Config) { c.MaxRecordSize = -1 }},
		{"MaxForwardBytes", func(c *Config) { c.MaxForwardBytes = -1 }},
		{"SupportedFeatureLevel", func(c *Config) { c.SupportedFeatureLevel = protocol.BaseFeatureLevel - 1 }},
		{"SupportedFeatureLevel", func(c *Config) { c.SupportedFeatureLevel = 256 }},
		{"MaxFeatureLevel", func(c *Config) { c.MaxFeatureLevel = protocol.BaseFeatureLevel - 1 }},
		{"MaxFeatureLevel", func(c *Config) { c.MaxFeatureLevel = -1 }},
		{"CatchUpBytesPerSecond", func(c *Config) { c.CatchUpBytesPerSecond = MaxCatchUpBytesPerSecond + 1 }},
		// A record a follower could not forward (its batch limit less one
		// entry's overhead) is refused at configuration, not at run time.
		{"MaxRecordSize", func(c *Config) { c.MaxForwardBytes = DefaultMaxRecordSize }},
	} {
		c := ok
		c.Voters = slices.Clone(ok.Voters)
		tc.edit(&c)
		err := c.Validate()
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != tc.field || !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("Validate(%+v) = %v, want a *ConfigError naming %s and wrapping ErrInvalidConfig", c, err, tc.field)
		}
		if _, err := New(c, storage.NewMemory(), t0); !errors.As(err, &ce) || ce.Field != tc.field {
			t.Errorf("New(%+v) = %v, want the error naming %s", c, err, tc.field)
		}
	}
	// Positive controls: zero optional fields (the defaults) and the bound
	// itself are valid.
	if err := ok.Validate(); err != nil {
		t.Errorf("Validate(%+v) = %v", ok, err)
	}
	c := ok
	c.FetchTimeout = MinFetchTimeout(DefaultFetchMaxWait, DefaultElectionTimeout)
	if err := c.Validate(); err != nil {
		t.Errorf("Validate(%+v) = %v", c, err)
	}
	// The quota at its bound, and both load bounds off (negative), are valid.
	c = ok
	c.CatchUpBytesPerSecond = MaxCatchUpBytesPerSecond
	if err := c.Validate(); err != nil {
		t.Errorf("Validate(%+v) = %v", c, err)
	}
	c.CatchUpBytesPerSecond, c.MaxUncommittedBytes = -1, -1
	if err := c.Validate(); err != nil {
		t.Errorf("Validate(%+v) = %v", c, err)
	}
}

func TestConfigEnsureDefaults(t *testing.T) {
	var c Config
	c.ID = "a"
	c.EnsureDefaults()
	if c.FetchTimeout != DefaultFetchTimeout || c.ElectionTimeout != DefaultElectionTimeout ||
		c.FetchMaxWait != DefaultFetchMaxWait || c.FetchMaxBytes != DefaultFetchMaxBytes ||
		c.MaxRecordSize != DefaultMaxRecordSize || c.Rand == nil || c.Logger == nil ||
		c.CatchUpBytesPerSecond != DefaultCatchUpBytesPerSecond || c.MaxUncommittedBytes != DefaultMaxUncommittedBytes {
		t.Fatalf("EnsureDefaults left a zero field: %+v", c)
	}
	// The default Rand is seeded from ID: the same node draws the same.
	d := Config{ID: "a"}
	d.EnsureDefaults()
	if c.Rand.Uint64() != d.Rand.Uint64() {
		t.Error("two default Rands for one ID differ")
	}
	// Set fields stay.
	r := rand.New(rand.NewSource(1))
	e := Config{FetchTimeout: 9 * time.Second, ElectionTimeout: time.Second, FetchMaxWait: time.Second,
		FetchMaxBytes: 7, MaxRecordSize: 8, Rand: r}
	e.EnsureDefaults()
	if e.FetchTimeout != 9*time.Second || e.ElectionTimeout != time.Second || e.FetchMaxWait != time.Second ||
		e.FetchMaxBytes != 7 || e.MaxRecordSize != 8 || e.Rand != r {
		t.Errorf("EnsureDefaults changed a set field: %+v", e)
	}
}

// New and Validate work on copies: the caller's Config is not modified.
func TestNewLeavesConfigAlone(t *testing.T) {
	voters := []string{"a", "b", "c"}
	c := Config{ID: "a", Voters: voters}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	r, err := New(c, storage.NewMemory(), t0)
	if err != nil {
		t.Fatal(err)
	}
	if c.FetchTimeout != 0 || c.Rand != nil || c.Logger != nil {
		t.Errorf("New modified the caller's Config: %+v", c)
	}
	voters[1] = "x"
	if !r.isVoter("b") || r.isVoter("x") {
		t.Error("the replica shares the caller's Voters slice")
	}
}
