package storage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// The checkpoints a data directory keeps beside its log (the key
// checkpoint, replog.keys; the cleaner checkpoint, replog.cleaner) are
// side files: written whole under a temporary name and renamed over the
// file, not synced, each with its own checksum, so that a crash leaves the
// previous one, none, or a torn one its decoder refuses. Both are
// optimisations the node can do without: a missing or damaged one costs a
// longer replay or a full compaction pass, never a wrong answer.

// writeSideFile replaces d's side file name with data, through tmp.
// what names the file in errors.
func (d *DirStore) writeSideFile(what, name, tmp string, data []byte) error {
	if d.closed.Load() {
		return ErrClosed
	}
	if d.readOnly {
		return ErrReadOnly
	}
	tmpPath := filepath.Join(d.dir, tmp)
	if err := os.WriteFile(tmpPath, data, 0o600); err != nil {
		return fmt.Errorf("replog: write %s: %w", what, err)
	}
	if err := os.Rename(tmpPath, filepath.Join(d.dir, name)); err != nil {
		return fmt.Errorf("replog: write %s: %w", what, err)
	}
	return nil
}

// readSideFile returns the contents of d's side file name, and false if
// there is none. A file larger than limit is damage, not a reason to
// allocate: it reads as empty, which every side file's decoder refuses.
// what names the file in errors.
func (d *DirStore) readSideFile(what, name string, limit int64) ([]byte, bool, error) {
	if d.closed.Load() {
		return nil, false, ErrClosed
	}
	path := filepath.Join(d.dir, name)
	fi, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	if err == nil && fi.Size() > limit {
		// Damage, as a torn file is: the caller's decoder refuses the
		// empty contents and the checkpoint counts as none.
		return nil, true, nil
	}
	var b []byte
	if err == nil {
		b, err = os.ReadFile(path)
	}
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil // renamed over between the two: none yet
	}
	if err != nil {
		return nil, false, fmt.Errorf("replog: read %s: %w", what, err)
	}
	return b, true, nil
}
