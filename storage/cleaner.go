package storage

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"path/filepath"
	"slices"

	"github.com/replog-io/replog/protocol"
)

// CleanerCheckpointStore is implemented by the stores that keep a
// compacted log's cleaner checkpoint (docs/storage.md 13): where the last
// complete compaction pass left the log compacted, and what it learnt of
// each sealed segment below that point, so that the next pass reads only
// what changed since.
type CleanerCheckpointStore interface {
	// SaveCleanerCheckpoint replaces the stored checkpoint with ck (the
	// store copies it). Errors: ErrClosed; ErrReadOnly (DirStore); the
	// file system's.
	SaveCleanerCheckpoint(ck protocol.CleanerCheckpoint) error
	// CleanerCheckpoint returns the stored checkpoint, and whether there
	// is one (a torn, damaged or oversized one is none). The checkpoint is
	// the caller's. Errors: ErrClosed; the file system's.
	CleanerCheckpoint() (protocol.CleanerCheckpoint, bool, error)
}

// CleanerCheckpointFileName is the file of a data directory that holds
// the cleaner checkpoint (docs/storage.md 13). Releases before it ignore
// it.
const CleanerCheckpointFileName = "replog.cleaner"

const (
	cleanerTmpName = CleanerCheckpointFileName + ".tmp"
	// cleanerMagic starts the file; cleanerFileVersion follows it.
	cleanerMagic       = "RLCC"
	cleanerFileVersion = 1
	// maxCleanerFile bounds the file read (a larger one is damage).
	maxCleanerFile = 1 << 30
)

// encodeCleanerFile is the file's contents: magic, version, uvarint
// point, uvarint segment count, per segment uvarint base, uvarint length
// (end - base), varint tombstone time, uvarint key count and the keys'
// hashes as 8-byte big-endian; then a CRC-32C of all that, big-endian.
func encodeCleanerFile(ck protocol.CleanerCheckpoint) []byte {
	n := 16
	for _, s := range ck.Segments {
		n += 32 + 8*len(s.Keys)
	}
	b := make([]byte, 0, n)
	b = append(b, cleanerMagic...)
	b = append(b, cleanerFileVersion)
	b = binary.AppendUvarint(b, ck.Point)
	b = binary.AppendUvarint(b, uint64(len(ck.Segments)))
	for _, s := range ck.Segments {
		b = binary.AppendUvarint(b, s.Base)
		b = binary.AppendUvarint(b, s.End-s.Base)
		b = binary.AppendVarint(b, s.Tombstone)
		b = binary.AppendUvarint(b, uint64(len(s.Keys)))
		for _, k := range s.Keys {
			b = binary.BigEndian.AppendUint64(b, k)
		}
	}
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// errCleanerFile: the file is not one whole cleaner checkpoint of this
// version.
var errCleanerFile = errors.New("not a cleaner checkpoint file of this version")

func decodeCleanerFile(b []byte) (protocol.CleanerCheckpoint, error) {
	var ck protocol.CleanerCheckpoint
	if len(b) < 5+4 || string(b[:4]) != cleanerMagic || b[4] != cleanerFileVersion {
		return ck, errCleanerFile
	}
	body := b[:len(b)-4]
	if crc32.Checksum(body, castagnoli) != binary.BigEndian.Uint32(b[len(b)-4:]) {
		return ck, errCleanerFile
	}
	r := body[5:]
	uv := func() (uint64, bool) {
		v, n := binary.Uvarint(r)
		if n <= 0 {
			return 0, false
		}
		r = r[n:]
		return v, true
	}
	var ok bool
	if ck.Point, ok = uv(); !ok {
		return ck, errCleanerFile
	}
	count, ok := uv()
	if !ok || count > uint64(len(r)) {
		return ck, errCleanerFile
	}
	var prev uint64
	for range count {
		var s protocol.SegmentSummary
		var length, keys uint64
		var okB, okL bool
		s.Base, okB = uv()
		length, okL = uv()
		t, n := binary.Varint(r)
		if !okB || !okL || n <= 0 || length == 0 || s.Base < prev || s.Base+length < s.Base {
			return ck, errCleanerFile
		}
		r = r[n:]
		s.End, s.Tombstone, prev = s.Base+length, t, s.Base+length
		if keys, ok = uv(); !ok || keys > uint64(len(r))/8 {
			return ck, errCleanerFile
		}
		s.Keys = make([]uint64, keys)
		for i := range s.Keys {
			s.Keys[i] = binary.BigEndian.Uint64(r)
			r = r[8:]
		}
		ck.Segments = append(ck.Segments, s)
	}
	if len(r) != 0 {
		return ck, errCleanerFile
	}
	return ck, nil
}

// SaveCleanerCheckpoint implements CleanerCheckpointStore: the file is
// written whole under a temporary name and renamed over replog.cleaner,
// not synced. A crash may leave the previous checkpoint, none, or a torn
// file, which its checksum finds and CleanerCheckpoint reports as none.
// None costs a full pass. The previous one is safe too: the segments'
// rewrites it does not know of were synced before it was replaced, and a
// rewrite only removes entries, so the previous summaries still hold every
// key their segments hold.
func (d *DirStore) SaveCleanerCheckpoint(ck protocol.CleanerCheckpoint) error {
	return d.writeSideFile("cleaner checkpoint", CleanerCheckpointFileName, cleanerTmpName, encodeCleanerFile(ck))
}

// CleanerCheckpoint implements CleanerCheckpointStore, reading
// replog.cleaner.
func (d *DirStore) CleanerCheckpoint() (protocol.CleanerCheckpoint, bool, error) {
	b, ok, err := d.readSideFile("cleaner checkpoint", CleanerCheckpointFileName, maxCleanerFile)
	if !ok || err != nil {
		return protocol.CleanerCheckpoint{}, false, err
	}
	ck, err := decodeCleanerFile(b)
	if err != nil {
		d.log.Warn("cleaner checkpoint file ignored (torn by a crash, or not this release's): the next compaction pass reads the whole log", "path", filepath.Join(d.dir, CleanerCheckpointFileName), "error", err)
		return protocol.CleanerCheckpoint{}, false, nil
	}
	return ck, true, nil
}

// SaveCleanerCheckpoint implements CleanerCheckpointStore. The checkpoint
// is durable at once and a Crash keeps it, as the Dir's file may outlive
// what it describes: the rewrites it summarises are durable before it is
// saved (Compact's).
func (m *Memory) SaveCleanerCheckpoint(ck protocol.CleanerCheckpoint) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	m.cleaner = cloneCleaner(ck)
	return nil
}

// CleanerCheckpoint implements CleanerCheckpointStore.
func (m *Memory) CleanerCheckpoint() (protocol.CleanerCheckpoint, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return protocol.CleanerCheckpoint{}, false, ErrClosed
	}
	if m.cleaner == nil {
		return protocol.CleanerCheckpoint{}, false, nil
	}
	return *cloneCleaner(*m.cleaner), true, nil
}

// cloneCleaner returns a copy of ck sharing nothing with it.
func cloneCleaner(ck protocol.CleanerCheckpoint) *protocol.CleanerCheckpoint {
	c := protocol.CleanerCheckpoint{Point: ck.Point, Segments: slices.Clone(ck.Segments)}
	for i := range c.Segments {
		c.Segments[i].Keys = slices.Clone(c.Segments[i].Keys)
	}
	return &c
}

var (
	_ CleanerCheckpointStore = (*DirStore)(nil)
	_ CleanerCheckpointStore = (*Memory)(nil)
)
