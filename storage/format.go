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
	// MinStorageFormat and MaxStorageFormat are the formats this build
	// reads.
	MinStorageFormat = StorageFormatSegments
	MaxStorageFormat = StorageFormatJournal

	formatTmpName = FormatFileName + ".tmp"
	formatHeader  = "replog storage format"
	maxFormatSize = 4 << 10
)

// ErrNewerFormat: the data directory was written by a newer build, in a
// storage format this build does not know. The message names the
// directory's format and the formats this build reads; nothing was read
// or changed.
var ErrNewerFormat = errors.New("replog: data directory has a newer storage format")

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
		err = syncDir(dir)
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
