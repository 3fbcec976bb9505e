package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/replog-io/replog/storage"
)

// openDir opens a stopped node's data directory read-only for the
// offline commands. Its errors say, in an operator's terms, what is wrong
// with the directory (missing, not a directory, not replog's, held by a
// running node, damaged), not which function of the storage package
// refused it: the person reading them has a directory, not our code.
func openDir(dir string, timeout time.Duration) (*storage.DirStore, storage.Identity, error) {
	if err := checkDir(dir); err != nil {
		return nil, storage.Identity{}, err
	}
	s, id, err := storage.OpenDirReadOnly(dir, storage.DirOptions{Timeout: timeout})
	if err != nil {
		return nil, storage.Identity{}, dirError(dir, timeout, err)
	}
	return s, id, nil
}

// checkDir refuses what is not a replog data directory before the store
// is opened, with the reason: the store would call a directory without a
// data file damaged, which is right only if a node lived there.
func checkDir(dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("data directory %s does not exist", dir)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("data directory %s: permission denied (run replogctl as the user the node runs as)", dir)
	case err != nil:
		return fmt.Errorf("data directory %s cannot be read: %s", dir, osReason(err))
	case !fi.IsDir():
		return fmt.Errorf("%s is a file, not a data directory: give the directory the node's Options.Dir names", dir)
	}
	f, err := os.Open(dir)
	if err != nil {
		if errors.Is(err, fs.ErrPermission) {
			return fmt.Errorf("data directory %s: permission denied (run replogctl as the user the node runs as)", dir)
		}
		return fmt.Errorf("data directory %s cannot be read: %s", dir, osReason(err))
	}
	_ = f.Close()
	_, idErr := os.Stat(filepath.Join(dir, storage.IdentityFileName))
	_, dataErr := os.Stat(filepath.Join(dir, storage.DataFileName))
	switch {
	case errors.Is(idErr, fs.ErrNotExist) && errors.Is(dataErr, fs.ErrNotExist):
		return fmt.Errorf("%s is not a replog data directory: it holds neither %s nor %s", dir, storage.DataFileName, storage.IdentityFileName)
	case idErr == nil && errors.Is(dataErr, fs.ErrNotExist):
		return fmt.Errorf("data directory %s is damaged: it has an identity file (%s) but no data file (%s): the node's log and vote are gone; restore the file, or empty the directory so that the node starts as a new one",
			dir, storage.IdentityFileName, storage.DataFileName)
	}
	return nil
}

// dirError turns an error of the store of dir into what an operator
// needs to know.
func dirError(dir string, timeout time.Duration, err error) error {
	switch {
	case errors.Is(err, storage.ErrLocked):
		return fmt.Errorf("data directory %s is locked by a running node (or another replogctl) and was not freed within --timeout %v: the offline commands read a stopped node's directory; stop the node first, or ask the running node with replogctl status --addr", dir, timeout)
	case errors.Is(err, storage.ErrCorrupt):
		return fmt.Errorf("data directory %s is damaged: %s", dir, plain(err))
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("data directory %s: permission denied (run replogctl as the user the node runs as): %s", dir, plain(err))
	}
	return fmt.Errorf("reading data directory %s: %s", dir, plain(err))
}

// plain is err's message without the library's "replog: " prefixes and
// the sentinel's words that the caller has already said in its own (a
// damaged directory), so that the detail reads as one sentence.
func plain(err error) string {
	s := err.Error()
	s = strings.ReplaceAll(s, storage.ErrCorrupt.Error()+": ", "")
	s = strings.ReplaceAll(s, "replog: ", "")
	return s
}

// osReason is the reason of an *fs.PathError (its path is named by the
// caller already), or the whole message.
func osReason(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}
