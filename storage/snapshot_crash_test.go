package storage_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/replog-io/replog/storage"
)

// The snapshot crash test runs TestCrashHelper's child with
// envCrashSnapshot set: it opens a snapshot store (Keep 2) in its
// directory and saves snapshots in a loop, each at an offset above the
// newest it found at open, of a body of up to 1 MiB determined by the
// offset (snapshotBody), written in chunks of random sizes. It prints "B
// offset size" before each Save and "K offset" once Save returned. The
// parent kills it (at random moments, or the child kills itself at a stage
// of a save: a chunk written, the header written, the file synced, the
// rename done, an old snapshot deleted), reopens the store and checks it:
// no temporary file and no damaged file is left, Latest is the newest
// acknowledged snapshot or the one in flight when the child died (then
// whole), and every listed snapshot reads back its exact body; the two of
// highest offset that were acknowledged are listed, unless the one in
// flight displaced the older.
const envCrashSnapshot = "REPLOG_CRASH_HELPER_SNAPSHOT"

var snapshotCrashStages = []string{"write", "header", "synced", "renamed", "pruned"}

// crashSnapshotSize is the body size of the snapshot at offset.
func crashSnapshotSize(offset uint64) int {
	return rand.New(rand.NewPCG(offset, 11)).IntN(1 << 20)
}

// crashSnapshotChild is the child of TestSnapshotCrashRecovery.
func crashSnapshotChild(dir string, seed uint64) {
	s, err := storage.OpenSnapshots(filepath.Join(dir, storage.SnapshotDirName), storage.SnapshotOptions{})
	if err != nil {
		fmt.Printf("E open: %v\n", err)
		os.Exit(3)
	}
	rng := rand.New(rand.NewPCG(seed, 9))
	off := uint64(0)
	if l, ok := s.Latest(); ok {
		off = l.Offset
	}
	fmt.Printf("R %d snapshots\n", off)
	for {
		off += 1 + rng.Uint64N(1000)
		n := crashSnapshotSize(off)
		fmt.Printf("B %d %d\n", off, n)
		if _, err := s.Save(off, off/100, writeChunks(off, snapshotBody(off, n))); err != nil {
			fmt.Printf("E save %d: %v\n", off, err)
			os.Exit(3)
		}
		fmt.Printf("K %d\n", off)
	}
}

func TestSnapshotCrashRecovery(t *testing.T) {
	if os.Getenv(envCrashDir) != "" {
		return // we are the child
	}
	t.Setenv(envCrashSnapshot, "1") // the children inherit it
	kills, seed, rng := crashSchedule(t)
	dir := t.TempDir()
	snapDir := filepath.Join(dir, storage.SnapshotDirName)
	var acked []uint64 // offsets of every acknowledged snapshot, in order
	staged := map[string]int{}
	inFlightFound := 0
	var leftover []uint64 // the offsets stored at the last reopen
	for k := 0; k < kills; k++ {
		stage, lines := killRun(t, dir, seed, k, snapshotCrashStages, rng, staged)
		inFlight, ackedThisRun := uint64(0), 0
		for _, l := range lines {
			f := strings.Fields(l)
			switch {
			case len(f) == 0:
			case f[0] == "E":
				t.Fatalf("kill %d: child failed: %s", k, l)
			case f[0] == "B":
				off, _ := strconv.ParseUint(f[1], 10, 64)
				if n, _ := strconv.Atoi(f[2]); n != crashSnapshotSize(off) {
					t.Fatalf("kill %d: %q: the size is %d by the parent's reckoning", k, l, crashSnapshotSize(off))
				}
				inFlight = off
			case f[0] == "K":
				off, _ := strconv.ParseUint(f[1], 10, 64)
				if off != inFlight {
					t.Fatalf("kill %d: ack %q of a snapshot not begun (in flight %d)", k, l, inFlight)
				}
				acked = append(acked, off)
				inFlight = 0
				ackedThisRun++
			}
		}
		s, err := storage.OpenSnapshots(snapDir, storage.SnapshotOptions{})
		if err != nil {
			t.Fatalf("kill %d (%q): reopen: %v", k, stage, err)
		}
		if d := s.Damaged(); len(d) != 0 {
			t.Fatalf("kill %d (%q): damaged snapshots after a crash: %v", k, stage, d)
		}
		ents, err := os.ReadDir(snapDir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if strings.HasSuffix(e.Name(), ".tmp") {
				t.Fatalf("kill %d (%q): %s left after the reopen", k, stage, e.Name())
			}
		}
		list := s.List()
		var offsets []uint64
		for _, i := range list {
			offsets = append(offsets, i.Offset)
			want := snapshotBody(i.Offset, crashSnapshotSize(i.Offset))
			if got, err := readSnapshot(t, s, i); err != nil || !bytes.Equal(got, want) || i.Epoch != i.Offset/100 {
				t.Fatalf("kill %d (%q): snapshot %d: read %d bytes of %d, epoch %d, err %v", k, stage, i.Offset, len(got), len(want), i.Epoch, err)
			}
		}
		// What may be stored: the two highest acknowledged snapshots or,
		// when the one in flight got as far as its rename, it and those
		// (the older not yet deleted) or it and the newest of them. A
		// kill between a rename and the deletions after it leaves older
		// snapshots besides: they stay until a later save's deletions,
		// so a run that acknowledged nothing may still find them.
		n := len(acked)
		wantAcked := slices.Clone(acked[max(0, n-2):])
		slices.Reverse(wantAcked)
		rest, need := offsets, len(wantAcked)
		if len(offsets) > 0 && inFlight != 0 && offsets[0] == inFlight {
			// The save in flight got as far as its rename: it is whole
			// (checked above) and the newest; the acknowledged ones
			// follow, one of them maybe already deleted.
			inFlightFound++
			rest, need = offsets[1:], min(need, 1)
			acked = append(acked, inFlight)
		}
		ok := len(rest) >= need
		for i, off := range rest {
			switch {
			case !ok:
			case i < len(wantAcked):
				ok = off == wantAcked[i] || i >= need && slices.Contains(leftover, off)
			default:
				ok = slices.Contains(leftover, off) && (ackedThisRun == 0 || len(rest) < len(offsets))
			}
		}
		if !ok {
			t.Fatalf("kill %d (%q): stored %v, acknowledged %v, in flight %d, left over %v", k, stage, offsets, acked[max(0, n-3):n], inFlight, leftover)
		}
		leftover = offsets
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d kills (%v at a stage), %d acknowledged snapshots, %d in flight found saved", kills, staged, len(acked), inFlightFound)
	if len(acked) < kills {
		t.Fatalf("only %d snapshots acknowledged in %d runs: the child made no progress", len(acked), kills)
	}
	if kills >= 2*len(snapshotCrashStages) && len(staged) < len(snapshotCrashStages) {
		t.Fatalf("the children died at stages %v: not every stage was reached", staged)
	}
}
