package replog

import (
	"errors"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/storage"
)

// appendN appends n records "r<i>" through l and returns their offsets.
func appendN(t *testing.T, l *Log, n int) []uint64 {
	t.Helper()
	ctx, cancel := appendCtx(t)
	defer cancel()
	offs := make([]uint64, n)
	for i := range n {
		off, err := l.Append(ctx, []byte(fmt.Sprintf("r%d", i)))
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		offs[i] = off
	}
	return offs
}

// TestDeleteBeforeAndOutOfRange: DeleteBefore moves the log start (never
// past the HW), a read from below it fails with an *OutOfRangeError naming
// the log start (errors.Is ErrOutOfRange), a read from the log start gets
// the right entries, and a reader already running when the entries under it
// are deleted gets the same error, never other bytes.
func TestDeleteBeforeAndOutOfRange(t *testing.T) {
	l, err := Open(Options{Dir: t.TempDir(), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	const n = 600 // more than one read batch (readBatchCount)
	offs := appendN(t, l, n)
	ctx, cancel := appendCtx(t)
	defer cancel()

	// A reader that has read two entries (and holds the rest of its first
	// batch), then waits while the entries after that batch go.
	next, stop := iter.Pull2(l.ReadRange(ctx, 0, offs[n-1]+1))
	defer stop()
	for range 2 {
		if _, err, ok := next(); !ok || err != nil {
			t.Fatalf("first reads: %v %v", err, ok)
		}
	}

	cut := offs[n-10]
	got, err := l.DeleteBefore(ctx, cut)
	if err != nil || got != cut || l.Status().LogStart != cut {
		t.Fatalf("DeleteBefore(%d) = %d, %v; status log start %d", cut, got, err, l.Status().LogStart)
	}
	// Positive control first: from the log start on, the entries are right.
	var seen []string
	for e, err := range l.ReadRange(ctx, cut, offs[n-1]+1) {
		if err != nil {
			t.Fatalf("read from the log start: %v", err)
		}
		seen = append(seen, string(e.Data))
	}
	if len(seen) != 10 || seen[0] != fmt.Sprintf("r%d", n-10) || seen[9] != fmt.Sprintf("r%d", n-1) {
		t.Fatalf("read from the log start: %q", seen)
	}
	for _, from := range []uint64{0, cut - 1} {
		for _, err := range l.Read(ctx, from) {
			var oor *OutOfRangeError
			if !errors.As(err, &oor) || !errors.Is(err, ErrOutOfRange) || oor.Offset != from || oor.LogStart != cut {
				t.Fatalf("read from %d: %v, want an OutOfRangeError{%d, %d}", from, err, from, cut)
			}
			break
		}
	}
	// The running reader: the rest of its batch, right; then the entries
	// after it are gone.
	byOffset := map[uint64]string{}
	for i, o := range offs {
		byOffset[o] = fmt.Sprintf("r%d", i)
	}
	for {
		e, err, ok := next()
		if !ok {
			t.Fatal("the running reader ended without an error")
		}
		if err != nil {
			var oor *OutOfRangeError
			if !errors.As(err, &oor) || oor.LogStart != cut {
				t.Fatalf("running reader: %v, want an OutOfRangeError naming %d", err, cut)
			}
			break
		}
		// Entries its batch had already read are fine, and right.
		if want := byOffset[e.Offset]; string(e.Data) != want || e.Offset >= cut {
			t.Fatalf("running reader got %q at %d, want %q", e.Data, e.Offset, want)
		}
	}
	// Beyond the HW it stops below the HW, keeping the last committed
	// entry (R51); below the log start it is a no-op.
	hw := l.Status().HighWatermark
	if got, err := l.DeleteBefore(ctx, hw+1000); err != nil || got != hw-1 {
		t.Fatalf("DeleteBefore past the HW = %d, %v; want %d, below the HW", got, err, hw-1)
	}
	if got, err := l.DeleteBefore(ctx, 1); err != nil || got != hw-1 {
		t.Fatalf("DeleteBefore below the log start = %d, %v; want %d, nil", got, err, hw-1)
	}
}

// TestDeleteBeforeOnAFollower: any node may ask; every node's log start
// follows the leader's.
func TestDeleteBeforeOnAFollower(t *testing.T) {
	c := newCluster(t, 3, nil)
	lead := c.leader(15 * time.Second)
	offs := appendN(t, c.nodes[lead], 20)
	var follower string
	for id := range c.nodes {
		if id != lead {
			follower = id
			break
		}
	}
	f := c.nodes[follower]
	waitFor(t, "the follower's HW to cover the appends", 10*time.Second, func() bool {
		return f.Status().HighWatermark > offs[19]
	})
	ctx, cancel := appendCtx(t)
	defer cancel()
	got, err := f.DeleteBefore(ctx, offs[10])
	if err != nil || got < offs[10] {
		t.Fatalf("DeleteBefore on follower %s = %d, %v; want at least %d", follower, got, err, offs[10])
	}
	for id, l := range c.nodes {
		waitFor(t, id+"'s log start to follow", 10*time.Second, func() bool { return l.Status().LogStart >= offs[10] })
	}
}

// TestRetentionBytesKeepsTheDirectoryBounded: with RetentionBytes and
// small segments, the leader drops its oldest segment files as the log
// grows; the directory stays within the bound plus two segments, and what
// is left reads back right.
func TestRetentionBytesKeepsTheDirectoryBounded(t *testing.T) {
	old := retentionInterval
	retentionInterval = 20 * time.Millisecond
	defer func() { retentionInterval = old }()
	const seg, keep = 64 << 10, 256 << 10
	dir := t.TempDir()
	l, err := Open(Options{Dir: dir, NoSync: true, SegmentBytes: seg, RetentionBytes: keep})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := appendCtx(t)
	defer cancel()
	rec := make([]byte, 1000)
	var last uint64
	want := map[uint64]string{}
	for i := range 2000 {
		copy(rec, fmt.Sprintf("rec-%06d", i))
		off, err := l.Append(ctx, rec)
		if err != nil {
			t.Fatal(err)
		}
		last = off
		want[off] = string(rec[:10])
	}
	waitFor(t, "the log start to move", 10*time.Second, func() bool { return l.Status().LogStart > 0 })
	// The policy runs every 20 ms; a deletion past a live producer's
	// entries waits for its copies to commit first (R66), so the bound is
	// reached within a few rounds, not at once.
	dirSize := func() int64 {
		var size int64
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			// The commit journal (on once the node raised its level to
			// 7) is a ring preallocated at DirOptions.JournalBytes,
			// whatever the log holds: retention bounds the segments.
			if e.Name() == storage.JournalFileName {
				continue
			}
			if fi, err := os.Stat(filepath.Join(dir, e.Name())); err == nil && fi.Mode().IsRegular() {
				size += fi.Size()
			}
		}
		return size
	}
	deadline := time.Now().Add(10 * time.Second)
	for size := dirSize(); size > keep+3*seg; size = dirSize() {
		if time.Now().After(deadline) {
			t.Fatalf("directory holds %d bytes, want at most about %d (retention %d + segments of %d)", size, keep+3*seg, keep, seg)
		}
		time.Sleep(20 * time.Millisecond)
	}
	start := l.Status().LogStart
	n := 0
	for e, err := range l.ReadRange(ctx, start, last+1) {
		if err != nil {
			t.Fatal(err)
		}
		if string(e.Data[:10]) != want[e.Offset] {
			t.Fatalf("offset %d holds %q, want %q", e.Offset, e.Data[:10], want[e.Offset])
		}
		n++
	}
	if n == 0 || n < int(last+1-start)-2 {
		t.Fatalf("read %d entries from the log start %d to %d", n, start, last)
	}
}

// TestRetentionAgeDropsOldSegments: sealed segments whose newest entry is
// older than RetentionAge go, the active one stays; with a longer age
// (the negative control) nothing goes.
func TestRetentionAgeDropsOldSegments(t *testing.T) {
	old := retentionInterval
	retentionInterval = 20 * time.Millisecond
	defer func() { retentionInterval = old }()
	open := func(age time.Duration) *Log {
		l, err := Open(Options{Dir: t.TempDir(), NoSync: true, SegmentBytes: 32 << 10, RetentionAge: age})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		ctx, cancel := appendCtx(t)
		defer cancel()
		rec := make([]byte, 1000)
		for range 300 {
			if _, err := l.Append(ctx, rec); err != nil {
				t.Fatal(err)
			}
		}
		return l
	}
	young := open(time.Hour)
	aged := open(200 * time.Millisecond)
	leo := aged.Status().LEO
	waitFor(t, "old segments to go", 10*time.Second, func() bool { return aged.Status().LogStart > 0 })
	if ls := aged.Status().LogStart; ls >= leo {
		t.Fatalf("log start %d reached the LEO %d: the active segment went too", ls, leo)
	}
	// Many policy rounds have run on young by now.
	if ls := young.Status().LogStart; ls != 0 {
		t.Fatalf("RetentionAge of an hour deleted up to %d", ls)
	}
}

func TestRetentionOptionsValidate(t *testing.T) {
	for field, o := range map[string]Options{
		"RetentionBytes": {Dir: "d", RetentionBytes: -1},
		"RetentionAge":   {Dir: "d", RetentionAge: -time.Second},
		"SegmentBytes":   {Dir: "d", SegmentBytes: -1},
	} {
		err := o.Validate()
		if !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), field) {
			t.Fatalf("%s negative: %v, want ErrInvalidOptions naming it", field, err)
		}
	}
	if err := (Options{Dir: "d", RetentionBytes: 1 << 30, RetentionAge: time.Hour, SegmentBytes: 1 << 20}).Validate(); err != nil {
		t.Fatalf("positive control: %v", err)
	}
}

// TestRetentionTarget: the policies pick whole sealed segments, oldest
// first, never the active one; by size while the rest holds more than the
// bound, by age while a segment's newest entry is older than the bound (an
// entry without a time never expires).
func TestRetentionTarget(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_000)
	store := storage.NewMemory()
	var es []protocol.Entry
	for i := range 40 {
		// Offsets 0-9 an hour old, 10-19 a minute old, 20-39 now; 30-39
		// carry no time.
		ts := now.Add(-time.Hour)
		switch {
		case i >= 30:
			ts = time.Time{}
		case i >= 20:
			ts = now
		case i >= 10:
			ts = now.Add(-time.Minute)
		}
		var ms int64
		if !ts.IsZero() {
			ms = ts.UnixMilli()
		}
		es = append(es, protocol.Entry{Offset: uint64(i), Epoch: 1, Time: ms, Type: protocol.EntryData, Data: []byte{1}})
	}
	if err := store.Apply([]protocol.Write{{Kind: protocol.WriteAppend, Entries: es}}); err != nil {
		t.Fatal(err)
	}
	segs := []storage.SegmentInfo{
		{Base: 0, End: 10, Bytes: 100},
		{Base: 10, End: 20, Bytes: 100},
		{Base: 20, End: 30, Bytes: 100},
		{Base: 30, End: 40, Bytes: 100},
		{Base: 40, End: 40, Bytes: 100, Active: true},
	}
	for _, c := range []struct {
		name     string
		logStart uint64
		bytes    int64
		age      time.Duration
		want     uint64
	}{
		{"off", 0, 0, 0, 0},
		{"bytes: keep 300 of 500", 0, 300, 0, 20},
		{"bytes: keep 450", 0, 450, 0, 10},
		{"bytes: keep 1 never drops the active segment", 0, 1, 0, 40},
		{"bytes: segments below the log start are gone already", 10, 300, 0, 20},
		{"age: older than 30 minutes", 0, 0, 30 * time.Minute, 10},
		{"age: older than 30 seconds", 0, 0, 30 * time.Second, 20},
		{"age: entries without a time never expire", 0, 0, time.Nanosecond, 20},
		{"both: the further one wins", 0, 450, 30 * time.Second, 20},
	} {
		if got := retentionTarget(segs, store, c.logStart, c.bytes, c.age, now); got != c.want {
			t.Errorf("%s: target %d, want %d", c.name, got, c.want)
		}
	}
}
