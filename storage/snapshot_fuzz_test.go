package storage

import (
	"bytes"
	"testing"
)

// FuzzSnapshotHeader: the header decoder never panics, and whatever it
// accepts is exactly the encoding of what it returns (no two byte strings
// decode to one header, so a damaged header is never read as another).
func FuzzSnapshotHeader(f *testing.F) {
	f.Add(snapshotHeader{}.encode())
	f.Add(snapshotHeader{offset: 1 << 40, epoch: 7, size: 123456, timeMs: 1764600000000, crc: 0xdeadbeef}.encode())
	f.Add(snapshotHeader{offset: ^uint64(0), epoch: ^uint64(0), size: maxSnapshotSize, timeMs: -1, crc: ^uint32(0)}.encode())
	f.Add([]byte(snapshotMagic))
	f.Add(append(snapshotHeader{offset: 3}.encode(), 1, 2, 3))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := decodeSnapshotHeader(b)
		if err != nil {
			return
		}
		if h.size < 0 || h.size > maxSnapshotSize {
			t.Fatalf("accepted a body size of %d", h.size)
		}
		if enc := h.encode(); !bytes.Equal(enc, b[:SnapshotHeaderSize]) {
			t.Fatalf("decoded %+v from %x, which encodes as %x", h, b[:SnapshotHeaderSize], enc)
		}
	})
}

// A header with any one byte changed is refused (its checksum covers every
// byte, its magic and version are checked).
func TestSnapshotHeaderEveryByteCounts(t *testing.T) {
	good := snapshotHeader{offset: 42, epoch: 3, size: 99, timeMs: 1764600000000, crc: 0x12345678}.encode()
	if h, err := decodeSnapshotHeader(good); err != nil || h.offset != 42 || h.epoch != 3 || h.size != 99 || h.crc != 0x12345678 || h.timeMs != 1764600000000 {
		t.Fatalf("round trip: %+v, %v", h, err)
	}
	for i := range good {
		b := bytes.Clone(good)
		b[i] ^= 0x20
		if h, err := decodeSnapshotHeader(b); err == nil {
			t.Errorf("byte %d changed: decoded %+v", i, h)
		}
	}
	if _, err := decodeSnapshotHeader(good[:SnapshotHeaderSize-1]); err == nil {
		t.Error("a short header decoded")
	}
}
