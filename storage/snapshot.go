package storage

import (
	"bufio"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// SnapshotDirName is the subdirectory of a data directory that holds the
// service's snapshots (docs/storage.md section 12). Releases before it
// ignore it.
const SnapshotDirName = "snapshots"

// DefaultSnapshotsKept is SnapshotOptions.Keep's default: the newest
// snapshot and one spare.
const DefaultSnapshotsKept = 2

// ErrNoSnapshot: the snapshot store holds no valid snapshot.
var ErrNoSnapshot = errors.New("replog: no snapshot")

// SnapshotOptions configures OpenSnapshots. The zero value is usable:
// zero fields take the defaults named on each.
type SnapshotOptions struct {
	// Keep is how many snapshots the store keeps: after each Save it
	// deletes all but the Keep of highest offset (and any damaged file).
	// Default DefaultSnapshotsKept (2); negative is invalid.
	Keep int
	// Counts, if not nil, says whether a snapshot counts toward Keep: the
	// owner's test that it describes its log (the root's R88). A save then
	// keeps the Keep of highest offset that count and every snapshot
	// above the lowest of them, counted or not, and deletes the rest: a
	// snapshot that does not count is never what pushes one that does out
	// of the store, and one that may count later (above the log's end for
	// now) is not deleted while it is above them. Called from Save, with
	// the store's lock held: it must not call the store. Default nil:
	// every snapshot counts.
	Counts func(SnapshotInfo) bool
	// NoSync skips the fsyncs of a snapshot file and of the directory
	// (DirOptions.NoSync's meaning: for tests only). Default false.
	NoSync bool
	// Logger receives the store's log lines (damaged files, leftovers of
	// a crash). Default: a null logger. Used as given.
	Logger hclog.Logger
}

// EnsureDefaults sets o's zero fields to their defaults.
func (o *SnapshotOptions) EnsureDefaults() {
	if o.Keep == 0 {
		o.Keep = DefaultSnapshotsKept
	}
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
}

// Validate reports the first invalid field of o, as an error wrapping
// ErrInvalidOptions that names it. It does not modify o.
func (o SnapshotOptions) Validate() error {
	if o.Keep < 0 {
		return fmt.Errorf("%w: SnapshotOptions.Keep is negative (%d)", ErrInvalidOptions, o.Keep)
	}
	return nil
}

// SnapshotInfo describes one stored snapshot.
type SnapshotInfo struct {
	// Offset is the offset the state is of: it reflects the entries below
	// Offset, and a reader restoring it goes on from Offset.
	Offset uint64
	// Epoch is the epoch of the log's entry at Offset-1 (0 when Offset is
	// 0): with Offset, what identifies the log prefix the state was built
	// from (as the key checkpoint's tag does, docs/protocol.md R76).
	Epoch uint64
	// Size is the body's length in bytes (the header not counted).
	Size int64
	// CRC is the CRC-32C (Castagnoli) of the body.
	CRC uint32
	// Time is when the snapshot was saved, to the millisecond.
	Time time.Time
	// Path is the snapshot's file.
	Path string
}

// The snapshot file: a fixed header, then the body as the service wrote
// it. The header holds magic, version, three zero bytes, the offset, the
// epoch, the body's size, the save time (ms since the Unix epoch; all
// 8 bytes big-endian), the body's CRC-32C and a CRC-32C of the header's
// preceding bytes (4 bytes each, big-endian). The header's own checksum
// lets a damaged header be told apart from a damaged body without
// reading it, and bounds what a size field can make the reader expect.
const (
	snapshotMagic   = "RLSN"
	snapshotVersion = 1
	// SnapshotHeaderSize is the snapshot file's header length.
	SnapshotHeaderSize = 4 + 1 + 3 + 8 + 8 + 8 + 8 + 4 + 4
	snapshotSuffix     = ".snap"
	snapshotPrefix     = "snapshot-"
	snapshotTmpSuffix  = ".tmp"
	// maxSnapshotSize bounds the body size a header may claim: beyond it
	// the header is damage, not a size.
	maxSnapshotSize = 1 << 62
	// snapshotBufSize is the buffer between the service's writes and the
	// file: writes of a few bytes each do not each cost a system call.
	snapshotBufSize = 256 << 10
)

// snapshotHeader is the decoded header of a snapshot file.
type snapshotHeader struct {
	offset, epoch uint64
	size          int64
	timeMs        int64
	crc           uint32
}

func (h snapshotHeader) encode() []byte {
	b := make([]byte, 0, SnapshotHeaderSize)
	b = append(b, snapshotMagic...)
	b = append(b, snapshotVersion, 0, 0, 0)
	b = binary.BigEndian.AppendUint64(b, h.offset)
	b = binary.BigEndian.AppendUint64(b, h.epoch)
	b = binary.BigEndian.AppendUint64(b, uint64(h.size))
	b = binary.BigEndian.AppendUint64(b, uint64(h.timeMs))
	b = binary.BigEndian.AppendUint32(b, h.crc)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// errSnapshotHeader: the bytes are not a snapshot header of this version.
var errSnapshotHeader = errors.New("not a snapshot header of this version")

// decodeSnapshotHeader decodes the first SnapshotHeaderSize bytes of b.
func decodeSnapshotHeader(b []byte) (snapshotHeader, error) {
	if len(b) < SnapshotHeaderSize {
		return snapshotHeader{}, fmt.Errorf("%w: %d bytes, want %d", errSnapshotHeader, len(b), SnapshotHeaderSize)
	}
	b = b[:SnapshotHeaderSize]
	if string(b[:4]) != snapshotMagic || b[4] != snapshotVersion || b[5] != 0 || b[6] != 0 || b[7] != 0 {
		return snapshotHeader{}, fmt.Errorf("%w: bad magic or version", errSnapshotHeader)
	}
	if got, want := crc32.Checksum(b[:SnapshotHeaderSize-4], castagnoli), binary.BigEndian.Uint32(b[SnapshotHeaderSize-4:]); got != want {
		return snapshotHeader{}, fmt.Errorf("%w: header checksum %08x, stored %08x", errSnapshotHeader, got, want)
	}
	h := snapshotHeader{
		offset: binary.BigEndian.Uint64(b[8:16]),
		epoch:  binary.BigEndian.Uint64(b[16:24]),
		timeMs: int64(binary.BigEndian.Uint64(b[32:40])),
		crc:    binary.BigEndian.Uint32(b[40:44]),
	}
	size := binary.BigEndian.Uint64(b[24:32])
	if size > maxSnapshotSize {
		return snapshotHeader{}, fmt.Errorf("%w: body size %d", errSnapshotHeader, size)
	}
	h.size = int64(size)
	return h, nil
}

// snapshotFileName is the file of the snapshot at offset: the offset in 20
// digits, so that names sort as offsets do.
func snapshotFileName(offset uint64) string {
	return fmt.Sprintf("%s%020d%s", snapshotPrefix, offset, snapshotSuffix)
}

// parseSnapshotFileName returns the offset a snapshot file's name gives.
func parseSnapshotFileName(name string) (uint64, bool) {
	s, ok := strings.CutPrefix(name, snapshotPrefix)
	if !ok {
		return 0, false
	}
	s, ok = strings.CutSuffix(s, snapshotSuffix)
	if !ok || len(s) != 20 {
		return 0, false
	}
	off, err := strconv.ParseUint(s, 10, 64)
	return off, err == nil
}

// snapshotHook, when set by a test, is called at the stages of a Save
// ("write": a chunk of the body reached the file; "header": the header is
// written, the file not yet synced; "synced": the file is synced, not yet
// renamed; "renamed": it is in place, the directory not yet synced;
// "pruned": an older snapshot was deleted), so a test can kill the
// process there.
var snapshotHook func(stage string)

func atSnapshotStage(stage string) {
	if snapshotHook != nil {
		snapshotHook(stage)
	}
}

// SnapshotStore keeps a service's snapshots of its state in a directory
// (a data directory's SnapshotDirName): each one a file written whole
// under a temporary name, synced, renamed into place and its directory
// synced, so that a crash leaves every snapshot Save returned, and at
// most a temporary file, which the next open removes. The store keeps
// the Keep of highest offset. It is not part of the log: the log's
// transactions and journal never wait for it, and it never waits for
// them. All methods are safe for concurrent use; Saves run one at a time.
type SnapshotStore struct {
	dir  string
	opts SnapshotOptions

	// saveMu serialises Save and Install (and Close, which waits for one
	// under way).
	saveMu sync.Mutex
	// recvMu serialises the partial snapshot's writes (snapshot_ship.go).
	recvMu sync.Mutex
	// mu guards the fields below.
	mu      sync.Mutex
	list    []SnapshotInfo // valid snapshots, highest offset first
	damaged []string       // files found damaged (at open or read since), not yet deleted
	closed  bool
}

// OpenSnapshots opens (creating it if missing) the snapshot directory dir
// and checks every snapshot file in it whole: header, size and the body's
// checksum. A damaged file (a torn or corrupt header or body, a size that
// does not match the file) is logged at Warn, listed by Damaged and never
// returned; the next Save deletes it. A temporary file (a Save a crash
// interrupted, never acknowledged) is removed. Open reads every kept
// snapshot once, at the disk's sequential speed. Errors: ErrInvalidOptions;
// the file system's (the directory cannot be made or listed).
func OpenSnapshots(dir string, opts SnapshotOptions) (*SnapshotStore, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts.EnsureDefaults()
	s := &SnapshotStore{dir: dir, opts: opts}
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("replog: snapshot directory: %w", err)
		}
		if !opts.NoSync {
			if err := SyncDir(filepath.Dir(dir)); err != nil {
				return nil, fmt.Errorf("replog: snapshot directory: %w", err)
			}
		}
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("replog: snapshot directory: %w", err)
	}
	for _, e := range ents {
		name := e.Name()
		path := filepath.Join(dir, name)
		if strings.HasSuffix(name, snapshotTmpSuffix) {
			opts.Logger.Info("removing a snapshot a crash interrupted (never saved)", "path", path)
			if err := os.Remove(path); err != nil {
				return nil, fmt.Errorf("replog: snapshot directory: %w", err)
			}
			continue
		}
		off, ok := parseSnapshotFileName(name)
		if !ok || !e.Type().IsRegular() {
			continue
		}
		info, err := verifySnapshotFile(path)
		if err == nil && info.Offset != off {
			err = fmt.Errorf("%w: snapshot %s: its header says offset %d", ErrCorrupt, path, info.Offset)
		}
		if err != nil {
			opts.Logger.Warn("snapshot file damaged: skipped (the next save deletes it)", "path", path, "error", err)
			s.damaged = append(s.damaged, path)
			continue
		}
		s.list = append(s.list, info)
	}
	slices.SortFunc(s.list, func(a, b SnapshotInfo) int {
		return cmp.Compare(b.Offset, a.Offset)
	})
	return s, nil
}

// verifySnapshotFile reads the file at path whole and returns its info,
// or an error wrapping ErrCorrupt saying what is wrong.
func verifySnapshotFile(path string) (SnapshotInfo, error) {
	r, info, err := openSnapshotFile(path)
	if err != nil {
		return SnapshotInfo{}, err
	}
	defer r.Close()
	if _, err := io.Copy(io.Discard, r); err != nil {
		return SnapshotInfo{}, err
	}
	return info, nil
}

// openSnapshotFile opens the file at path, checks its header and size,
// and returns a reader of its body that verifies the checksum.
func openSnapshotFile(path string) (*snapshotReader, SnapshotInfo, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, SnapshotInfo{}, fmt.Errorf("replog: open snapshot: %w", err)
	}
	fail := func(format string, args ...any) (*snapshotReader, SnapshotInfo, error) {
		_ = f.Close()
		return nil, SnapshotInfo{}, fmt.Errorf("%w: snapshot %s: %s", ErrCorrupt, path, fmt.Sprintf(format, args...))
	}
	var hb [SnapshotHeaderSize]byte
	if _, err := io.ReadFull(f, hb[:]); err != nil {
		return fail("header: %v", err)
	}
	h, err := decodeSnapshotHeader(hb[:])
	if err != nil {
		return fail("%v", err)
	}
	st, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, SnapshotInfo{}, fmt.Errorf("replog: open snapshot: %w", err)
	}
	if want := SnapshotHeaderSize + h.size; st.Size() != want {
		return fail("%d bytes, the header says %d", st.Size(), want)
	}
	info := SnapshotInfo{Offset: h.offset, Epoch: h.epoch, Size: h.size, CRC: h.crc, Time: time.UnixMilli(h.timeMs), Path: path}
	return &snapshotReader{f: f, path: path, left: h.size, want: h.crc}, info, nil
}

// snapshotReader reads a snapshot's body and checks its checksum as it
// goes: the read that ends the body returns an error wrapping ErrCorrupt
// if the checksum does not match, and io.EOF follows only a match.
type snapshotReader struct {
	f    *os.File
	path string
	left int64
	crc  uint32
	want uint32
	err  error // sticky: io.EOF once the body matched, or the failure
	// damaged, if set, is told once the body is found damaged.
	damaged func()
}

// corrupt makes err the reader's sticky failure and tells damaged.
func (r *snapshotReader) corrupt(err error) error {
	r.err = err
	if r.damaged != nil {
		r.damaged()
		r.damaged = nil
	}
	return err
}

func (r *snapshotReader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	if int64(len(p)) > r.left {
		p = p[:r.left]
	}
	n, err := r.f.Read(p)
	r.crc = crc32.Update(r.crc, castagnoli, p[:n])
	r.left -= int64(n)
	switch {
	case r.left == 0:
		if r.crc != r.want {
			return n, r.corrupt(fmt.Errorf("%w: snapshot %s: body checksum %08x, the header says %08x", ErrCorrupt, r.path, r.crc, r.want))
		}
		r.err = io.EOF
		return n, nil
	case errors.Is(err, io.EOF):
		return n, r.corrupt(fmt.Errorf("%w: snapshot %s: body ends %d bytes early: %w", ErrCorrupt, r.path, r.left, io.ErrUnexpectedEOF))
	case err != nil:
		r.err = fmt.Errorf("replog: read snapshot %s: %w", r.path, err)
		return n, r.err
	}
	return n, nil
}

func (r *snapshotReader) Close() error { return r.f.Close() }

// keepCut is how many of s.list (highest offset first) a save keeps:
// up to and with the Keep-th that counts (SnapshotOptions.Counts). The
// caller holds s.mu.
func (s *SnapshotStore) keepCut() int {
	kept := 0
	for n, i := range s.list {
		if kept == s.opts.Keep {
			return n
		}
		if s.opts.Counts == nil || s.opts.Counts(i) {
			kept++
		}
	}
	return len(s.list)
}

// Save writes a snapshot of the state as of offset (epoch is the epoch of
// the log's entry at offset-1, 0 for offset 0): write streams the body
// into the Writer it is given (buffered; nothing is held whole in
// memory). Once write returns nil, the file is synced, renamed into place
// and its directory synced; then the store deletes all but the Keep
// snapshots of highest offset (a snapshot at an offset already stored
// replaces it). An error from write, or from the file system, removes the
// temporary file and leaves the store as it was. The snapshot's offset is
// the caller's to check against the log; the store orders snapshots by
// it, so one below the Keep of highest offset is deleted at once (the
// root refuses such an offset). Errors: ErrClosed; write's error as it
// is; the file system's.
func (s *SnapshotStore) Save(offset, epoch uint64, write func(io.Writer) error) (SnapshotInfo, error) {
	s.saveMu.Lock()
	defer s.saveMu.Unlock()
	if s.isClosed() {
		return SnapshotInfo{}, ErrClosed
	}
	final := filepath.Join(s.dir, snapshotFileName(offset))
	tmp := final + snapshotTmpSuffix
	info, err := s.write(tmp, offset, epoch, write)
	if err == nil {
		info.Path = final
		if err = os.Rename(tmp, final); err != nil {
			err = fmt.Errorf("replog: save snapshot: %w", err)
		}
	}
	if err != nil {
		_ = os.Remove(tmp)
		return SnapshotInfo{}, err
	}
	atSnapshotStage("renamed")
	if !s.opts.NoSync {
		if err := SyncDir(s.dir); err != nil {
			// The file is in place but its name may not survive a crash:
			// not saved as far as the caller knows. Removing it keeps the
			// store's list the directory's.
			_ = os.Remove(final)
			return SnapshotInfo{}, fmt.Errorf("replog: save snapshot: %w", err)
		}
	}
	s.add(info)
	return info, nil
}

// add lists a snapshot just renamed into place (its directory synced) and
// deletes what it pushes out of the Keep of highest offset. The caller
// holds saveMu.
func (s *SnapshotStore) add(info SnapshotInfo) {
	offset := info.Offset
	s.mu.Lock()
	s.list = slices.DeleteFunc(s.list, func(i SnapshotInfo) bool { return i.Offset == offset })
	s.list = append(s.list, info)
	slices.SortFunc(s.list, func(a, b SnapshotInfo) int { return cmp.Compare(b.Offset, a.Offset) })
	var drop []string
	if cut := s.keepCut(); cut < len(s.list) {
		for _, i := range s.list[cut:] {
			drop = append(drop, i.Path)
		}
		s.list = slices.Clone(s.list[:cut])
	}
	for _, p := range s.damaged {
		// A damaged file at this offset is gone already: the rename
		// replaced it, and its path is now the new snapshot's.
		if p != info.Path {
			drop = append(drop, p)
		}
	}
	s.damaged = nil
	s.mu.Unlock()
	// Deletions need no sync: one a crash undoes leaves an older, whole
	// snapshot, which the next Save deletes again.
	for _, p := range drop {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			s.opts.Logger.Warn("could not delete an old snapshot", "path", p, "error", err)
		}
		atSnapshotStage("pruned")
	}
}

// write writes the temporary file tmp: a header of zeros, the body, then
// the real header over the zeros, and syncs it.
func (s *SnapshotStore) write(tmp string, offset, epoch uint64, write func(io.Writer) error) (SnapshotInfo, error) {
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return SnapshotInfo{}, fmt.Errorf("replog: save snapshot: %w", err)
	}
	defer f.Close() // after the explicit Close below, a no-op
	var zero [SnapshotHeaderSize]byte
	if _, err := f.Write(zero[:]); err != nil {
		return SnapshotInfo{}, fmt.Errorf("replog: save snapshot: %w", err)
	}
	body := &snapshotWriter{f: f}
	bw := bufio.NewWriterSize(body, snapshotBufSize)
	cw := &crcWriter{w: bw}
	if err := write(cw); err != nil {
		return SnapshotInfo{}, err
	}
	if cw.err != nil {
		// write swallowed an error of ours: the body is not whole.
		return SnapshotInfo{}, cw.err
	}
	if err := bw.Flush(); err != nil {
		return SnapshotInfo{}, fmt.Errorf("replog: save snapshot: %w", err)
	}
	now := time.Now()
	h := snapshotHeader{offset: offset, epoch: epoch, size: cw.n, timeMs: now.UnixMilli(), crc: cw.crc}
	if _, err := f.WriteAt(h.encode(), 0); err != nil {
		return SnapshotInfo{}, fmt.Errorf("replog: save snapshot: %w", err)
	}
	atSnapshotStage("header")
	if !s.opts.NoSync {
		if err := f.Sync(); err != nil {
			return SnapshotInfo{}, fmt.Errorf("replog: save snapshot: %w", err)
		}
	}
	if err := f.Close(); err != nil {
		return SnapshotInfo{}, fmt.Errorf("replog: save snapshot: %w", err)
	}
	atSnapshotStage("synced")
	return SnapshotInfo{Offset: offset, Epoch: epoch, Size: cw.n, CRC: cw.crc, Time: time.UnixMilli(h.timeMs)}, nil
}

// crcWriter counts and checksums what the service writes.
type crcWriter struct {
	w   io.Writer
	n   int64
	crc uint32
	err error
}

func (c *crcWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	c.crc = crc32.Update(c.crc, castagnoli, p[:n])
	if err != nil {
		c.err = fmt.Errorf("replog: save snapshot: %w", err)
		return n, c.err
	}
	return n, nil
}

// snapshotWriter is the file under the buffer (atSnapshotStage "write"
// after each chunk).
type snapshotWriter struct{ f *os.File }

func (w *snapshotWriter) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	atSnapshotStage("write")
	return n, err
}

func (s *SnapshotStore) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Latest returns the snapshot of highest offset, and whether there is
// one.
func (s *SnapshotStore) Latest() (SnapshotInfo, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.list) == 0 {
		return SnapshotInfo{}, false
	}
	return s.list[0], true
}

// List returns the stored snapshots, highest offset first.
func (s *SnapshotStore) List() []SnapshotInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.list)
}

// Damaged returns the files OpenSnapshots found damaged and skipped, and
// those Open or a reader found damaged since, that no Save has deleted
// yet.
func (s *SnapshotStore) Damaged() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.damaged)
}

// Open returns a reader of the body of the stored snapshot info names
// (one List or Latest returned): it checks the header again and, as it
// streams, the body's checksum; the read that ends the body fails with an
// error wrapping ErrCorrupt (naming the file) on a mismatch, and only a
// match is followed by io.EOF. A snapshot found damaged so (or by Open
// itself) is no longer listed: it moves to Damaged, List and Latest
// fall back to the snapshots below it, and the next Save deletes it. The file stays readable until the reader is closed, even once a
// later Save deletes it. Errors: ErrClosed;
// ErrNoSnapshot (it is no longer stored: deleted, or replaced by a save at
// its offset); ErrCorrupt (its header is damaged, or its length is not
// the header's); the file system's.
func (s *SnapshotStore) Open(info SnapshotInfo) (io.ReadCloser, error) {
	s.mu.Lock()
	defer s.mu.Unlock() // held so that no Save deletes the file before it is open
	if s.closed {
		return nil, ErrClosed
	}
	if !slices.ContainsFunc(s.list, func(i SnapshotInfo) bool { return i.Path == info.Path && i.Offset == info.Offset }) {
		return nil, fmt.Errorf("%w at offset %d", ErrNoSnapshot, info.Offset)
	}
	r, got, err := openSnapshotFile(info.Path)
	if errors.Is(err, ErrCorrupt) {
		s.markDamagedLocked(info)
	}
	if err != nil {
		return nil, err
	}
	if got.Offset != info.Offset || got.Epoch != info.Epoch || got.Size != info.Size || got.CRC != info.CRC || !got.Time.Equal(info.Time) {
		// A whole header (its checksum holds) that is not info's: a save
		// at the same offset renamed its file over info's.
		_ = r.Close()
		return nil, fmt.Errorf("%w at offset %d: replaced by a later save", ErrNoSnapshot, info.Offset)
	}
	r.damaged = func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.markDamagedLocked(info)
	}
	return r, nil
}

// markDamagedLocked moves info, found damaged since the store opened it,
// from the list to the damaged files (the next Save deletes it), unless
// it is no longer listed as it was (a save at its offset replaced it).
// s.mu is held.
func (s *SnapshotStore) markDamagedLocked(info SnapshotInfo) {
	i := slices.IndexFunc(s.list, func(i SnapshotInfo) bool {
		return i.Path == info.Path && i.Offset == info.Offset && i.Size == info.Size && i.CRC == info.CRC && i.Time.Equal(info.Time)
	})
	if i < 0 {
		return
	}
	s.opts.Logger.Warn("snapshot file damaged since it was checked: no longer listed (the next save deletes it)", "path", info.Path)
	s.list = slices.Delete(s.list, i, i+1)
	s.damaged = append(s.damaged, info.Path)
}

// Close waits for a Save under way and closes the store: later calls
// return ErrClosed. Readers already open stay readable.
func (s *SnapshotStore) Close() error {
	s.saveMu.Lock()
	defer s.saveMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return nil
}
