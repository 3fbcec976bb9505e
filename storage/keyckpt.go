package storage

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"path/filepath"
	"slices"

	"github.com/replog-io/replog/protocol"
)

// KeyCheckpointStore is implemented by the stores that keep the core's key
// checkpoint (docs/protocol.md R76, docs/storage.md section 11): DirStore
// and Memory. The shell saves each one the core hands out in Ready; the
// core reads the newest at New (replica.KeyCheckpointReader) and checks it
// against the log before it uses it, so a store may keep it apart from the
// log, in any order with the log's writes, and lose it at a crash.
type KeyCheckpointStore interface {
	// SaveKeyCheckpoint replaces the stored checkpoint with cp (the store
	// copies cp.Data). Errors: ErrClosed; ErrReadOnly; the file system's.
	SaveKeyCheckpoint(cp protocol.KeyCheckpoint) error
	// KeyCheckpoint returns the stored checkpoint, and whether there is
	// one. A damaged one (DirStore: a torn or foreign file) is none. The
	// Data is the caller's. Errors: ErrClosed; the file system's.
	KeyCheckpoint() (protocol.KeyCheckpoint, bool, error)
}

// KeyCheckpointFileName is the file of a data directory that holds the key
// checkpoint (docs/storage.md section 11). Releases before it ignore it.
const KeyCheckpointFileName = "replog.keys"

const (
	keyCkptTmpName = KeyCheckpointFileName + ".tmp"
	// keyCkptMagic starts the file; keyCkptFileVersion follows it.
	keyCkptMagic       = "RLKC"
	keyCkptFileVersion = 1
	// keyCkptHeader: magic, version, offset, epoch, data length.
	keyCkptHeader = 4 + 1 + 8 + 8 + 4
	// maxKeyCkptData bounds the data a file may claim (a length beyond it
	// is damage, not a reason to allocate).
	maxKeyCkptData = 1 << 30
)

// encodeKeyCkptFile is the file's contents: the header, the data, and a
// CRC-32C of both, big-endian.
func encodeKeyCkptFile(cp protocol.KeyCheckpoint) []byte {
	b := make([]byte, 0, keyCkptHeader+len(cp.Data)+4)
	b = append(b, keyCkptMagic...)
	b = append(b, keyCkptFileVersion)
	b = binary.BigEndian.AppendUint64(b, cp.Offset)
	b = binary.BigEndian.AppendUint64(b, cp.Epoch)
	b = binary.BigEndian.AppendUint32(b, uint32(len(cp.Data)))
	b = append(b, cp.Data...)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// errKeyCkptFile: the file is not one whole checkpoint of this version.
var errKeyCkptFile = errors.New("not a key checkpoint file of this version")

func decodeKeyCkptFile(b []byte) (protocol.KeyCheckpoint, error) {
	if len(b) < keyCkptHeader+4 || string(b[:4]) != keyCkptMagic || b[4] != keyCkptFileVersion {
		return protocol.KeyCheckpoint{}, errKeyCkptFile
	}
	n := binary.BigEndian.Uint32(b[21:25])
	if n > maxKeyCkptData || len(b) != keyCkptHeader+int(n)+4 {
		return protocol.KeyCheckpoint{}, errKeyCkptFile
	}
	body := b[:len(b)-4]
	if crc32.Checksum(body, castagnoli) != binary.BigEndian.Uint32(b[len(b)-4:]) {
		return protocol.KeyCheckpoint{}, errKeyCkptFile
	}
	return protocol.KeyCheckpoint{
		Offset: binary.BigEndian.Uint64(b[5:13]),
		Epoch:  binary.BigEndian.Uint64(b[13:21]),
		Data:   slices.Clone(body[keyCkptHeader:]),
	}, nil
}

// SaveKeyCheckpoint implements KeyCheckpointStore: the file is written
// whole under a temporary name and renamed over replog.keys, not synced.
// A crash may leave the previous checkpoint, none, or (on a file system
// that does not order the data before the rename) a torn file, which its
// checksum finds and KeyCheckpoint reports as none: a lost checkpoint
// costs a restart a longer replay, never a wrong table, and a sync here
// would cost the node's loop a disk flush for nothing the log needs.
func (d *DirStore) SaveKeyCheckpoint(cp protocol.KeyCheckpoint) error {
	return d.writeSideFile("key checkpoint", KeyCheckpointFileName, keyCkptTmpName, encodeKeyCkptFile(cp))
}

// KeyCheckpoint implements KeyCheckpointStore, reading replog.keys.
func (d *DirStore) KeyCheckpoint() (protocol.KeyCheckpoint, bool, error) {
	b, ok, err := d.readSideFile("key checkpoint", KeyCheckpointFileName, keyCkptHeader+maxKeyCkptData+4)
	if !ok || err != nil {
		return protocol.KeyCheckpoint{}, false, err
	}
	cp, err := decodeKeyCkptFile(b)
	if err != nil {
		d.log.Warn("key checkpoint file ignored (torn by a crash, or not this release's)", "path", filepath.Join(d.dir, KeyCheckpointFileName), "error", err)
		return protocol.KeyCheckpoint{}, false, nil
	}
	return cp, true, nil
}

// SaveKeyCheckpoint implements KeyCheckpointStore. The checkpoint is
// durable at once, in either mode, and a Crash keeps it: the core checks
// it against the log, so the deferred mode need not order it with the
// writes (a checkpoint whose entries a crash lost is one of another log).
func (m *Memory) SaveKeyCheckpoint(cp protocol.KeyCheckpoint) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	cp.Data = slices.Clone(cp.Data)
	m.keyCkpt = &cp
	return nil
}

// KeyCheckpoint implements KeyCheckpointStore.
func (m *Memory) KeyCheckpoint() (protocol.KeyCheckpoint, bool, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return protocol.KeyCheckpoint{}, false, ErrClosed
	}
	if m.keyCkpt == nil {
		return protocol.KeyCheckpoint{}, false, nil
	}
	cp := *m.keyCkpt
	cp.Data = slices.Clone(cp.Data)
	return cp, true, nil
}
