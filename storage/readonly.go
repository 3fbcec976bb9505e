package storage

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/replog-io/replog/protocol"
)

// OpenDirReadOnly opens the data directory dir for reading only (offline
// tools: inspect, verify, dump): nothing in it is created, changed or
// removed, not even what a crash left (a stray roll file, an orphan
// segment). Apply returns ErrReadOnly; reads work as on OpenDir's store.
// The directory is locked while the store is open, so it fails with
// ErrLocked (after opts.Timeout) while a node, or another tool, holds it,
// and a node cannot open it meanwhile.
//
// The identity returned is the identity file's, or, without one, the
// active file's record (zero if neither exists: a directory from before
// identities). A directory without a data file, or with an empty one,
// returns an error wrapping ErrCorrupt; files that disagree on the
// identity too. The active file is verified as OpenDir verifies it;
// sealed segments when first read. Only opts.Timeout and opts.Logger are
// used.
func OpenDirReadOnly(dir string, opts DirOptions) (*DirStore, Identity, error) {
	if err := opts.Validate(); err != nil {
		return nil, Identity{}, err
	}
	opts.EnsureDefaults()
	d, err := os.Open(dir)
	if err != nil {
		return nil, Identity{}, fmt.Errorf("replog: OpenDirReadOnly: %w", err)
	}
	if err := lockFile(d, opts.Timeout); err != nil {
		_ = d.Close()
		if errors.Is(err, errLockTimeout) {
			return nil, Identity{}, fmt.Errorf("%w: directory %s is in use by another store (waited %v)", ErrLocked, dir, opts.Timeout)
		}
		return nil, Identity{}, fmt.Errorf("replog: OpenDirReadOnly %s: lock: %w", dir, err)
	}
	s, id, err := openDirReadOnlyLocked(dir, opts)
	if err != nil {
		_ = unlockFile(d)
		_ = d.Close()
		return nil, Identity{}, err
	}
	s.dirLock = d
	return s, id, nil
}

func openDirReadOnlyLocked(dir string, opts DirOptions) (*DirStore, Identity, error) {
	if _, _, err := readFormat(dir); err != nil {
		return nil, Identity{}, err
	}
	idPath, dataPath := filepath.Join(dir, IdentityFileName), filepath.Join(dir, DataFileName)
	rec, haveID, err := readIdentity(idPath)
	if err != nil {
		return nil, Identity{}, err
	}
	fi, err := os.Stat(dataPath)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, Identity{}, fmt.Errorf("replog: data file %s: %w: it is missing", dataPath, ErrCorrupt)
	case err != nil:
		return nil, Identity{}, fmt.Errorf("replog: OpenDirReadOnly: %w", err)
	case fi.Size() == 0:
		return nil, Identity{}, fmt.Errorf("replog: data file %s: %w: it is empty", dataPath, ErrCorrupt)
	}
	s, err := openDirStore(dir, nil, opts, true)
	if err != nil {
		return nil, Identity{}, err
	}
	switch {
	case haveID && s.identity != nil && *s.identity != rec.Identity:
		_ = s.Close()
		return nil, Identity{}, fmt.Errorf("replog: data directory %s: %w: the identity file says node %q of cluster %q (directory %s) but the data file %s records node %q of cluster %q (directory %s): the files come from different directories",
			dir, ErrCorrupt, rec.NodeID, rec.ClusterID, rec.DirectoryID, dataPath, s.identity.NodeID, s.identity.ClusterID, s.identity.DirectoryID)
	case haveID:
		return s, rec.Identity, nil
	case s.identity != nil:
		return s, *s.identity, nil
	}
	return s, Identity{}, nil
}

// VerifyReport is what VerifyDir checked.
type VerifyReport struct {
	// Identity is the directory's (see OpenDirReadOnly).
	Identity Identity
	// Segments is the number of segment files verified (the active one
	// included); Entries the number of entries read, [LogStart, LEO).
	Segments int
	Entries  uint64
	// LogStart and LEO bound the log.
	LogStart, LEO uint64
}

// VerifyDir checks the data directory dir offline, read-only (see
// OpenDirReadOnly): the structure of every segment file (the walk OpenDir
// does on its active file), the state the active file records, and every
// entry of the log, [LogStart, LEO): present, contiguous across segments,
// its checksum, and the epoch the epoch map gives it; and that the
// voter-set rows at or above the log start are those of the log's
// EntryVoters entries, one each, with the same sets. It reads the whole
// log. It returns what it checked, and nil, or the first problem as an
// error wrapping ErrCorrupt that names the file and the offset (ErrLocked
// while a node holds the directory).
func VerifyDir(dir string, opts DirOptions) (VerifyReport, error) {
	var r VerifyReport
	s, id, err := OpenDirReadOnly(dir, opts)
	if err != nil {
		return r, err
	}
	defer s.Close()
	r.Identity, r.LogStart, r.LEO = id, s.LogStart(), s.LEO()
	epochs := s.EpochMap()
	rows := map[uint64]protocol.VotersAt{} // the rows of [LogStart, LEO) not yet matched
	for _, row := range s.VoterSets() {
		if row.Offset >= r.LogStart {
			rows[row.Offset] = row
		}
	}
	for off := r.LogStart; off < r.LEO; {
		es, err := s.Entries(off, 10_000, 64<<20)
		if err != nil {
			return r, err
		}
		if len(es) == 0 {
			return r, fmt.Errorf("replog: store %s: %w: no entry at offset %d below the LEO %d", dir, ErrCorrupt, off, r.LEO)
		}
		for _, e := range es {
			if want := epochAt(epochs, e.Offset); e.Epoch != want {
				return r, fmt.Errorf("replog: store %s: %w: entry at offset %d has epoch %d, the epoch map says %d", dir, ErrCorrupt, e.Offset, e.Epoch, want)
			}
			if e.Type != protocol.EntryVoters {
				continue
			}
			row, ok := rows[e.Offset]
			vs, owed, err := protocol.DecodeVoterSet(e.Data)
			switch {
			case err != nil:
				return r, fmt.Errorf("replog: store %s: %w: voters entry at offset %d: %v", dir, ErrCorrupt, e.Offset, err)
			case !ok:
				return r, fmt.Errorf("replog: store %s: %w: voters entry at offset %d has no voter-set row", dir, ErrCorrupt, e.Offset)
			case !slices.Equal(row.Voters, vs) || !slices.Equal(row.Owed, owed):
				return r, fmt.Errorf("replog: store %s: %w: voter-set row at offset %d holds %v owing %v, its voters entry %v owing %v", dir, ErrCorrupt, e.Offset, row.Voters, row.Owed, vs, owed)
			}
			delete(rows, e.Offset)
		}
		off += uint64(len(es))
		r.Entries += uint64(len(es))
	}
	if len(rows) > 0 {
		return r, fmt.Errorf("replog: store %s: %w: voter-set row at offset %d without a voters entry", dir, ErrCorrupt, slices.Min(slices.Collect(maps.Keys(rows))))
	}
	// Every sealed segment holds part of [LogStart, LEO) (one wholly below
	// the log start is deleted), so each was opened, and verified, above.
	r.Segments = len(s.Segments())
	return r, nil
}
