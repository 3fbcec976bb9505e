package replog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"time"

	"github.com/replog-io/replog/internal/shell"
	"github.com/replog-io/replog/storage"
)

// SnapshotInfo describes a snapshot of the service's state that this node
// keeps (Log.SaveSnapshot).
type SnapshotInfo struct {
	// Offset is the offset the state is of: it reflects the entries below
	// Offset, and a service that restores it reads on from Offset.
	Offset uint64
	// Size is the snapshot's length in bytes, as the service wrote it.
	Size int64
	// Time is when it was saved, by this node's clock, to the millisecond.
	Time time.Time
	// Path is its file, under the data directory's snapshots/.
	Path string
}

func snapshotInfo(i storage.SnapshotInfo) SnapshotInfo {
	return SnapshotInfo{Offset: i.Offset, Size: i.Size, Time: i.Time, Path: i.Path}
}

// snapshotState is the Log's snapshot store (docs/storage.md section 12)
// and the lock that makes each SaveSnapshot's checks and save one step.
type snapshotState struct {
	store  *storage.SnapshotStore
	saveMu sync.Mutex
}

// openSnapshots opens the data directory's snapshot store, synced as the
// log's store is.
func (l *Log) openSnapshots(so storage.DirOptions) error {
	s, err := storage.OpenSnapshots(filepath.Join(l.opts.Dir, storage.SnapshotDirName), storage.SnapshotOptions{
		NoSync: so.NoSync,
		Logger: so.Logger,
		// Only a snapshot of this log counts toward the two kept: another
		// log's (or one above this log's end) must not push this log's
		// out of the store.
		Counts: func(i storage.SnapshotInfo) bool { ok, _ := l.describes(i); return ok },
	})
	if err != nil {
		return fmt.Errorf("replog: open snapshots: %w", err)
	}
	l.snap.store = s
	return nil
}

// closeSnapshots closes the snapshot store: it waits for a save under way
// (whose writes fail with ErrClosed once the Log is closing).
func (l *Log) closeSnapshots() error {
	if l.snap.store == nil {
		return nil
	}
	return l.snap.store.Close()
}

// SaveSnapshot saves a snapshot of the service's state as of offset: the
// state that the log's entries below offset make (a service that has
// applied every entry up to e, offset e.Offset+1; one that has read
// ReadRange(ctx, from, hw) to the end, hw). write streams the state into
// the Writer it is given, which buffers and checksums it on its way to a
// file in the data directory's snapshots/ (nothing is held whole in
// memory); once write returns nil the file is made durable, and the
// node keeps its newest two snapshots. A snapshot is of committed entries
// and is tagged with the log prefix it was built from (docs/protocol.md
// R88): offset must lie between the log start and the readable high
// watermark (Status.ReadableHW) and not below the newest snapshot's
// offset. Under Options.RetainUntilSnapshot, retention never moves the log
// start past the newest snapshot's offset (R87). SaveSnapshot calls run
// one at a time; appends and reads go on meanwhile.
//
// Errors (nothing is saved):
//   - ErrInvalidArgument: offset is above the readable high watermark, or
//     below the newest snapshot's offset; the message says which.
//   - *OutOfRangeError (ErrOutOfRange): offset is below the log start.
//   - write's own error, as it is.
//   - ctx.Err(): ctx ended before the snapshot was saved (write's later
//     writes fail with it).
//   - ErrClosed: the Log was closed (write's later writes fail with it).
//   - ErrStorageFailed: the node's log has stopped (as for Append); an
//     error writing the snapshot's file is returned wrapped, and does not
//     stop the node.
func (l *Log) SaveSnapshot(ctx context.Context, offset uint64, write func(io.Writer) error) (SnapshotInfo, error) {
	if err := l.snapshotUsable(); err != nil {
		return SnapshotInfo{}, err
	}
	if err := ctx.Err(); err != nil {
		return SnapshotInfo{}, err
	}
	l.snap.saveMu.Lock()
	defer l.snap.saveMu.Unlock()
	st := l.Status()
	if offset > st.ReadableHW {
		return SnapshotInfo{}, fmt.Errorf("%w: snapshot offset %d is above the readable high watermark %d (a snapshot is of committed entries)", ErrInvalidArgument, offset, st.ReadableHW)
	}
	if latest, ok := l.newestSnapshot(); ok && offset < latest.Offset {
		return SnapshotInfo{}, fmt.Errorf("%w: snapshot offset %d is below the newest snapshot's %d", ErrInvalidArgument, offset, latest.Offset)
	}
	// The epoch map first, then the log start: a deletion in between
	// leaves a map that still covers every offset at or above the log
	// start read after it.
	epochs := l.store.EpochMap()
	if ls := l.store.LogStart(); offset < ls {
		return SnapshotInfo{}, &OutOfRangeError{Offset: offset, LogStart: ls}
	}
	epoch := shell.SnapshotEpoch(epochs, offset)
	info, err := l.snap.store.Save(offset, epoch, func(w io.Writer) error {
		g := &guardedWriter{w: w, ctx: ctx, closing: l.closing}
		if err := write(g); err != nil {
			return err
		}
		// A write that dropped the guard's error left out what it wrote
		// after it: the body is not the state.
		return g.err
	})
	if errors.Is(err, storage.ErrClosed) {
		err = ErrClosed
	}
	if err != nil {
		return SnapshotInfo{}, err
	}
	return snapshotInfo(info), nil
}

// snapshotUsable is SaveSnapshot's and OpenSnapshot's ErrClosed and
// ErrStorageFailed.
func (l *Log) snapshotUsable() error {
	if err := l.failed(); err != nil {
		return err
	}
	select {
	case <-l.closing:
		return ErrClosed
	default:
	}
	return nil
}

// guardedWriter is the Writer SaveSnapshot's write gets: it stops taking
// bytes once the caller's context ends or the Log closes, so that a long
// snapshot neither outlives its caller nor holds up Close. Its first
// refusal sticks (err), so that SaveSnapshot fails even if write drops it.
type guardedWriter struct {
	w       io.Writer
	ctx     context.Context
	closing chan struct{}
	err     error
}

func (g *guardedWriter) Write(p []byte) (int, error) {
	if g.err != nil {
		return 0, g.err
	}
	if err := g.ctx.Err(); err != nil {
		g.err = err
		return 0, err
	}
	select {
	case <-g.closing:
		g.err = ErrClosed
		return 0, ErrClosed
	default:
	}
	return g.w.Write(p)
}

// describes says whether the snapshot can be restored on this log (R88):
// its offset is within the log and the log's entry at offset-1 has the
// epoch it was tagged with. A snapshot below the log start cannot be
// checked (the entry is gone), and is returned: its Offset below
// Status.LogStart tells the caller that the log no longer holds what
// follows it.
func (l *Log) describes(i storage.SnapshotInfo) (bool, string) {
	// The epoch map first: a deletion after it leaves a map that still
	// covers every offset at or above the log start read after it.
	epochs := l.store.EpochMap()
	return shell.SnapshotDescribes(epochs, l.store.LogStart(), l.store.LEO(), i)
}

// OpenSnapshot opens this node's newest snapshot that describes its log
// (R88) and returns its info and a reader of the state, as SaveSnapshot's
// write wrote it. The reader checks the snapshot's checksum as it
// streams: the read that ends it fails with an error wrapping ErrCorrupt
// (naming the file) if the bytes are not those saved, and io.EOF follows
// only a match, so a service must read it to the end (io.EOF) before it
// trusts the state. Close it when done. Restore the state, then read the
// log from SnapshotInfo.Offset on; an Offset below Status().LogStart means
// the entries after it are gone here (another node's DeleteBefore, or a
// leader without RetainUntilSnapshot, deleted them): the state cannot be
// brought up to date from this node's log. A snapshot saved on another
// log (its tag is not this log's epoch at its offset) is skipped and
// logged at Warn, as is one found damaged when its file was checked (at
// Open, each one is read whole) or since: a reader that ends in
// ErrCorrupt drops its snapshot from the node's list (Snapshots), so the
// next OpenSnapshot returns the one below it, and the next SaveSnapshot
// deletes the damaged file.
//
// Errors: ErrNoSnapshot (none is kept, or none describes this log);
// ErrClosed; ErrStorageFailed (as for Append); the file system's.
func (l *Log) OpenSnapshot() (SnapshotInfo, io.ReadCloser, error) {
	if err := l.snapshotUsable(); err != nil {
		return SnapshotInfo{}, nil, err
	}
	// A save between List and Open may replace or delete the snapshot
	// listed: then the list is taken again. A few times at most: a file
	// that an outsider replaced stays unlike its listing, and is skipped.
	for round := 0; ; round++ {
		raced := false
		for _, i := range l.snap.store.List() {
			if ok, why := l.describes(i); !ok {
				l.logger.Warn("snapshot skipped: not of this log", "path", i.Path, "reason", why)
				continue
			}
			r, err := l.snap.store.Open(i)
			if errors.Is(err, storage.ErrNoSnapshot) && round < snapshotOpenRounds {
				raced = true
				break
			}
			switch {
			case errors.Is(err, storage.ErrClosed):
				return SnapshotInfo{}, nil, ErrClosed
			case errors.Is(err, storage.ErrNoSnapshot):
				l.logger.Warn("snapshot skipped: its file is not the one listed", "path", i.Path, "error", err)
				continue
			case errors.Is(err, storage.ErrCorrupt):
				// Damaged since it was checked (the store lists it no
				// more): the one below it may still be whole.
				l.logger.Warn("snapshot skipped: damaged", "path", i.Path, "error", err)
				continue
			case err != nil:
				return SnapshotInfo{}, nil, err
			}
			return snapshotInfo(i), r, nil
		}
		if !raced {
			break
		}
	}
	return SnapshotInfo{}, nil, ErrNoSnapshot
}

// Snapshots lists the snapshots this node keeps, newest (highest offset)
// first; nil with none. It never blocks on a save under way.
func (l *Log) Snapshots() []SnapshotInfo {
	if l.snap.store == nil {
		return nil
	}
	var out []SnapshotInfo
	for _, i := range l.snap.store.List() {
		out = append(out, snapshotInfo(i))
	}
	return out
}

// snapshotOpenRounds is how many times OpenSnapshot takes the list again
// after a save raced it.
const snapshotOpenRounds = 4

// retainBound bounds a request to move the log start by R87
// (shell.RetainBound) with this node's newest snapshot.
func (l *Log) retainBound(offset uint64) uint64 {
	i, ok := l.newestSnapshot()
	return shell.RetainBound(l.opts.RetainUntilSnapshot, i, ok, offset)
}

// newestSnapshot is the newest snapshot kept that describes this log
// (R88): the one OpenSnapshot would restore, unless its file is damaged.
// One that does not (another log's, or above this log's end) neither
// bounds retention (R87: the state could not be rebuilt from it) nor
// refuses a save below it.
func (l *Log) newestSnapshot() (storage.SnapshotInfo, bool) {
	for _, i := range l.snap.store.List() {
		if ok, _ := l.describes(i); ok {
			return i, true
		}
	}
	return storage.SnapshotInfo{}, false
}
