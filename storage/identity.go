package storage

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
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

// Identity says whose data a directory holds.
type Identity struct {
	// ClusterID and NodeID are the cluster and node the directory was
	// created for.
	ClusterID, NodeID string
	// DirectoryID is random, generated when the directory was created
	// (32 hex digits): it tells this incarnation of NodeID from one whose
	// directory was wiped and created again.
	DirectoryID string
}

// Names of the files of a data directory (see the package documentation).
const (
	// DataFileName is the active segment file of a data directory: the
	// bbolt file the store writes (the sealed segments are
	// replog-<base>.seg).
	DataFileName = "replog.db"
	// IdentityFileName is the identity file in a data directory.
	IdentityFileName = "replog.identity"

	identityTmpName  = IdentityFileName + ".tmp"
	identityHeader   = "replog data directory identity"
	identityVersion  = 1
	maxIdentitySize  = 64 << 10
	stateCreating    = "creating" // identity written, data file not yet complete
	stateReady       = "ready"    // the data file was created completely
	directoryIDBytes = 16
)

// identityRecord is the identity file's content.
type identityRecord struct {
	Identity
	// ready: the data file was created completely (and may since hold a
	// vote and entries); false only between the identity's creation and
	// the end of the data file's creation.
	ready bool
}

// encodeIdentity renders r as the identity file: a few lines of text (an
// operator can read it), values quoted with strconv.Quote (any bytes
// round-trip), ending with a CRC-32C of everything before it.
func encodeIdentity(r identityRecord) []byte {
	state := stateCreating
	if r.ready {
		state = stateReady
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s\nversion %d\ncluster_id %s\nnode_id %s\ndirectory_id %s\nstate %s\n",
		identityHeader, identityVersion, strconv.Quote(r.ClusterID), strconv.Quote(r.NodeID),
		strconv.Quote(r.DirectoryID), state)
	fmt.Fprintf(&b, "crc32c %08x\n", crc32.Checksum(b.Bytes(), castagnoli))
	return b.Bytes()
}

// decodeIdentity parses an identity file. Any deviation from what
// encodeIdentity writes is an error (the caller wraps ErrCorrupt).
func decodeIdentity(b []byte) (identityRecord, error) {
	var r identityRecord
	if len(b) > maxIdentitySize {
		return r, fmt.Errorf("%d bytes, more than an identity file holds", len(b))
	}
	if len(b) == 0 || b[len(b)-1] != '\n' {
		return r, errors.New("truncated (no final newline)")
	}
	body := b[:len(b)-1]
	i := bytes.LastIndexByte(body, '\n')
	if i < 0 {
		return r, errors.New("no checksum line")
	}
	sumLine, content := string(body[i+1:]), b[:i+1]
	hexSum, ok := strings.CutPrefix(sumLine, "crc32c ")
	if !ok || len(hexSum) != 8 {
		return r, fmt.Errorf("last line %q is not a checksum", sumLine)
	}
	want, err := strconv.ParseUint(hexSum, 16, 32)
	if err != nil || fmt.Sprintf("%08x", want) != hexSum {
		return r, fmt.Errorf("last line %q is not a checksum", sumLine)
	}
	if got := crc32.Checksum(content, castagnoli); uint32(want) != got {
		return r, fmt.Errorf("checksum mismatch (stored %08x, computed %08x)", want, got)
	}
	lines := strings.Split(string(content[:len(content)-1]), "\n")
	if len(lines) < 2 || lines[0] != identityHeader {
		return r, errors.New("not a replog identity file")
	}
	if lines[1] != fmt.Sprintf("version %d", identityVersion) {
		return r, fmt.Errorf("unsupported %q (this replog reads version %d)", lines[1], identityVersion)
	}
	if len(lines) != 6 {
		return r, fmt.Errorf("%d lines, want 7", len(lines)+1)
	}
	field := func(line, key string) (string, error) {
		q, ok := strings.CutPrefix(line, key+" ")
		if !ok {
			return "", fmt.Errorf("line %q: want %s", line, key)
		}
		v, err := strconv.Unquote(q)
		if err != nil || q != strconv.Quote(v) {
			return "", fmt.Errorf("line %q: %s is not a quoted string", line, key)
		}
		if v == "" {
			return "", fmt.Errorf("empty %s", key)
		}
		return v, nil
	}
	if r.ClusterID, err = field(lines[2], "cluster_id"); err != nil {
		return r, err
	}
	if r.NodeID, err = field(lines[3], "node_id"); err != nil {
		return r, err
	}
	if r.DirectoryID, err = field(lines[4], "directory_id"); err != nil {
		return r, err
	}
	switch lines[5] {
	case "state " + stateReady:
		r.ready = true
	case "state " + stateCreating:
	default:
		return r, fmt.Errorf("line %q: unknown state", lines[5])
	}
	return r, nil
}

// readIdentity reads the identity file at path; ok is false if there is
// none.
func readIdentity(path string) (r identityRecord, ok bool, err error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return r, false, nil
	}
	if err != nil {
		return r, false, fmt.Errorf("replog: read identity %s: %w", path, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxIdentitySize+1))
	if err != nil {
		return r, false, fmt.Errorf("replog: read identity %s: %w", path, err)
	}
	if r, err = decodeIdentity(b); err != nil {
		return r, false, fmt.Errorf("replog: identity file %s: %w: %v", path, ErrCorrupt, err)
	}
	return r, true, nil
}

// writeIdentity replaces dir's identity file atomically and durably:
// written to a temporary file, synced, renamed over the old one, and the
// directory synced.
func writeIdentity(dir string, r identityRecord, noSync bool) error {
	tmp := filepath.Join(dir, identityTmpName)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("replog: write identity: %w", err)
	}
	_, err = f.Write(encodeIdentity(r))
	if err == nil && !noSync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, IdentityFileName))
	}
	if err == nil && !noSync {
		err = SyncDir(dir)
	}
	if err != nil {
		return fmt.Errorf("replog: write identity in %s: %w", dir, err)
	}
	return nil
}

// SyncDir makes the directory's entries (a rename, a new file, a
// removal) durable: it fsyncs dir itself. It is what the store does after
// each of those, and what a caller that renames or creates a directory
// beside the store's needs too.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

func newDirectoryID() (string, error) {
	b := make([]byte, directoryIDBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("replog: directory ID: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// openDirHook, when set by a test, is called at the named stages of a
// directory's creation ("identity": the identity file is written and the
// data file not yet created; "data": the data file is complete and the
// identity not yet marked ready), so a test can kill the process there.
var openDirHook func(stage string)

// OpenDir opens or creates the data directory dir for node id.NodeID of
// cluster id.ClusterID and returns its store and its identity (with the
// DirectoryID; the caller leaves id.DirectoryID empty, or sets it to
// require that very incarnation of the directory).
//
// A data directory holds two files (see the package documentation):
// DataFileName, the store's active bbolt segment file (with, once it has
// rolled, the sealed segments), and IdentityFileName, which records
// the cluster ID, the node ID and a random directory ID. OpenDir
//
//   - in an empty (or missing) directory: writes the identity with a new
//     DirectoryID first, then creates the data file, then marks the
//     identity ready. A crash leaves nothing, or an identity not yet ready
//     (the next OpenDir creates the data file again: no store was ever
//     returned from it), or a complete data file with that identity;
//   - in a directory with an identity: refuses one of another cluster or
//     node (or another DirectoryID, if id has one) with an error wrapping
//     ErrIdentityMismatch that names the field and both values, changing
//     nothing; refuses a ready identity whose data file is missing or
//     empty with an error wrapping ErrCorrupt (a node existed here and its
//     vote and log are gone: restore the file, or wipe the directory so the
//     node rejoins as a new incarnation); otherwise opens the store on its
//     segment files (a damaged one returns ErrCorrupt naming the file);
//   - in a legacy directory (a data file from before identities, no
//     identity file): opens and verifies the data file, then adopts it:
//     records an identity with id's cluster and node IDs and a new
//     DirectoryID in the data file, then writes the identity file. A
//     legacy directory whose data file is empty is refused (ErrCorrupt):
//     nothing says whether a node lived there.
//
// The data file records the identity too, so that a lost identity file is
// not mistaken for a legacy directory: with no identity file but a data
// file that records one, OpenDir refuses a data file of another cluster or
// node (ErrIdentityMismatch) and otherwise rewrites the identity file from
// the record (same DirectoryID) with a warning; an identity file and a data
// file that disagree are refused (ErrCorrupt).
//
// An identity file that fails its checksum or cannot be parsed returns an
// error wrapping ErrCorrupt naming the file. Concurrent OpenDir calls on
// one directory are serialized by a lock on the directory (waiting up to
// opts.Timeout, then ErrLocked); the store itself then holds the data
// directory's lock and its active file's. A leftover IdentityFileName+".tmp" from a
// crash is ignored and replaced. Invalid opts return an error wrapping
// ErrInvalidOptions (see DirOptions.Validate).
func OpenDir(dir string, id Identity, opts DirOptions) (*DirStore, Identity, error) {
	if id.ClusterID == "" || id.NodeID == "" {
		return nil, Identity{}, fmt.Errorf("replog: OpenDir %s: ClusterID and NodeID are required (got %q, %q)", dir, id.ClusterID, id.NodeID)
	}
	if err := opts.Validate(); err != nil {
		return nil, Identity{}, err
	}
	opts.EnsureDefaults() // opts is a copy
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, Identity{}, fmt.Errorf("replog: OpenDir: %w", err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return nil, Identity{}, fmt.Errorf("replog: OpenDir: %w", err)
	}
	if err := lockFile(d, opts.Timeout); err != nil {
		_ = d.Close()
		if errors.Is(err, errLockTimeout) {
			return nil, Identity{}, fmt.Errorf("%w: directory %s is in use by another store (waited %v)", ErrLocked, dir, opts.Timeout)
		}
		return nil, Identity{}, fmt.Errorf("replog: OpenDir %s: lock: %w", dir, err)
	}
	// The store keeps the directory locked for its lifetime.
	b, got, err := openDirLocked(dir, id, opts)
	if err != nil {
		_ = unlockFile(d)
		_ = d.Close()
		return nil, Identity{}, err
	}
	b.dirLock = d
	return b, got, nil
}

// openDirLocked is OpenDir with the directory locked.
func openDirLocked(dir string, id Identity, opts DirOptions) (*DirStore, Identity, error) {
	// A newer build's directory is refused before anything in it is read.
	if _, _, err := readFormat(dir); err != nil {
		return nil, Identity{}, err
	}
	idPath, dataPath := filepath.Join(dir, IdentityFileName), filepath.Join(dir, DataFileName)
	rec, haveID, err := readIdentity(idPath)
	if err != nil {
		return nil, Identity{}, err
	}
	var dataSize int64 = -1 // -1: no data file
	if fi, err := os.Stat(dataPath); err == nil {
		dataSize = fi.Size()
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, Identity{}, fmt.Errorf("replog: OpenDir: %w", err)
	}
	log := opts.Logger

	if haveID {
		if err := checkIdentity(idPath, rec.Identity, id); err != nil {
			return nil, Identity{}, err
		}
		if rec.ready {
			if dataSize <= 0 {
				what := "is missing"
				if dataSize == 0 {
					what = "is empty"
				}
				return nil, Identity{}, fmt.Errorf("replog: data file %s: %w: the directory held node %q of cluster %q (directory %s); its data file %s (its vote and log are gone): restore it, or wipe the directory to rejoin as a new node",
					dataPath, ErrCorrupt, rec.NodeID, rec.ClusterID, rec.DirectoryID, what)
			}
			b, err := openDirStore(dir, nil, opts, false)
			if err != nil {
				return nil, Identity{}, err
			}
			switch {
			case b.identity == nil: // adopted, and the process stopped before the file recorded it
				err = b.storeIdentity(rec.Identity)
			case *b.identity != rec.Identity:
				err = fmt.Errorf("replog: data directory %s: %w: the identity file says node %q of cluster %q (directory %s) but the data file %s records node %q of cluster %q (directory %s): the files come from different directories",
					dir, ErrCorrupt, rec.NodeID, rec.ClusterID, rec.DirectoryID, dataPath, b.identity.NodeID, b.identity.ClusterID, b.identity.DirectoryID)
			}
			if err != nil {
				_ = b.Close()
				return nil, Identity{}, err
			}
			return b, rec.Identity, nil
		}
		// A creation that did not finish: no store was ever returned from
		// this directory, so whatever part of a data file exists holds
		// nothing anyone relied on.
		if dataSize >= 0 {
			log.Info("removing the data file of an unfinished directory creation", "path", dataPath, "bytes", dataSize)
			if err := os.Remove(dataPath); err != nil {
				return nil, Identity{}, fmt.Errorf("replog: OpenDir: %w", err)
			}
		}
		return createData(dir, dataPath, rec, opts)
	}

	if id.DirectoryID != "" {
		return nil, Identity{}, fmt.Errorf("%w: %s: no identity file, expected directory ID %q", ErrIdentityMismatch, idPath, id.DirectoryID)
	}
	dirID, err := newDirectoryID()
	if err != nil {
		return nil, Identity{}, err
	}
	rec = identityRecord{Identity: Identity{ClusterID: id.ClusterID, NodeID: id.NodeID, DirectoryID: dirID}}
	switch {
	case dataSize == 0:
		return nil, Identity{}, fmt.Errorf("replog: data file %s: %w: it is empty and there is no identity file, so nothing says whether a node lived here: wipe the directory to start a new node",
			dataPath, ErrCorrupt)
	case dataSize > 0:
		b, err := openDirStore(dir, nil, opts, false)
		if err != nil {
			return nil, Identity{}, err
		}
		if b.identity != nil {
			// Not a legacy directory: the identity file was lost.
			if err := checkIdentity(dataPath, *b.identity, id); err != nil {
				_ = b.Close()
				return nil, Identity{}, fmt.Errorf("replog: identity file %s is missing and the data file's record does not match: %w", idPath, err)
			}
			rec.Identity = *b.identity
			log.Warn("identity file missing; rewriting it from the data file's record", "path", idPath,
				"cluster_id", rec.ClusterID, "node_id", rec.NodeID, "directory_id", rec.DirectoryID)
		} else {
			err = b.storeIdentity(rec.Identity)
			log.Info("adopting a data directory without identity", "dir", dir, "cluster_id", rec.ClusterID,
				"node_id", rec.NodeID, "directory_id", rec.DirectoryID)
		}
		rec.ready = true
		if err == nil {
			err = writeIdentity(dir, rec, opts.NoSync)
		}
		if err != nil {
			_ = b.Close()
			return nil, Identity{}, err
		}
		return b, rec.Identity, nil
	}
	if err := writeIdentity(dir, rec, opts.NoSync); err != nil {
		return nil, Identity{}, err
	}
	if openDirHook != nil {
		openDirHook("identity")
	}
	return createData(dir, dataPath, rec, opts)
}

// createData creates the data file for the not yet ready identity rec and
// marks it ready.
func createData(dir, dataPath string, rec identityRecord, opts DirOptions) (*DirStore, Identity, error) {
	b, err := openDirStore(dir, nil, opts, false)
	if err != nil {
		return nil, Identity{}, err
	}
	// openDirStore committed the new file's buckets; record the identity in it
	// too, and make its name durable before the identity file says it
	// exists.
	err = b.storeIdentity(rec.Identity)
	if err == nil && !opts.NoSync {
		err = SyncDir(dir)
	}
	if err == nil && openDirHook != nil {
		openDirHook("data")
	}
	if err == nil {
		rec.ready = true
		err = writeIdentity(dir, rec, opts.NoSync)
	}
	if err != nil {
		_ = b.Close()
		return nil, Identity{}, fmt.Errorf("replog: OpenDir: %w", err)
	}
	opts.Logger.Info("created data directory", "dir", dir, "cluster_id", rec.ClusterID,
		"node_id", rec.NodeID, "directory_id", rec.DirectoryID)
	return b, rec.Identity, nil
}

// checkIdentity compares the stored identity with the one asked for.
func checkIdentity(path string, stored, want Identity) error {
	var diffs []string
	if stored.ClusterID != want.ClusterID {
		diffs = append(diffs, fmt.Sprintf("cluster ID is %q, expected %q", stored.ClusterID, want.ClusterID))
	}
	if stored.NodeID != want.NodeID {
		diffs = append(diffs, fmt.Sprintf("node ID is %q, expected %q", stored.NodeID, want.NodeID))
	}
	if want.DirectoryID != "" && stored.DirectoryID != want.DirectoryID {
		diffs = append(diffs, fmt.Sprintf("directory ID is %q, expected %q", stored.DirectoryID, want.DirectoryID))
	}
	if diffs == nil {
		return nil
	}
	return fmt.Errorf("%w: %s: %s (the directory belongs to node %q of cluster %q; nothing was changed)",
		ErrIdentityMismatch, path, strings.Join(diffs, "; "), stored.NodeID, stored.ClusterID)
}
