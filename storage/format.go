package storage

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// The storage format of a data directory is recorded in FormatFileName, a
// few lines of text written atomically (a synced temporary file renamed
// into place, the directory synced). A directory without the file was
// written before formats were recorded (its files are those of format 1)
// and is stamped at its first read-write open. A format above
// MaxStorageFormat is refused before any other file is read.
const (
	// FormatFileName is the file recording a data directory's storage
	// format.
	FormatFileName = "replog.format"
	// StorageFormatSegments is format 1: the bbolt segment files and the
	// identity file only (every directory written before formats were
	// recorded).
	StorageFormatSegments = 1
	// StorageFormatJournal is format 2: format 1 plus the commit journal
	// (JournalFileName) in front of the segments.
	StorageFormatJournal = 2
	// StorageFormatShared is format 3: format 1 plus a reference
	// (JournalRefFileName) to the shared commit journal that holds the
	// directory's latest writes (DirOptions.SharedJournal).
	StorageFormatShared = 3
	// MinStorageFormat and MaxStorageFormat are the formats this build
	// reads.
	MinStorageFormat = StorageFormatSegments
	MaxStorageFormat = StorageFormatShared

	formatTmpName = FormatFileName + ".tmp"
	formatHeader  = "replog storage format"
	maxFormatSize = 4 << 10
)

// ErrNewerFormat: the data directory was written by a newer build, in a
// storage format this build does not know. The message names the
// directory's format and the formats this build reads; nothing was read
// or changed.
var ErrNewerFormat = errors.New("replog: data directory has a newer storage format")

// ErrSharedJournal: the data directory's latest writes are in a shared
// commit journal (storage format 3), and the store was opened without it,
// with another one, or as another log of it.
var ErrSharedJournal = errors.New("replog: data directory is on a shared journal")

// formatHook, when set by a test, is called at the stages of a format
// stamp ("tmp": the temporary file is written and synced, not yet renamed;
// "renamed": renamed, the directory not yet synced), so that a test can
// kill the process there.
var formatHook func(stage string)

func encodeFormat(v int) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s\nformat %d\n", formatHeader, v)
	fmt.Fprintf(&b, "crc32c %08x\n", crc32.Checksum(b.Bytes(), castagnoli))
	return b.Bytes()
}

func decodeFormat(b []byte) (int, error) {
	lines := strings.Split(string(b), "\n")
	if len(lines) != 4 || lines[3] != "" {
		return 0, fmt.Errorf("%d bytes, not three lines", len(b))
	}
	if lines[0] != formatHeader {
		return 0, errors.New("not a replog storage format file")
	}
	sum, ok := strings.CutPrefix(lines[2], "crc32c ")
	want, err := strconv.ParseUint(sum, 16, 32)
	if !ok || err != nil || len(sum) != 8 {
		return 0, fmt.Errorf("last line %q is not a checksum", lines[2])
	}
	content := lines[0] + "\n" + lines[1] + "\n"
	if got := crc32.Checksum([]byte(content), castagnoli); got != uint32(want) {
		return 0, fmt.Errorf("checksum mismatch (stored %08x, computed %08x)", want, got)
	}
	vs, ok := strings.CutPrefix(lines[1], "format ")
	v, err := strconv.Atoi(vs)
	if !ok || err != nil || v < 1 || strconv.Itoa(v) != vs {
		return 0, fmt.Errorf("line %q is not a format", lines[1])
	}
	return v, nil
}

// readFormat returns dir's storage format; stamped is false for a
// directory from before formats were recorded (then v is
// StorageFormatSegments). A format above MaxStorageFormat is
// ErrNewerFormat naming both; a damaged file ErrCorrupt naming it.
func readFormat(dir string) (v int, stamped bool, err error) {
	path := filepath.Join(dir, FormatFileName)
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return StorageFormatSegments, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("replog: read storage format %s: %w", path, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxFormatSize+1))
	if err != nil {
		return 0, false, fmt.Errorf("replog: read storage format %s: %w", path, err)
	}
	if v, err = decodeFormat(b); err != nil {
		return 0, false, fmt.Errorf("replog: storage format file %s: %w: %v", path, ErrCorrupt, err)
	}
	if v > MaxStorageFormat {
		return v, true, fmt.Errorf("%w: data directory %s has storage format %d; this build reads formats %d to %d (open it with the newer build that wrote it)",
			ErrNewerFormat, dir, v, MinStorageFormat, MaxStorageFormat)
	}
	return v, true, nil
}

// writeFormat records v as dir's storage format, atomically and durably
// (a crash leaves the old file, or none, or the new one whole; a leftover
// temporary file is replaced by the next stamp and otherwise ignored).
func writeFormat(dir string, v int, noSync bool) error {
	tmp := filepath.Join(dir, formatTmpName)
	err := writeFileSynced(tmp, encodeFormat(v), noSync)
	if err == nil && formatHook != nil {
		formatHook("tmp")
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, FormatFileName))
	}
	if err == nil && formatHook != nil {
		formatHook("renamed")
	}
	if err == nil && !noSync {
		err = SyncDir(dir)
	}
	if err != nil {
		return fmt.Errorf("replog: record storage format %d in %s: %w", v, dir, err)
	}
	return nil
}

// writeFileSynced creates (or replaces) path with b and syncs it.
func writeFileSynced(path string, b []byte, noSync bool) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil && !noSync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// JournalRefFileName, in a format 3 data directory, names the shared
// journal holding its latest writes (by the fingerprint of the journal
// file's key) and the directory's log ID in it: four lines ("replog
// shared journal", "journal <16 hex digits>", "log <ID>", a CRC-32C line),
// written atomically before format 3 is recorded.
const JournalRefFileName = "replog.journal-ref"

const journalRefHeader = "replog shared journal"

// journalRef is a format 3 directory's reference to its shared journal.
type journalRef struct {
	fingerprint uint64
	logID       uint32
}

func encodeJournalRef(r journalRef) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s\njournal %016x\nlog %d\n", journalRefHeader, r.fingerprint, r.logID)
	fmt.Fprintf(&b, "crc32c %08x\n", crc32.Checksum(b.Bytes(), castagnoli))
	return b.Bytes()
}

func decodeJournalRef(b []byte) (journalRef, error) {
	var r journalRef
	lines := strings.Split(string(b), "\n")
	if len(lines) != 5 || lines[4] != "" || lines[0] != journalRefHeader {
		return r, errors.New("not a journal reference")
	}
	content := strings.Join(lines[:3], "\n") + "\n"
	var sum uint32
	if _, err := fmt.Sscanf(lines[3], "crc32c %08x", &sum); err != nil || sum != crc32.Checksum([]byte(content), castagnoli) {
		return r, errors.New("checksum mismatch")
	}
	if _, err := fmt.Sscanf(lines[1], "journal %016x", &r.fingerprint); err != nil {
		return r, fmt.Errorf("line %q", lines[1])
	}
	if _, err := fmt.Sscanf(lines[2], "log %d", &r.logID); err != nil {
		return r, fmt.Errorf("line %q", lines[2])
	}
	return r, nil
}

// readJournalRef returns dir's journal reference, nil if it has none; a
// damaged one is ErrCorrupt naming it.
func readJournalRef(dir string) (*journalRef, error) {
	path := filepath.Join(dir, JournalRefFileName)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("replog: read %s: %w", path, err)
	}
	r, err := decodeJournalRef(b)
	if err != nil {
		return nil, fmt.Errorf("replog: journal reference %s: %w: %v", path, ErrCorrupt, err)
	}
	return &r, nil
}

// JournalLogIDOf returns the log ID (DirOptions.JournalLogID) data
// directory dir has on its shared journal, as its journal reference
// records it; ok is false when dir has none (it never ran on a shared
// journal). A damaged reference is an error wrapping ErrCorrupt.
func JournalLogIDOf(dir string) (id uint32, ok bool, err error) {
	r, err := readJournalRef(dir)
	if err != nil || r == nil {
		return 0, false, err
	}
	return r.logID, true, nil
}

// writeJournalRef records r in dir, atomically and durably.
func writeJournalRef(dir string, r journalRef, noSync bool) error {
	tmp := filepath.Join(dir, JournalRefFileName+".tmp")
	err := writeFileSynced(tmp, encodeJournalRef(r), noSync)
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, JournalRefFileName))
	}
	if err == nil && !noSync {
		err = SyncDir(dir)
	}
	if err != nil {
		return fmt.Errorf("replog: record the shared journal in %s: %w", dir, err)
	}
	return nil
}
