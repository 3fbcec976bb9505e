package replog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/replog-io/replog/storage"
)

// saveBytes saves b as the snapshot at offset.
func saveBytes(t *testing.T, l *Log, offset uint64, b []byte) (SnapshotInfo, error) {
	t.Helper()
	ctx, cancel := appendCtx(t)
	defer cancel()
	return l.SaveSnapshot(ctx, offset, func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
}

// openBytes reads the snapshot OpenSnapshot opens, to the end.
func openBytes(t *testing.T, l *Log) (SnapshotInfo, []byte, error) {
	t.Helper()
	info, r, err := l.OpenSnapshot()
	if err != nil {
		return info, nil, err
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	return info, b, err
}

// A snapshot saved through the Log is listed, opened and read back as
// written, also after a restart; the node keeps the newest two.
func TestSnapshotSaveOpenList(t *testing.T) {
	dir := t.TempDir()
	l := openSingle(t, Options{Dir: dir})
	if _, _, err := l.OpenSnapshot(); !errors.Is(err, ErrNoSnapshot) {
		t.Fatalf("OpenSnapshot on a new log: %v", err)
	}
	if s := l.Snapshots(); s != nil {
		t.Fatalf("Snapshots on a new log: %+v", s)
	}
	var saved []SnapshotInfo
	for i := range 3 {
		appendN(t, l, 5)
		hw := l.Status().ReadableHW
		info, err := saveBytes(t, l, hw, []byte(fmt.Sprintf("state %d", i)))
		if err != nil {
			t.Fatal(err)
		}
		if info.Offset != hw || info.Size != 7 || info.Time.IsZero() || filepath.Dir(info.Path) != filepath.Join(dir, storage.SnapshotDirName) {
			t.Fatalf("save %d: %+v", i, info)
		}
		saved = append(saved, info)
	}
	list := l.Snapshots()
	if len(list) != 2 || list[0] != saved[2] || list[1] != saved[1] {
		t.Fatalf("Snapshots = %+v, want the newest two of %+v", list, saved)
	}
	info, b, err := openBytes(t, l)
	if err != nil || info != saved[2] || string(b) != "state 2" {
		t.Fatalf("OpenSnapshot: %+v %q %v", info, b, err)
	}
	l.Close()
	l = openSingle(t, Options{Dir: dir})
	if info, b, err := openBytes(t, l); err != nil || info != saved[2] || string(b) != "state 2" {
		t.Fatalf("OpenSnapshot after a restart: %+v %q %v", info, b, err)
	}
}

// R88: a snapshot is of committed entries: SaveSnapshot refuses an offset
// above the readable HW, below the newest snapshot's or below the log
// start, and saves nothing when write fails, the context ends or the Log
// closes.
func TestSaveSnapshotBounds(t *testing.T) {
	l := openSingle(t, Options{})
	offs := appendN(t, l, 20)
	hw := l.Status().ReadableHW
	_, err := saveBytes(t, l, hw+1, nil)
	wantMessage(t, "above the HW", err, ErrInvalidArgument, fmt.Sprint(hw+1), fmt.Sprint(hw), "readable high watermark")
	if _, err := saveBytes(t, l, offs[10], []byte("x")); err != nil {
		t.Fatal(err)
	}
	_, err = saveBytes(t, l, offs[9], nil)
	wantMessage(t, "below the newest", err, ErrInvalidArgument, fmt.Sprint(offs[9]), fmt.Sprint(offs[10]), "newest snapshot")
	ctx, cancel := appendCtx(t)
	defer cancel()
	if _, err := l.DeleteBefore(ctx, offs[15]); err != nil {
		t.Fatal(err)
	}
	var oor *OutOfRangeError
	if _, err := saveBytes(t, l, offs[12], nil); !errors.As(err, &oor) || !errors.Is(err, ErrOutOfRange) || oor.Offset != offs[12] || oor.LogStart != offs[15] {
		t.Fatalf("below the log start: %v", err)
	}
	boom := errors.New("boom")
	if _, err := l.SaveSnapshot(ctx, hw, func(w io.Writer) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("write's error: %v", err)
	}
	cctx, ccancel := context.WithCancel(ctx)
	_, err = l.SaveSnapshot(cctx, hw, func(w io.Writer) error {
		ccancel()
		_, err := w.Write([]byte("after the end"))
		return err
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("context ended during the write: %v", err)
	}
	// A write that drops the Writer's errors (as fmt.Fprintf in a loop
	// does) and returns nil saves nothing either: the bytes after the end
	// are missing from the body, which would be a torn state.
	cctx, ccancel = context.WithCancel(ctx)
	_, err = l.SaveSnapshot(cctx, hw, func(w io.Writer) error {
		_, _ = w.Write([]byte("before the end"))
		ccancel()
		_, _ = w.Write([]byte("after the end"))
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("context ended during a write that drops errors: %v", err)
	}
	if s := l.Snapshots(); len(s) != 1 || s[0].Offset != offs[10] {
		t.Fatalf("a refused save changed the snapshots: %+v", s)
	}
	// The one saved is at offs[10], now below the log start: still
	// opened, and its Offset tells the caller the log after it is gone.
	if info, b, err := openBytes(t, l); err != nil || info.Offset != offs[10] || string(b) != "x" || info.Offset >= l.Status().LogStart {
		t.Fatalf("OpenSnapshot below the log start: %+v %q %v", info, b, err)
	}
	l.Close()
	if _, err := saveBytes(t, l, hw, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("SaveSnapshot after Close: %v", err)
	}
	if _, _, err := l.OpenSnapshot(); !errors.Is(err, ErrClosed) {
		t.Fatalf("OpenSnapshot after Close: %v", err)
	}
}

// Close during a save does not wait for the service to stop writing: the
// Writer fails with ErrClosed, and so does SaveSnapshot; nothing is saved.
func TestCloseDuringSaveSnapshot(t *testing.T) {
	dir := t.TempDir()
	l := openSingle(t, Options{Dir: dir})
	appendN(t, l, 3)
	hw := l.Status().ReadableHW
	writing := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := l.SaveSnapshot(context.Background(), hw, func(w io.Writer) error {
			close(writing)
			for {
				if _, err := w.Write(make([]byte, 4096)); err != nil {
					return err
				}
			}
		})
		done <- err
	}()
	<-writing
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Fatalf("SaveSnapshot across Close: %v", err)
	}
	l = openSingle(t, Options{Dir: dir})
	if s := l.Snapshots(); s != nil {
		t.Fatalf("snapshots after a save cut by Close: %+v", s)
	}
}

// R88: OpenSnapshot restores only a snapshot of this log: one whose
// offset is above the log end, or whose tag is not the epoch of this
// log's entry at offset-1, is skipped for the newest one that is; with
// the right tag (the positive control) the same file is opened.
func TestOpenSnapshotSkipsAnotherLogs(t *testing.T) {
	dir := t.TempDir()
	l := openSingle(t, Options{Dir: dir})
	offs := appendN(t, l, 10)
	good, err := saveBytes(t, l, offs[3]+1, []byte("ours"))
	if err != nil {
		t.Fatal(err)
	}
	epoch := l.Status().Epoch
	leo := l.Status().LEO
	l.Close()

	plant := func(offset, epoch uint64) {
		t.Helper()
		s, err := storage.OpenSnapshots(filepath.Join(dir, storage.SnapshotDirName), storage.SnapshotOptions{Keep: 10})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if _, err := s.Save(offset, epoch, func(w io.Writer) error {
			_, err := w.Write([]byte("theirs"))
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	plant(offs[6]+1, epoch+3) // another log's history at this offset
	plant(leo+50, epoch)      // beyond this log's end
	l = openSingle(t, Options{Dir: dir, RetainUntilSnapshot: true})
	if info, b, err := openBytes(t, l); err != nil || info.Offset != good.Offset || string(b) != "ours" {
		t.Fatalf("OpenSnapshot with foreign snapshots: %+v %q %v; want ours at %d", info, b, err, good.Offset)
	}
	// Neither bounds what this node may do: retention stops at ours, the
	// one it can restore, and a save between ours and theirs is taken.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if got, err := l.DeleteBefore(ctx, leo); err != nil || got != good.Offset {
		t.Fatalf("DeleteBefore(%d) with foreign snapshots above ours: %d, %v; want ours at %d", leo, got, err, good.Offset)
	}
	if _, err := saveBytes(t, l, offs[5]+1, []byte("ours, later")); err != nil {
		t.Fatalf("a save below a foreign snapshot's offset: %v", err)
	}
	if info, b, err := openBytes(t, l); err != nil || info.Offset != offs[5]+1 || string(b) != "ours, later" {
		t.Fatalf("OpenSnapshot after a save below foreign snapshots: %+v %q %v; want the save at %d", info, b, err, offs[5]+1)
	}
	l.Close()
	plant(offs[8]+1, epoch) // the right tag
	l = openSingle(t, Options{Dir: dir})
	if info, b, err := openBytes(t, l); err != nil || info.Offset != offs[8]+1 || string(b) != "theirs" {
		t.Fatalf("OpenSnapshot of a snapshot with this log's tag: %+v %q %v", info, b, err)
	}
}

// A snapshot whose bytes rot after Open is read to the end and then
// fails with ErrCorrupt, never io.EOF; the next OpenSnapshot falls back
// to the older one kept, and so it does when the newest is torn.
func TestOpenSnapshotReaderVerifies(t *testing.T) {
	l := openSingle(t, Options{})
	offs := appendN(t, l, 3)
	older, err := saveBytes(t, l, offs[1], []byte("older"))
	if err != nil {
		t.Fatal(err)
	}
	info, err := saveBytes(t, l, l.Status().ReadableHW, bytes.Repeat([]byte("s"), 10000))
	if err != nil {
		t.Fatal(err)
	}
	if err := flipLastByte(info.Path); err != nil {
		t.Fatal(err)
	}
	if _, b, err := openBytes(t, l); !errors.Is(err, ErrCorrupt) || len(b) != 10000 || !strings.Contains(err.Error(), info.Path) {
		t.Fatalf("rotten snapshot: %d bytes, %v", len(b), err)
	}
	if got, b, err := openBytes(t, l); err != nil || got != older || string(b) != "older" {
		t.Fatalf("after a rotten read: %+v, %d bytes, %v; want %+v", got, len(b), err, older)
	}
	if s := l.Snapshots(); len(s) != 1 || s[0] != older {
		t.Fatalf("snapshots after a rotten read: %+v", s)
	}
	// Torn before it is opened: skipped the same way.
	info, err = saveBytes(t, l, l.Status().ReadableHW, []byte("newest"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(info.Path, 10); err != nil {
		t.Fatal(err)
	}
	if got, b, err := openBytes(t, l); err != nil || got != older || string(b) != "older" {
		t.Fatalf("with the newest torn: %+v, %d bytes, %v; want %+v", got, len(b), err, older)
	}
}

// R87: under RetainUntilSnapshot, retention and DeleteBefore delete
// nothing while the node has no snapshot, and never move the log start
// above its newest snapshot's offset; the policy then reaches it. Without
// the option the same log is cut far above it (the negative control
// is TestRetentionBytesKeepsTheDirectoryBounded's setup).
func TestRetainUntilSnapshot(t *testing.T) {
	old := retentionInterval
	retentionInterval = 20 * time.Millisecond
	defer func() { retentionInterval = old }()
	l := openSingle(t, Options{SegmentBytes: 64 << 10, RetentionBytes: 128 << 10, RetainUntilSnapshot: true})
	ctx, cancel := appendCtx(t)
	defer cancel()
	rec := make([]byte, 1000)
	var offs []uint64
	for range 1000 {
		off, err := l.Append(ctx, rec)
		if err != nil {
			t.Fatal(err)
		}
		offs = append(offs, off)
	}
	if got, err := l.DeleteBefore(ctx, offs[900]); err != nil || got != 0 {
		t.Fatalf("DeleteBefore with no snapshot = %d, %v; want 0", got, err)
	}
	time.Sleep(10 * retentionInterval) // ten rounds of the policy
	if ls := l.Status().LogStart; ls != 0 {
		t.Fatalf("log start %d with no snapshot", ls)
	}
	snap := offs[300]
	if _, err := saveBytes(t, l, snap, []byte("state")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "retention to reach the snapshot", 10*time.Second, func() bool { return l.Status().LogStart == snap })
	if got, err := l.DeleteBefore(ctx, offs[900]); err != nil || got != snap {
		t.Fatalf("DeleteBefore above the snapshot = %d, %v; want %d", got, err, snap)
	}
	time.Sleep(10 * retentionInterval)
	if ls := l.Status().LogStart; ls != snap {
		t.Fatalf("log start %d, above the snapshot's offset %d", ls, snap)
	}
	// The state is rebuildable: the snapshot, then the log from its
	// offset.
	info, _, err := openBytes(t, l)
	if err != nil || info.Offset != snap {
		t.Fatalf("OpenSnapshot: %+v %v", info, err)
	}
	n := 0
	for _, err := range l.ReadRange(ctx, info.Offset, offs[999]+1) {
		if err != nil {
			t.Fatalf("read from the snapshot's offset: %v", err)
		}
		n++
	}
	if n != 700 {
		t.Fatalf("read %d entries from the snapshot's offset, want 700", n)
	}
}

func flipLastByte(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	b[len(b)-1] ^= 1
	return os.WriteFile(path, b, 0o600)
}

// Saves, opens and lists from several goroutines at once (for -race):
// every save either succeeds or is refused for an offset below a newer
// one, and every opened snapshot reads back whole.
func TestSnapshotConcurrentUse(t *testing.T) {
	l := openSingle(t, Options{})
	appendN(t, l, 50)
	hw := l.Status().ReadableHW
	ctx, cancel := appendCtx(t)
	defer cancel()
	errs := make(chan error, 64)
	for g := range 4 {
		go func() {
			for i := range 8 {
				off := hw - uint64(8-i)
				body := []byte(fmt.Sprintf("state %d from %d", off, g))
				_, err := l.SaveSnapshot(ctx, off, func(w io.Writer) error {
					_, err := w.Write(body)
					return err
				})
				if err != nil && !errors.Is(err, ErrInvalidArgument) {
					errs <- err
					return
				}
				info, b, err := openBytes(t, l)
				if err != nil || !strings.HasPrefix(string(b), fmt.Sprintf("state %d from ", info.Offset)) {
					errs <- fmt.Errorf("open: %+v %q %v", info, b, err)
					return
				}
				_ = l.Snapshots()
			}
			errs <- nil
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if s := l.Snapshots(); len(s) != 2 || s[0].Offset != hw-1 {
		t.Fatalf("Snapshots after the saves: %+v", s)
	}
}
