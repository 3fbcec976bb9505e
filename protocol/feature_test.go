package protocol_test

import (
	"errors"
	"testing"

	"github.com/replog-io/replog/protocol"
)

// TestFeatureLevelEntry: an EntryFeature entry's level round-trips, and
// what is not a level (empty, trailing bytes, below the base level) is
// refused rather than read as one.
func TestFeatureLevelEntry(t *testing.T) {
	for _, l := range []uint8{protocol.BaseFeatureLevel, 7, 255} {
		got, err := protocol.DecodeFeatureLevel(protocol.EncodeFeatureLevel(l))
		if err != nil || got != l {
			t.Errorf("level %d: decoded %d, %v", l, got, err)
		}
	}
	for name, b := range map[string][]byte{
		"empty":    nil,
		"trailing": append(protocol.EncodeFeatureLevel(7), 0),
		"below":    protocol.EncodeFeatureLevel(protocol.BaseFeatureLevel - 1),
		"above":    {0x80, 0x02}, // 256
	} {
		if _, err := protocol.DecodeFeatureLevel(b); !errors.Is(err, protocol.ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
	}
	if !protocol.EntryFeature.Known() || protocol.EntryFeature.Visible() || protocol.EntryFeature.String() != "feature" {
		t.Errorf("EntryFeature: known %v, visible %v, %q", protocol.EntryFeature.Known(), protocol.EntryFeature.Visible(), protocol.EntryFeature)
	}
}

// TestFetchFeatureLevelNotAtVersion6: a version-6 peer cannot read a
// fetch's FeatureLevel, so it is not encoded at version 6 and reads back
// as 0 (the base level): a fetch at 6 says "supports 6", whatever the
// sender supports.
func TestFetchFeatureLevelNotAtVersion6(t *testing.T) {
	req := &protocol.FetchRequest{FetchID: 1, ReplicaID: "b", FeatureLevel: 7}
	plain, err := protocol.AppendMessageAt(nil, protocol.Message{From: "b", To: "a", Body: &protocol.FetchRequest{FetchID: 1, ReplicaID: "b"}}, 6)
	if err != nil {
		t.Fatal(err)
	}
	b, err := protocol.AppendMessageAt(nil, protocol.Message{From: "b", To: "a", Body: req}, 6)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != string(plain) {
		t.Fatalf("FeatureLevel changed the version-6 encoding")
	}
	m, err := protocol.DecodeMessage(b)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Body.(*protocol.FetchRequest).FeatureLevel; got != 0 {
		t.Fatalf("decoded FeatureLevel %d, want 0 (base level)", got)
	}
	if protocol.FeatureLevelVersion <= 6 {
		t.Fatalf("FeatureLevelVersion %d: the field must come with a version above 6", protocol.FeatureLevelVersion)
	}
}

// TestFetchFeatureLevelAtVersion7: from FeatureLevelVersion on a fetch
// carries FeatureLevel (one byte more than at 6, EncodedSizeAt exact at
// both), and it reads back as sent.
func TestFetchFeatureLevelAtVersion7(t *testing.T) {
	if protocol.Version < protocol.FeatureLevelVersion {
		t.Fatalf("Version %d is below FeatureLevelVersion %d", protocol.Version, protocol.FeatureLevelVersion)
	}
	m := protocol.Message{From: "b", To: "a", Body: &protocol.FetchRequest{FetchID: 1, ReplicaID: "b", Restand: true, FeatureLevel: 7}}
	at6, err := protocol.AppendMessageAt(nil, m, 6)
	if err != nil {
		t.Fatal(err)
	}
	at7, err := protocol.AppendMessageAt(nil, m, protocol.FeatureLevelVersion)
	if err != nil {
		t.Fatal(err)
	}
	if len(at7) != len(at6)+1 || len(at6) != protocol.EncodedSizeAt(m, 6) || len(at7) != protocol.EncodedSizeAt(m, 7) {
		t.Fatalf("sizes: %d at 6 (EncodedSizeAt %d), %d at 7 (EncodedSizeAt %d)", len(at6), protocol.EncodedSizeAt(m, 6), len(at7), protocol.EncodedSizeAt(m, 7))
	}
	got, err := protocol.DecodeMessage(at7)
	if err != nil {
		t.Fatal(err)
	}
	if f := got.Body.(*protocol.FetchRequest); f.FeatureLevel != 7 || !f.Restand {
		t.Fatalf("decoded %+v, want FeatureLevel 7 and Restand", f)
	}
	// A version-6 frame relabelled 7 lacks the byte: malformed, not a
	// level 0 read from whatever follows.
	short := append([]byte(nil), at6...)
	short[0] = 7
	if _, err := protocol.DecodeMessage(short); !errors.Is(err, protocol.ErrMalformed) {
		t.Fatalf("a version-7 fetch without its level: %v, want ErrMalformed", err)
	}
}
