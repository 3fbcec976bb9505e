package membership

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestMetaRoundTrip(t *testing.T) {
	cases := []struct {
		name string
		m    nodeMeta
	}{
		{"minimal", nodeMeta{NodeID: "n", ClusterID: "c"}},
		{"voter", nodeMeta{NodeID: "n1", ClusterID: "prod", RPCAddr: "10.0.0.1:7000", Voter: true}},
		{"leader", nodeMeta{NodeID: "n1", ClusterID: "prod", RPCAddr: "10.0.0.1:7000", Voter: true, LeaderID: "n1", Epoch: 7}},
		{"follower knows leader", nodeMeta{NodeID: "n2", ClusterID: "prod", RPCAddr: "[::1]:7000", LeaderID: "n1", Epoch: 1 << 40}},
		{"max epoch", nodeMeta{NodeID: "n", ClusterID: "c", Epoch: ^uint64(0)}},
		{"unicode", nodeMeta{NodeID: "nœud-é", ClusterID: "集群", RPCAddr: "h:1"}},
		{"exactly at limit", nodeMeta{NodeID: strings.Repeat("x", MaxMetaSize-9), ClusterID: "c"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, err := tc.m.encode()
			if err != nil {
				t.Fatalf("encode: %v", err)
			}
			if len(b) > MaxMetaSize {
				t.Fatalf("encoded %d bytes > %d", len(b), MaxMetaSize)
			}
			if b[0] != metaVersion {
				t.Fatalf("version byte %d", b[0])
			}
			got, err := decodeMeta(b)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if got != tc.m {
				t.Fatalf("round trip: got %+v, want %+v", got, tc.m)
			}
		})
	}
}

func TestMetaExactLimit(t *testing.T) {
	// Grow RPCAddr: the largest accepted encoding is exactly MaxMetaSize
	// bytes, and one more byte is refused with ErrMetaTooLarge.
	m := nodeMeta{NodeID: "n", ClusterID: "c"}
	largest := 0
	for n := 0; n <= MaxMetaSize; n++ {
		m.RPCAddr = strings.Repeat("a", n)
		b, err := m.encode()
		if err != nil {
			if !errors.Is(err, ErrMetaTooLarge) {
				t.Fatalf("want ErrMetaTooLarge, got %v", err)
			}
			break
		}
		largest = len(b)
	}
	if largest != MaxMetaSize {
		t.Fatalf("largest accepted encoding is %d bytes, want %d", largest, MaxMetaSize)
	}
}

func TestMetaTooLarge(t *testing.T) {
	m := nodeMeta{NodeID: "n1", ClusterID: "c", RPCAddr: "h:1", LeaderID: strings.Repeat("L", MaxMetaSize)}
	_, err := m.encode()
	if !errors.Is(err, ErrMetaTooLarge) {
		t.Fatalf("want ErrMetaTooLarge, got %v", err)
	}
	if !strings.Contains(err.Error(), "limit 512") {
		t.Fatalf("error should name the limit: %v", err)
	}
}

func TestMetaDecodeGarbage(t *testing.T) {
	good, err := nodeMeta{NodeID: "n1", ClusterID: "c", RPCAddr: "h:1", LeaderID: "n1", Epoch: 3}.encode()
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string][]byte{
		"nil":            nil,
		"one byte":       {metaVersion},
		"bad version":    append([]byte{2}, good[1:]...),
		"version zero":   append([]byte{0}, good[1:]...),
		"unknown flag":   append([]byte{metaVersion, 0x80}, good[2:]...),
		"trailing byte":  append(bytes.Clone(good), 0),
		"truncated":      good[:len(good)-1],
		"no fields":      {metaVersion, 0, 0},
		"huge length":    {metaVersion, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
		"varint overrun": {metaVersion, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
		"empty node ID":  {metaVersion, 0, 0, 0, 1, 'c', 0, 0},
		"empty cluster":  {metaVersion, 0, 0, 1, 'n', 0, 0, 0},
		"oversize":       bytes.Repeat([]byte{0}, MaxMetaSize+1),
		"msgpack-ish":    []byte("\x82\xa2id\xa2n1"),
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			m, err := decodeMeta(b)
			if !errors.Is(err, ErrBadMeta) {
				t.Fatalf("want ErrBadMeta, got %v (%+v)", err, m)
			}
			if m != (nodeMeta{}) {
				t.Fatalf("error with non-zero result %+v", m)
			}
		})
	}
}

// FuzzDecodeMeta: the decoder never panics, and whatever it accepts
// re-encodes (within the size limit) to something that decodes to the same
// value.
func FuzzDecodeMeta(f *testing.F) {
	for _, m := range []nodeMeta{
		{NodeID: "n", ClusterID: "c"},
		{NodeID: "n1", ClusterID: "prod", RPCAddr: "10.0.0.1:7000", Voter: true, LeaderID: "n1", Epoch: 7},
		{NodeID: "n2", ClusterID: "prod", RPCAddr: "[::1]:7000", LeaderID: "n1", Epoch: 1 << 40},
	} {
		b, err := m.encode()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{})
	f.Add([]byte{metaVersion, 0, 0x80, 0x00, 1, 'n', 1, 'c', 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeMeta(b)
		if err != nil {
			if !errors.Is(err, ErrBadMeta) {
				t.Fatalf("error not ErrBadMeta: %v", err)
			}
			return
		}
		if m.NodeID == "" || m.ClusterID == "" {
			t.Fatalf("accepted empty IDs: %+v", m)
		}
		enc, err := m.encode()
		if err != nil {
			t.Fatalf("re-encode of accepted meta %+v: %v", m, err)
		}
		if len(enc) > len(b) {
			t.Fatalf("re-encoding grew: %d > %d", len(enc), len(b))
		}
		m2, err := decodeMeta(enc)
		if err != nil || m2 != m {
			t.Fatalf("round trip: %+v, %v; want %+v", m2, err, m)
		}
	})
}

func BenchmarkMetaEncode(b *testing.B) {
	m := nodeMeta{NodeID: "node-1", ClusterID: "prod", RPCAddr: "10.0.0.1:7000", Voter: true, LeaderID: "node-2", Epoch: 42}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.encode(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMetaDecode(b *testing.B) {
	enc, err := nodeMeta{NodeID: "node-1", ClusterID: "prod", RPCAddr: "10.0.0.1:7000", Voter: true, LeaderID: "node-2", Epoch: 42}.encode()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeMeta(enc); err != nil {
			b.Fatal(err)
		}
	}
}
