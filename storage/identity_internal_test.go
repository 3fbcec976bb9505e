package storage

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/replog-io/replog/protocol"
)

func TestIdentityRoundTrip(t *testing.T) {
	for _, r := range []identityRecord{
		{Identity: Identity{ClusterID: "c", NodeID: "n", DirectoryID: "d"}},
		{Identity: Identity{ClusterID: "a b\nc", NodeID: "\xff\x00\"", DirectoryID: strings.Repeat("x", 300)}, ready: true},
	} {
		got, err := decodeIdentity(encodeIdentity(r))
		if err != nil || got != r {
			t.Fatalf("round trip of %+v: %+v, %v", r, got, err)
		}
	}
}

// Every single-byte change of an identity file is refused.
func TestIdentityEveryByteFlipDetected(t *testing.T) {
	b := encodeIdentity(identityRecord{Identity: Identity{ClusterID: "c1", NodeID: "n1", DirectoryID: "0123456789abcdef0123456789abcdef"}, ready: true})
	for i := range b {
		for _, x := range []byte{0x01, 0x20, 0x80} {
			c := bytes.Clone(b)
			c[i] ^= x
			if r, err := decodeIdentity(c); err == nil {
				t.Fatalf("byte %d ^ %#x accepted: %+v", i, x, r)
			}
		}
	}
	if _, err := decodeIdentity(bytes.Replace(b, []byte("version 1"), []byte("version 2"), 1)); err == nil {
		t.Fatal("another version accepted")
	}
}

func FuzzDecodeIdentity(f *testing.F) {
	f.Add(encodeIdentity(identityRecord{Identity: Identity{ClusterID: "c1", NodeID: "n1", DirectoryID: "0123456789abcdef0123456789abcdef"}, ready: true}))
	f.Add(encodeIdentity(identityRecord{Identity: Identity{ClusterID: "x\ny", NodeID: "\x00", DirectoryID: "d"}}))
	f.Add([]byte("replog data directory identity\nversion 1\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeIdentity(b)
		if err != nil {
			return
		}
		// Whatever decodes is exactly what encodeIdentity writes for it.
		if again := encodeIdentity(r); !bytes.Equal(again, b) {
			t.Fatalf("decoded %+v from %q, which encodes as %q", r, b, again)
		}
		if r.ClusterID == "" || r.NodeID == "" || r.DirectoryID == "" {
			t.Fatalf("decoded an empty ID: %+v", r)
		}
	})
}

func FuzzIdentityRoundTrip(f *testing.F) {
	f.Add("c1", "n1", "0123456789abcdef0123456789abcdef", true)
	f.Fuzz(func(t *testing.T, c, n, d string, ready bool) {
		if c == "" || n == "" || d == "" {
			return
		}
		r := identityRecord{Identity: Identity{ClusterID: c, NodeID: n, DirectoryID: d}, ready: ready}
		got, err := decodeIdentity(encodeIdentity(r))
		if len(encodeIdentity(r)) > maxIdentitySize {
			return
		}
		if err != nil || got != r {
			t.Fatalf("round trip of %+v: %+v, %v", r, got, err)
		}
	})
}

// fuzzTemplate returns the active file and the identity file of a small
// data directory in one segment (a two-level entries tree, free pages, a
// deleted prefix).
func fuzzTemplate(f testing.TB) (data, ident []byte) {
	dir := f.TempDir()
	d, _, err := OpenDir(dir, testID, DirOptions{NoSync: true, SegmentBytes: oneSegment})
	if err != nil {
		f.Fatal(err)
	}
	for i := 0; i < 600; i += 100 {
		es := make([]protocol.Entry, 100)
		for j := range es {
			es[j] = protocol.Entry{Offset: uint64(i + j), Epoch: 1, Type: protocol.EntryData, Data: bytes.Repeat([]byte{byte(j)}, 40)}
		}
		if err := d.Append(es); err != nil {
			f.Fatal(err)
		}
	}
	if err := d.TruncateSuffix(550); err != nil {
		f.Fatal(err)
	}
	if err := d.DeletePrefix(100); err != nil {
		f.Fatal(err)
	}
	if err := d.SetQuorumState(protocol.QuorumState{Epoch: 1, VotedFor: "n"}); err != nil {
		f.Fatal(err)
	}
	if st := d.Stats(); st.Rolls != 0 {
		f.Fatalf("the template rolled: %+v", st)
	}
	if err := d.Close(); err != nil {
		f.Fatal(err)
	}
	path := filepath.Join(dir, DataFileName)
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, PreLoadFreelist: true})
	if err != nil {
		f.Fatal(err)
	}
	free := db.Stats().FreePageN
	db.Close()
	if free == 0 {
		f.Fatal("the template has no free pages")
	}
	if data, err = os.ReadFile(path); err != nil {
		f.Fatal(err)
	}
	if ident, err = os.ReadFile(filepath.Join(dir, IdentityFileName)); err != nil {
		f.Fatal(err)
	}
	return data, ident
}

// FuzzOpenDamaged patches a real active file (bytes written at an offset,
// then possibly truncated) and opens its directory: OpenDir either fails
// with ErrCorrupt or succeeds, and then the verification that follows it,
// and every read, either passes or fails with ErrCorrupt. A panic or fault
// anywhere (bbolt's free-list walk runs in a goroutine of its own, where a
// panic kills the fuzzing process) is a failure.
func FuzzOpenDamaged(f *testing.F) {
	tmpl, ident := fuzzTemplate(f)
	f.Add(uint32(0), []byte{0}, uint32(0))
	f.Add(uint32(4096*5+10), []byte{0xff, 0xff}, uint32(0))
	f.Add(uint32(4096*7+20), []byte{0xff, 0xff, 0xff, 0}, uint32(0))
	f.Add(uint32(4096*3), []byte{4}, uint32(0))
	f.Add(uint32(0), []byte{}, uint32(len(tmpl)/2))
	f.Fuzz(func(t *testing.T, off uint32, patch []byte, truncTo uint32) {
		data := bytes.Clone(tmpl)
		if int(off) < len(data) {
			copy(data[off:], patch)
		}
		if truncTo > 0 && int(truncTo) < len(data) {
			data = data[:truncTo]
		}
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, IdentityFileName), ident, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, DataFileName), data, 0o600); err != nil {
			t.Fatal(err)
		}
		d, _, err := OpenDir(dir, testID, DirOptions{NoSync: true, SegmentBytes: oneSegment})
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("OpenDir: %v, not ErrCorrupt", err)
			}
			return
		}
		defer d.Close()
		if err := d.WaitVerified(context.Background()); err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("WaitVerified: %v", err)
		}
		if _, err := d.Entries(d.LogStart(), 0, 1<<30); err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Entries: %v", err)
		}
		// A write must not crash either (its error is the store's to report).
		_ = d.Append([]protocol.Entry{{Offset: d.LEO(), Epoch: max(d.LastEpoch(), 1), Type: protocol.EntryData, Data: []byte("x")}})
	})
}
