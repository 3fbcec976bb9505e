package storage

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// CreatingDirPrefix starts the name of the temporary directory CreateDir
// builds a data directory in, next to it: <parent>/.creating-<name>. One
// left by a crash holds nothing anyone relied on and may be removed.
const CreatingDirPrefix = ".creating-"

// CreateDir creates the data directory dir, which must not exist, as
// OpenDir creates one for identity id with opts (its identity, data file,
// storage format and, on a shared journal, its journal reference), with
// an empty snapshot directory (SnapshotDirName), and
// returns once all of it is durable: then OpenDir opens it as a directory
// that exists. An error wrapping fs.ErrExist if dir exists.
//
// It costs a fraction of the fsyncs of OpenDir's own creation. OpenDir
// makes each step durable before the next (ten or more fsyncs), so that
// a crash between two leaves a directory it can tell apart from one whose
// data was lost. CreateDir builds the directory under a temporary name in
// the same parent (CreatingDirPrefix) without syncing, then syncs each of
// its files and the directory once, renames it to dir and syncs the
// parent: a crash before the rename is durable leaves no dir (only a
// temporary directory, which the next CreateDir of dir removes), after
// it the whole directory. Nothing in the directory was acknowledged to
// anyone before it returns, so nothing durable is lost either way.
func CreateDir(dir string, id Identity, opts DirOptions) error {
	dir = filepath.Clean(dir)
	if _, err := os.Lstat(dir); err == nil {
		return fmt.Errorf("replog: create data directory %s: %w", dir, fs.ErrExist)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("replog: create data directory %s: %w", dir, err)
	}
	parent := filepath.Dir(dir)
	tmp := filepath.Join(parent, CreatingDirPrefix+filepath.Base(dir))
	if err := os.RemoveAll(tmp); err != nil {
		return fmt.Errorf("replog: create data directory %s: %w", dir, err)
	}
	noSync := opts.NoSync
	opts.NoSync = true // opts is a copy; synced once below
	s, _, err := OpenDir(tmp, id, opts)
	if err == nil {
		err = s.Close()
	}
	if err == nil {
		// Made here, synced with the rest: OpenSnapshots would otherwise
		// make it at the log's open and sync dir then, an fsync on the
		// way of every new log's first open.
		err = os.Mkdir(filepath.Join(tmp, SnapshotDirName), 0o700)
	}
	if err == nil && !noSync {
		err = syncTree(tmp)
	}
	if err == nil {
		err = os.Rename(tmp, dir)
	}
	if err == nil && !noSync {
		err = SyncDir(parent)
	}
	if err != nil {
		_ = os.RemoveAll(tmp)
		return fmt.Errorf("replog: create data directory %s: %w", dir, err)
	}
	return nil
}

// syncTree fsyncs every file and directory under dir, dir last.
func syncTree(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		switch {
		case e.IsDir():
			err = syncTree(p)
		case e.Type().IsRegular():
			err = syncFile(p)
		}
		if err != nil {
			return err
		}
	}
	return SyncDir(dir)
}

// syncFile fsyncs the file at path.
func syncFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// IsCreatingDir reports whether name (a directory entry's) is one
// CreateDir builds a data directory in, and if so the name of the
// directory it is for.
func IsCreatingDir(name string) (string, bool) {
	return strings.CutPrefix(name, CreatingDirPrefix)
}
