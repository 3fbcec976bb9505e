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

// TestFetchDurableOffsetNotAtVersion7: a version-7 peer cannot read a
// fetch's durable offset, so it is not encoded at 7 (the bytes are those
// of the fetch without it) and a fetch decoded at 7 has none: its fetch
// offset is durable, as a leader of that release counts it.
func TestFetchDurableOffsetNotAtVersion7(t *testing.T) {
	plain := protocol.Message{From: "b", To: "a", Body: &protocol.FetchRequest{FetchID: 1, ReplicaID: "b", FetchOffset: 9, FeatureLevel: 8}}
	with := protocol.Message{From: "b", To: "a", Body: &protocol.FetchRequest{FetchID: 1, ReplicaID: "b", FetchOffset: 9, FeatureLevel: 8,
		HasDurableOffset: true, DurableOffset: 4}}
	p7, err := protocol.AppendMessageAt(nil, plain, 7)
	if err != nil {
		t.Fatal(err)
	}
	w7, err := protocol.AppendMessageAt(nil, with, 7)
	if err != nil {
		t.Fatal(err)
	}
	if string(p7) != string(w7) || len(w7) != protocol.EncodedSizeAt(with, 7) {
		t.Fatalf("the durable offset changed the version-7 encoding (%d bytes, EncodedSizeAt %d)", len(w7), protocol.EncodedSizeAt(with, 7))
	}
	m, err := protocol.DecodeMessage(w7)
	if err != nil {
		t.Fatal(err)
	}
	if f := m.Body.(*protocol.FetchRequest); f.HasDurableOffset || f.DurableOffset != 0 || f.FetchOffset != 9 {
		t.Fatalf("decoded at 7: %+v, want no durable offset", f)
	}
	if protocol.DurableOffsetVersion <= protocol.FeatureLevelVersion || protocol.FeatureLevelPipelinedFetch < protocol.DurableOffsetVersion {
		t.Fatalf("DurableOffsetVersion %d, FeatureLevelPipelinedFetch %d: the field must come after version 7, and the level no earlier than it",
			protocol.DurableOffsetVersion, protocol.FeatureLevelPipelinedFetch)
	}
}

// TestFetchDurableOffsetAtVersion8: from DurableOffsetVersion on a fetch
// carries its durable offset (9 bytes more than at 7, EncodedSizeAt exact),
// and it reads back as sent, a durable offset of 0 included; a version-7
// frame relabelled 8 is malformed, not a fetch without one.
func TestFetchDurableOffsetAtVersion8(t *testing.T) {
	if protocol.Version < protocol.DurableOffsetVersion {
		t.Fatalf("Version %d is below DurableOffsetVersion %d", protocol.Version, protocol.DurableOffsetVersion)
	}
	for _, c := range []struct {
		has bool
		off uint64
	}{{true, 0}, {true, 4}, {false, 0}} {
		m := protocol.Message{From: "b", To: "a", Body: &protocol.FetchRequest{FetchID: 1, ReplicaID: "b", FetchOffset: 9, FeatureLevel: 8,
			HasDurableOffset: c.has, DurableOffset: c.off}}
		at7, err := protocol.AppendMessageAt(nil, m, 7)
		if err != nil {
			t.Fatal(err)
		}
		at8, err := protocol.AppendMessageAt(nil, m, protocol.DurableOffsetVersion)
		if err != nil {
			t.Fatal(err)
		}
		if len(at8) != len(at7)+9 || len(at8) != protocol.EncodedSizeAt(m, 8) {
			t.Fatalf("sizes: %d at 7, %d at 8 (EncodedSizeAt %d)", len(at7), len(at8), protocol.EncodedSizeAt(m, 8))
		}
		got, err := protocol.DecodeMessage(at8)
		if err != nil {
			t.Fatal(err)
		}
		if f := got.Body.(*protocol.FetchRequest); f.HasDurableOffset != c.has || f.DurableOffset != c.off || f.FetchOffset != 9 || f.FeatureLevel != 8 {
			t.Fatalf("decoded %+v, want durable offset %v %d", f, c.has, c.off)
		}
		short := append([]byte(nil), at7...)
		short[0] = 8
		if _, err := protocol.DecodeMessage(short); !errors.Is(err, protocol.ErrMalformed) {
			t.Fatalf("a version-8 fetch without its durable offset: %v, want ErrMalformed", err)
		}
	}
}
