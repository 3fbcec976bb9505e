package transport

import (
	"crypto/tls"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/replog-io/replog/protocol"
)

// Each bad field is named by a *ConfigError that wraps ErrInvalidConfig;
// the positive control is the minimal config and one with every field set.
func TestTCPConfigValidateTable(t *testing.T) {
	res := func(string) (string, bool) { return "", false }
	good := TCPConfig{NodeID: "a", ListenAddr: "127.0.0.1:0", Resolver: res}
	full := good
	full.ClusterID = "c"
	full.Secret = make([]byte, MinSecretSize)
	full.TLS = &tls.Config{} // a config without certificates may dial (its listener then fails handshakes)
	full.MaxFrameSize = 2 * FrameOverhead
	full.PartialFrameBudget = 2 * FrameOverhead
	for _, c := range []TCPConfig{good, full} {
		if err := c.Validate(); err != nil {
			t.Fatalf("valid config %+v refused: %v", c, err)
		}
	}
	cases := []struct {
		field string
		edit  func(*TCPConfig)
	}{
		{"NodeID", func(c *TCPConfig) { c.NodeID = "" }},
		{"NodeID", func(c *TCPConfig) { c.NodeID = strings.Repeat("n", maxIDLen+1) }},
		{"ClusterID", func(c *TCPConfig) { c.ClusterID = strings.Repeat("c", maxIDLen+1) }},
		{"ListenAddr", func(c *TCPConfig) { c.ListenAddr = "" }},
		{"ListenAddr", func(c *TCPConfig) { c.ListenAddr = "127.0.0.1" }},
		{"Resolver", func(c *TCPConfig) { c.Resolver = nil }},
		{"Secret", func(c *TCPConfig) { c.Secret = make([]byte, MinSecretSize-1) }},
		{"MaxFrameSize", func(c *TCPConfig) { c.MaxFrameSize = -1 }},
		{"MaxFrameSize", func(c *TCPConfig) { c.MaxFrameSize = 2*FrameOverhead - 1 }},
		{"PartialFrameBudget", func(c *TCPConfig) { c.PartialFrameBudget = -1 }},
		{"PartialFrameBudget", func(c *TCPConfig) { c.PartialFrameBudget = DefaultMaxFrameSize - 1 }},
		{"IdleTimeout", func(c *TCPConfig) { c.IdleTimeout = -1 }},
		{"MaxInboundConns", func(c *TCPConfig) { c.MaxInboundConns = -1 }},
		{"MaxInboundConnsPerIP", func(c *TCPConfig) { c.MaxInboundConnsPerIP = -1 }},
		{"RefusalLogInterval", func(c *TCPConfig) { c.RefusalLogInterval = -1 }},
		{"DialTimeout", func(c *TCPConfig) { c.DialTimeout = -1 }},
		{"HandshakeTimeout", func(c *TCPConfig) { c.HandshakeTimeout = -1 }},
		{"WriteTimeout", func(c *TCPConfig) { c.WriteTimeout = -1 }},
		{"BackoffMin", func(c *TCPConfig) { c.BackoffMin = -1 }},
		{"BackoffMax", func(c *TCPConfig) { c.BackoffMax = -1 }},
		{"QueueSize", func(c *TCPConfig) { c.QueueSize = -1 }},
		{"ReceiveQueueSize", func(c *TCPConfig) { c.ReceiveQueueSize = -1 }},
		{"ReceiveTimeout", func(c *TCPConfig) { c.ReceiveTimeout = -1 }},
	}
	for _, tc := range cases {
		c := good
		tc.edit(&c)
		err := c.Validate()
		var ce *ConfigError
		if !errors.Is(err, ErrInvalidConfig) || !errors.As(err, &ce) || ce.Field != tc.field ||
			!strings.Contains(err.Error(), "TCPConfig."+tc.field) {
			t.Errorf("%s: Validate() = %v, want a ConfigError naming it", tc.field, err)
		}
	}
}

func TestTCPConfigEnsureDefaults(t *testing.T) {
	var c TCPConfig
	c.EnsureDefaults()
	want := TCPConfig{
		MaxFrameSize: DefaultMaxFrameSize, PartialFrameBudget: DefaultPartialFrameBudget,
		IdleTimeout: DefaultIdleTimeout, MaxInboundConns: DefaultMaxInboundConns,
		MaxInboundConnsPerIP: DefaultMaxInboundConnsPerIP, RefusalLogInterval: DefaultRefusalLogInterval,
		DialTimeout: DefaultDialTimeout, HandshakeTimeout: DefaultHandshakeTimeout, WriteTimeout: DefaultWriteTimeout,
		BackoffMin: DefaultBackoffMin, BackoffMax: DefaultBackoffMax, QueueSize: DefaultQueueSize,
		ReceiveQueueSize: DefaultReceiveQueueSize, ReceiveTimeout: DefaultReceiveTimeout,
	}
	if c.Logger == nil {
		t.Fatal("no default logger")
	}
	c.Logger = nil
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("defaults:\n got %+v\nwant %+v", c, want)
	}
	// Set fields stay; a BackoffMax below BackoffMin is raised to it.
	set := TCPConfig{QueueSize: 3, DialTimeout: time.Minute, BackoffMin: 5 * time.Second}
	set.EnsureDefaults()
	if set.QueueSize != 3 || set.DialTimeout != time.Minute || set.BackoffMax != 5*time.Second {
		t.Fatalf("set fields changed: %+v", set)
	}
}

// Validate applies defaults to its own copy only.
func TestTCPConfigValidateDoesNotModify(t *testing.T) {
	c := TCPConfig{NodeID: "a", ListenAddr: "127.0.0.1:0", Resolver: func(string) (string, bool) { return "", false }}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.MaxFrameSize != 0 || c.Logger != nil || c.QueueSize != 0 {
		t.Fatalf("Validate modified the config: %+v", c)
	}
}

// maxID is a node ID of the longest length the transport accepts, maxLog
// the longest log name.
var (
	maxID  = strings.Repeat("n", maxIDLen)
	maxLog = strings.Repeat("l", protocol.MaxLogNameLength)
)

// FrameOverhead bounds every entry-carrying frame's fixed part, and a
// FetchResponse or AppendRequest whose entries or records cost exactly
// MaxPayload (len + protocol.EntryOverhead each) fits its frame: the
// ceilings derived from it are safe. A test of EncodedSize, so a new field
// in either message that FrameOverhead forgets fails here.
func TestFrameOverheadBoundsEncodedSize(t *testing.T) {
	empty := []protocol.Message{
		{From: maxID, To: maxID, Log: maxLog, Body: &protocol.FetchResponse{LeaderID: maxID}},
		{From: maxID, To: maxID, Log: maxLog, Body: &protocol.AppendRequest{}},
	}
	for _, m := range empty {
		if n := EncodedSize(m); n > FrameOverhead {
			t.Errorf("%T: fixed part %d bytes > FrameOverhead %d", m.Body, n, FrameOverhead)
		}
	}
	if n := EncodedSize(empty[0]); n != FrameOverhead {
		t.Errorf("FrameOverhead %d is not the FetchResponse's fixed part %d (the largest): it wastes room", FrameOverhead, n)
	}
	for _, frame := range []int{2 * FrameOverhead, 1 << 20, DefaultMaxFrameSize} {
		payload := MaxPayload(frame)
		for _, n := range []int{1, 2, 1000} { // entries sharing the payload
			each := payload/n - protocol.EntryOverhead
			if each < 0 {
				continue
			}
			entries := make([]protocol.Entry, n)
			records := make([][]byte, n)
			data := make([]byte, each)
			for i := range entries {
				entries[i] = protocol.Entry{Offset: uint64(i), Epoch: 1, Data: data}
				records[i] = data
			}
			for _, m := range []protocol.Message{
				{From: maxID, To: maxID, Log: maxLog, Body: &protocol.FetchResponse{LeaderID: maxID, Entries: entries}},
				{From: maxID, To: maxID, Log: maxLog, Body: &protocol.AppendRequest{Records: records}},
			} {
				if size := EncodedSize(m); size > frame {
					t.Errorf("frame %d, %d entries of %d bytes (payload %d): %T encodes to %d bytes", frame, n, each, payload, m.Body, size)
				}
			}
		}
	}
	if DefaultMaxPayload != MaxPayload(0) || DefaultMaxPayload != DefaultMaxFrameSize-FrameOverhead {
		t.Fatalf("DefaultMaxPayload %d, MaxPayload(0) %d", DefaultMaxPayload, MaxPayload(0))
	}
}
