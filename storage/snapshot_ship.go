package storage

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"

	"time"
)

// Snapshot shipping (docs/storage.md section 12, docs/protocol.md R92-R95):
// a leader reads chunks of a stored snapshot for a follower (ReadChunk);
// the follower writes them to one partial file (Receive), which survives a
// restart so that a transfer resumes at its size, and installs it once
// whole and its checksum verified (Install).

// snapshotPartialName is the file of a snapshot being received: a
// snapshot header (the sender's offset, epoch, size and body CRC; time 0)
// then the body bytes received so far. It is neither a snapshot file nor
// a temporary one: OpenSnapshots leaves it for the transfer to resume.
const snapshotPartialName = "incoming.partial"

// ErrPartialMismatch: a chunk does not continue the partial snapshot
// (another snapshot, or a position other than the bytes held): the
// receiver starts over from position 0.
var ErrPartialMismatch = errors.New("replog: chunk does not continue the partial snapshot")

// PartialSnapshot describes a snapshot being received: the snapshot
// (Offset, Epoch, Size, CRC, as its sender stores it) and how many bytes of
// its body are held (Have).
type PartialSnapshot struct {
	Offset uint64
	Epoch  uint64
	Size   int64
	CRC    uint32
	Have   int64
}

// ReadChunk returns up to max bytes of the body of the stored snapshot
// info names, from byte pos: fewer only at the body's end (none at pos =
// Size). The bytes are not checked against the body's CRC here: the
// receiver checks the whole body before it installs it. Errors:
// ErrClosed; ErrNoSnapshot (no longer stored, or replaced by a save at its
// offset); ErrOutOfRange (pos beyond the body); ErrCorrupt (its
// header is damaged); the file system's.
func (s *SnapshotStore) ReadChunk(info SnapshotInfo, pos int64, max int) ([]byte, error) {
	if pos < 0 || pos > info.Size {
		return nil, fmt.Errorf("%w: chunk at %d of a %d-byte snapshot", ErrOutOfRange, pos, info.Size)
	}
	r, err := s.Open(info) // checks it is still the stored one
	if err != nil {
		return nil, err
	}
	defer r.Close()
	f := r.(*snapshotReader).f
	buf := make([]byte, min(int64(max), info.Size-pos))
	n, err := f.ReadAt(buf, SnapshotHeaderSize+pos)
	if n == len(buf) {
		return buf, nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = fmt.Errorf("%w: snapshot %s ends early", ErrCorrupt, info.Path)
	}
	return nil, fmt.Errorf("replog: read snapshot chunk: %w", err)
}

// Partial returns the partial snapshot held, if any. A partial file whose
// header is damaged (a crash while it was begun) is removed: the transfer
// starts over.
func (s *SnapshotStore) Partial() (PartialSnapshot, bool) {
	s.recvMu.Lock()
	defer s.recvMu.Unlock()
	return s.partial()
}

func (s *SnapshotStore) partial() (PartialSnapshot, bool) {
	path := filepath.Join(s.dir, snapshotPartialName)
	f, err := os.Open(path)
	if err != nil {
		return PartialSnapshot{}, false
	}
	defer f.Close()
	var hb [SnapshotHeaderSize]byte
	h, err := snapshotHeader{}, error(nil)
	if _, err = io.ReadFull(f, hb[:]); err == nil {
		h, err = decodeSnapshotHeader(hb[:])
	}
	st, serr := f.Stat()
	if err != nil || serr != nil || st.Size()-SnapshotHeaderSize > h.size {
		_ = os.Remove(path)
		return PartialSnapshot{}, false
	}
	return PartialSnapshot{Offset: h.offset, Epoch: h.epoch, Size: h.size, CRC: h.crc, Have: st.Size() - SnapshotHeaderSize}, true
}

// Receive writes data, the bytes of snapshot p's body (p.Have is ignored)
// from byte pos, to the partial file and returns the bytes now held. At
// pos 0 it starts the partial over (whatever was held before is
// dropped); otherwise the chunk must continue the partial held: the same
// snapshot, pos its size (else ErrPartialMismatch, nothing written).
// Chunks are not synced: Install syncs the whole, and a crash that tears
// the partial leaves bytes its checksum refuses, and a transfer started
// over. Errors: ErrClosed; ErrPartialMismatch (also for a chunk that runs
// past p.Size); the file system's.
func (s *SnapshotStore) Receive(p PartialSnapshot, pos int64, data []byte) (int64, error) {
	s.recvMu.Lock()
	defer s.recvMu.Unlock()
	if s.isClosed() {
		return 0, ErrClosed
	}
	if pos < 0 || p.Size < 0 || pos+int64(len(data)) > p.Size {
		return 0, fmt.Errorf("%w: %d bytes at %d of a %d-byte snapshot", ErrPartialMismatch, len(data), pos, p.Size)
	}
	path := filepath.Join(s.dir, snapshotPartialName)
	var f *os.File
	var err error
	if pos == 0 {
		if f, err = os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600); err != nil {
			return 0, fmt.Errorf("replog: receive snapshot: %w", err)
		}
		h := snapshotHeader{offset: p.Offset, epoch: p.Epoch, size: p.Size, crc: p.CRC}
		if _, err := f.Write(h.encode()); err != nil {
			_ = f.Close()
			return 0, fmt.Errorf("replog: receive snapshot: %w", err)
		}
	} else {
		held, ok := s.partial()
		if !ok || held.Offset != p.Offset || held.Epoch != p.Epoch || held.Size != p.Size || held.CRC != p.CRC || held.Have != pos {
			return 0, fmt.Errorf("%w: chunk at %d of (%d, %d), held %+v", ErrPartialMismatch, pos, p.Offset, p.Epoch, held)
		}
		if f, err = os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0o600); err != nil {
			return 0, fmt.Errorf("replog: receive snapshot: %w", err)
		}
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, fmt.Errorf("replog: receive snapshot: %w", err)
	}
	return pos + int64(len(data)), nil
}

// Install makes the whole partial snapshot a stored one: it reads the
// body through and checks its size and CRC against the sender's (a
// mismatch removes the partial: ErrCorrupt), stamps the header with the
// time, syncs the file, renames it into place and syncs the directory,
// as Save does; the store then keeps the Keep of highest offset. Errors:
// ErrClosed; ErrNoSnapshot (no partial, or not whole yet); ErrCorrupt; the
// file system's.
func (s *SnapshotStore) Install() (SnapshotInfo, error) {
	s.saveMu.Lock()
	defer s.saveMu.Unlock()
	s.recvMu.Lock()
	defer s.recvMu.Unlock()
	if s.isClosed() {
		return SnapshotInfo{}, ErrClosed
	}
	p, ok := s.partial()
	if !ok || p.Have != p.Size {
		return SnapshotInfo{}, fmt.Errorf("%w: no whole snapshot received (%+v)", ErrNoSnapshot, p)
	}
	path := filepath.Join(s.dir, snapshotPartialName)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return SnapshotInfo{}, fmt.Errorf("replog: install snapshot: %w", err)
	}
	defer f.Close()
	crc := crc32.New(castagnoli)
	if _, err := io.Copy(crc, io.NewSectionReader(f, SnapshotHeaderSize, p.Size)); err != nil {
		return SnapshotInfo{}, fmt.Errorf("replog: install snapshot: %w", err)
	}
	if got := crc.Sum32(); got != p.CRC {
		_ = f.Close()
		_ = os.Remove(path)
		return SnapshotInfo{}, fmt.Errorf("%w: received snapshot at offset %d: body checksum %08x, the sender's %08x", ErrCorrupt, p.Offset, got, p.CRC)
	}
	now := time.Now()
	h := snapshotHeader{offset: p.Offset, epoch: p.Epoch, size: p.Size, timeMs: now.UnixMilli(), crc: p.CRC}
	if _, err := f.WriteAt(h.encode(), 0); err != nil {
		return SnapshotInfo{}, fmt.Errorf("replog: install snapshot: %w", err)
	}
	if !s.opts.NoSync {
		if err := f.Sync(); err != nil {
			return SnapshotInfo{}, fmt.Errorf("replog: install snapshot: %w", err)
		}
	}
	if err := f.Close(); err != nil {
		return SnapshotInfo{}, fmt.Errorf("replog: install snapshot: %w", err)
	}
	final := filepath.Join(s.dir, snapshotFileName(p.Offset))
	if err := os.Rename(path, final); err != nil {
		return SnapshotInfo{}, fmt.Errorf("replog: install snapshot: %w", err)
	}
	if !s.opts.NoSync {
		if err := SyncDir(s.dir); err != nil {
			_ = os.Remove(final)
			return SnapshotInfo{}, fmt.Errorf("replog: install snapshot: %w", err)
		}
	}
	info := SnapshotInfo{Offset: p.Offset, Epoch: p.Epoch, Size: p.Size, CRC: p.CRC, Time: time.UnixMilli(h.timeMs), Path: final}
	s.add(info)
	return info, nil
}

// DropPartial removes the partial snapshot, if any (a transfer that will
// not resume it).
func (s *SnapshotStore) DropPartial() {
	s.recvMu.Lock()
	defer s.recvMu.Unlock()
	_ = os.Remove(filepath.Join(s.dir, snapshotPartialName))
}
