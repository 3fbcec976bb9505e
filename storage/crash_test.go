package storage_test

import (
	"bufio"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/replog-io/replog/internal/storagetest"
	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/storage"
)

// The crash test runs a child process (this test binary, re-executed with
// TestCrashHelper selected) that opens a data directory with OpenDir
// (segments of crashSegmentBytes, so that the active segment rolls every
// few batches and prefix deletions unlink sealed segments) and applies
// batches of mixed writes (appends, truncations, prefix deletions, quorum
// states, HW checkpoints; one to four per Apply) in a loop, and prints
// every batch it starts ("B seq ...") and every batch acknowledged ("K seq
// ..."). The parent kills it with SIGKILL at random moments, or has it kill
// itself at a stage of a roll or a deletion (the store's rollHook: the next
// active file prepared ahead of the roll by the store's goroutine, the new
// active file written, the sealed name linked, the rename done, a
// deletion committed before its unlinks), reopens the store and checks it
// against a model (a Memory store) built from the acknowledged batches:
// the store must equal the model (entries, epoch map, voter-set rows,
// vote, HW), or the model plus the one batch in flight when the child
// died, applied whole (never part of a batch); no stray file of a roll or
// deletion is left. Some appended entries are voters entries (crashEntries),
// and the store's voter-set rows must also be those the surviving batches
// imply by R55, worked out from the batches alone (impliedVoters).

const (
	envCrashDir  = "REPLOG_CRASH_HELPER_DIR"
	envCrashSeed = "REPLOG_CRASH_HELPER_SEED"
	// envCrashKills overrides the number of kills (default 24).
	envCrashKills = "REPLOG_CRASH_KILLS"
	// envCrashDieAt makes the child kill itself at a stage of OpenDir's
	// creation of the directory ("identity" or "data").
	envCrashDieAt = "REPLOG_CRASH_HELPER_DIE_AT"
	// envCrashRollAt makes the child kill itself at the Nth time it
	// reaches a stage of a roll or deletion ("stage N", see rollHook).
	envCrashRollAt = "REPLOG_CRASH_HELPER_ROLL_AT"
	// crashSegmentBytes: a roll every few batches.
	crashSegmentBytes = 24 << 10
)

// crashStages are the rollHook stages the parent has the child die at.
var crashStages = []string{"prepared", "next", "linked", "renamed", "dropped"}

var crashOpts = storage.DirOptions{Timeout: 30 * time.Second, SegmentBytes: crashSegmentBytes}

// With envCrashJournal set the child (and the parent's reopen) runs the
// commit journal, small enough that checkpoints and cuts happen every
// few batches and Applies wait for room; the child also dies at the
// journal's stages (journalHook: a record written, not yet synced; a
// checkpoint committed, the journal not yet cut).
const envCrashJournal = "REPLOG_CRASH_HELPER_JOURNAL"

var crashJournalStages = []string{"append", "cut"}

// With envCrashShared set the child opens two directories (crashSharedLogs,
// under its directory) on one shared journal (crashSharedJournal, 64 KiB)
// and applies batches to both at once, each from its goroutine, so that
// their Applies share rounds; it prints "B log seq ..." and "K log seq
// ..." lines.
const envCrashShared = "REPLOG_CRASH_HELPER_SHARED"

var crashSharedLogs = []string{"a", "b"}

const crashSharedJournal = "shared.journal"

// crashSharedOpen opens the shared journal in dir and the stores on it.
func crashSharedOpen(dir string) (*storage.Journal, []*storage.DirStore, error) {
	j, err := storage.OpenJournal(filepath.Join(dir, crashSharedJournal), storage.JournalOptions{Bytes: 64 << 10})
	if err != nil {
		return nil, nil, err
	}
	var stores []*storage.DirStore
	for i, name := range crashSharedLogs {
		s, _, err := storage.OpenDir(filepath.Join(dir, name), crashID, storage.DirOptions{Timeout: 30 * time.Second, SegmentBytes: crashSegmentBytes,
			SharedJournal: j, JournalLogID: uint32(i + 1)})
		if err != nil {
			return nil, nil, fmt.Errorf("open %s: %w", name, err)
		}
		stores = append(stores, s)
	}
	return j, stores, nil
}

// crashSharedChild is the child of TestDirCrashRecoverySharedJournal.
func crashSharedChild(dir string, seed uint64) {
	_, stores, err := crashSharedOpen(dir)
	if err != nil {
		fmt.Printf("E open: %v\n", err)
		os.Exit(3)
	}
	var mu sync.Mutex
	printf := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Printf(format, args...)
	}
	printf("R 0 shared\n")
	for i, s := range stores {
		go func() {
			rng := rand.New(rand.NewPCG(seed, uint64(8+i)))
			q, _ := s.QuorumState()
			maxEpoch := max(q.Epoch, s.LastEpoch(), 1)
			name := crashSharedLogs[i]
			for seq := 0; ; seq++ {
				batch := nextCrashBatch(rng, s, &maxEpoch)
				printf("B %s %d %v\n", name, seq, batch)
				if err := batch.apply(s); err != nil {
					printf("E %s %d %v: %v\n", name, seq, batch, err)
					os.Exit(3)
				}
				st := s.Stats()
				printf("K %s %d %d\n", name, seq, batch.payloadSum())
				printf("S rolls %d deleted %d checkpoints %d rounds %d batches %d\n", st.Rolls, st.SegmentsDeleted, st.Checkpoints, st.GroupCommits, st.JournalBatches)
			}
		}()
	}
	select {}
}

// TestDirCrashRecoverySharedJournal is the crash test of two stores on one
// shared journal, both writing at once: after each kill (at random
// moments, at the journal's stages and those of a roll or deletion), each
// store, reopened on the reopened journal, holds exactly its acknowledged
// batches, or those and its batch in flight, whole.
func TestDirCrashRecoverySharedJournal(t *testing.T) {
	if os.Getenv(envCrashDir) != "" {
		return // we are the child
	}
	t.Setenv(envCrashShared, "1") // the children inherit it
	stages := append(slices.Clone(crashStages), crashJournalStages...)
	kills, seed, rng := crashSchedule(t)
	dir := t.TempDir()
	acked := map[string][]crashBatch{}
	staged := map[string]int{}
	inFlightApplied, checkpoints, rounds, batches := 0, uint64(0), uint64(0), uint64(0)
	for k := 0; k < kills; k++ {
		stage, lines := killRun(t, dir, seed, k, stages, rng, staged)
		inFlight := map[string]crashBatch{}
		begun := map[string]crashBatch{}
		for _, l := range lines {
			f := strings.Fields(l)
			switch {
			case len(f) == 0:
			case f[0] == "E":
				t.Fatalf("kill %d: child failed: %s", k, l)
			case f[0] == "B":
				b, err := parseBatch(f[3:])
				if err != nil {
					t.Fatalf("kill %d: %q: %v", k, l, err)
				}
				begun[f[1]+" "+f[2]] = b
				inFlight[f[1]] = b
			case f[0] == "K":
				b, ok := begun[f[1]+" "+f[2]]
				if !ok {
					t.Fatalf("kill %d: ack %q of a batch not begun", k, l)
				}
				if want := strconv.FormatUint(uint64(b.payloadSum()), 10); len(f) != 4 || f[3] != want {
					t.Fatalf("kill %d: child's payload checksum %q, parent's %s", k, l, want)
				}
				acked[f[1]] = append(acked[f[1]], b)
				delete(inFlight, f[1])
			}
		}
		j, stores, err := crashSharedOpen(dir)
		if err != nil {
			t.Fatalf("kill %d (%q): reopen: %v", k, stage, err)
		}
		for i, s := range stores {
			name := crashSharedLogs[i]
			errWithout := storagetest.Compare(s, replay(t, acked[name]))
			if errWithout != nil {
				b, ok := inFlight[name]
				if !ok {
					t.Fatalf("kill %d: store %s differs from its acknowledged writes (nothing in flight): %v", k, name, errWithout)
				}
				if err := storagetest.Compare(s, replay(t, append(acked[name][:len(acked[name]):len(acked[name])], b))); err != nil {
					t.Fatalf("kill %d: store %s is neither its acknowledged batches (%v) nor those plus the whole batch in flight %v (%v)", k, name, errWithout, b, err)
				}
				acked[name] = append(acked[name], b)
				inFlightApplied++
			}
			if err := storagetest.CheckConsistent(s); err != nil {
				t.Fatalf("kill %d: store %s: %v", k, name, err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
		}
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
		checkpoints += parseCount(lines, "checkpoints")
		rounds += parseCount(lines, "rounds")
		batches += parseCount(lines, "batches")
	}
	t.Logf("%d kills (%v at a stage), %d+%d acknowledged batches, %d unacknowledged found applied; at least %d checkpoints; the last child's counters: %d rounds, %d of its batches",
		kills, staged, len(acked["a"]), len(acked["b"]), inFlightApplied, checkpoints, rounds, batches)
	if checkpoints == 0 {
		t.Fatal("no checkpoint in any run: the journal's checkpoints and cuts were never killed")
	}
	if len(acked["a"]) < kills || len(acked["b"]) < kills {
		t.Fatalf("only %d and %d batches acknowledged in %d runs: the child made no progress", len(acked["a"]), len(acked["b"]), kills)
	}
	if kills >= 2*len(stages) && len(staged) < len(stages) {
		t.Fatalf("the children died at stages %v: not every stage was reached", staged)
	}
}

// envCrashFormatAt makes the child kill itself at a stage of the stamp of
// the directory's storage format ("tmp" or "renamed", see formatHook).
const envCrashFormatAt = "REPLOG_CRASH_HELPER_FORMAT_AT"

var crashJournalOpts = storage.DirOptions{Timeout: 30 * time.Second, SegmentBytes: crashSegmentBytes, Journal: true, JournalBytes: 64 << 10}

// crashOptions are the options of the mode the environment says.
func crashOptions() storage.DirOptions {
	if os.Getenv(envCrashJournal) != "" {
		return crashJournalOpts
	}
	return crashOpts
}

// crashID is the identity the crash test's directory is opened with.
var crashID = storage.Identity{ClusterID: "crash", NodeID: "child"}

// crashPayloadSize makes payload sizes deterministic from (offset, epoch).
func crashPayloadSize(off, epoch uint64) int { return int((off*31 + epoch*17) % 200) }

// crashVoters reports whether the entry at (off, epoch) is a voters entry
// (about one in 61: most appends of the test carry one or two).
func crashVoters(off, epoch uint64) bool { return (off+13*epoch)%61 == 5 }

func crashEntries(first uint64, count int, epoch uint64) []protocol.Entry {
	es := make([]protocol.Entry, count)
	for i := range es {
		off := first + uint64(i)
		if crashVoters(off, epoch) {
			es[i] = storagetest.VotersEntry(off, epoch, storagetest.Voters(off^epoch))
			continue
		}
		es[i] = protocol.Entry{Offset: off, Epoch: epoch, Type: protocol.EntryData,
			Data: storagetest.Payload(off, epoch, crashPayloadSize(off, epoch))}
	}
	return es
}

// impliedVoters returns the voter-set rows the batches imply (R55), from
// the writes alone: an append adds its voters entries' sets, a truncation
// drops the rows at or above its point, a prefix deletion keeps of the rows
// below its point the newest and the newest change before it
// (protocol.KeptVoterRows).
func impliedVoters(batches []crashBatch) []protocol.VotersAt {
	var rows []protocol.VotersAt
	for _, b := range batches {
		for _, o := range b {
			switch o.kind {
			case 'A':
				for off := o.a; off < o.a+o.b; off++ {
					if crashVoters(off, o.epoch) {
						rows = append(rows, protocol.VotersAt{Offset: off, Voters: storagetest.Voters(off ^ o.epoch)})
					}
				}
			case 'T':
				for len(rows) > 0 && rows[len(rows)-1].Offset >= o.a {
					rows = rows[:len(rows)-1]
				}
			case 'D':
				rows = protocol.KeptVoterRows(rows, o.a)
			}
		}
	}
	return rows
}

func payloadSum(es []protocol.Entry) uint32 {
	var c uint32
	for _, e := range es {
		c = crc32.Update(c, crc32.IEEETable, e.Data)
	}
	return c
}

// crashOp is one write of a batch as printed by the child.
type crashOp struct {
	kind        byte // A append, T truncate, D delete prefix, Q quorum, H HW checkpoint
	a, b, epoch uint64
}

func (o crashOp) String() string {
	return fmt.Sprintf("%c %d %d %d", o.kind, o.a, o.b, o.epoch)
}

func (o crashOp) write() protocol.Write {
	switch o.kind {
	case 'A':
		return protocol.Write{Kind: protocol.WriteAppend, Entries: crashEntries(o.a, int(o.b), o.epoch)}
	case 'T':
		return protocol.Write{Kind: protocol.WriteTruncate, Offset: o.a}
	case 'D':
		return protocol.Write{Kind: protocol.WriteDeletePrefix, Offset: o.a}
	case 'Q':
		return protocol.Write{Kind: protocol.WriteQuorumState, Quorum: protocol.QuorumState{Epoch: o.epoch, LeaderID: "child"}}
	case 'H':
		return protocol.Write{Kind: protocol.WriteHWCheckpoint, Offset: o.a}
	}
	return protocol.Write{} // an invalid kind: Apply refuses it
}

// crashBatch is one Apply as printed by the child.
type crashBatch []crashOp

func (b crashBatch) String() string {
	parts := []string{strconv.Itoa(len(b))}
	for _, o := range b {
		parts = append(parts, o.String())
	}
	return strings.Join(parts, " ")
}

func (b crashBatch) apply(s storage.Store) error {
	ws := make([]protocol.Write, len(b))
	for i, o := range b {
		ws[i] = o.write()
	}
	return s.Apply(ws)
}

// payloadSum is the checksum of the payloads b appends.
func (b crashBatch) payloadSum() uint32 {
	var es []protocol.Entry
	for _, o := range b {
		if o.kind == 'A' {
			es = append(es, crashEntries(o.a, int(o.b), o.epoch)...)
		}
	}
	return payloadSum(es)
}

// parseBatch parses "n op1 ... opn", each op four fields.
func parseBatch(fields []string) (crashBatch, error) {
	if len(fields) == 0 {
		return nil, fmt.Errorf("empty batch")
	}
	n, err := strconv.Atoi(fields[0])
	if err != nil || n < 1 || len(fields) != 1+4*n {
		return nil, fmt.Errorf("bad batch %q", fields)
	}
	b := make(crashBatch, n)
	for i := range b {
		if b[i], err = parseOp(fields[1+4*i : 5+4*i]); err != nil {
			return nil, err
		}
	}
	return b, nil
}

func parseOp(fields []string) (crashOp, error) {
	if len(fields) != 4 || len(fields[0]) != 1 {
		return crashOp{}, fmt.Errorf("bad op %q", fields)
	}
	o := crashOp{kind: fields[0][0]}
	var err error
	for i, p := range []*uint64{&o.a, &o.b, &o.epoch} {
		if *p, err = strconv.ParseUint(fields[i+1], 10, 64); err != nil {
			return o, err
		}
	}
	return o, nil
}

// TestCrashHelper is the child's body; it does nothing unless run by
// TestDirCrashRecovery.
func TestCrashHelper(t *testing.T) {
	dir := os.Getenv(envCrashDir)
	if dir == "" {
		return
	}
	seed, _ := strconv.ParseUint(os.Getenv(envCrashSeed), 10, 64)
	rng := rand.New(rand.NewPCG(seed, 7))
	if stage := os.Getenv(envCrashDieAt); stage != "" {
		storage.SetOpenDirHook(func(at string) {
			if at == stage {
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {} // the signal is on its way
			}
		})
	}
	if stage := os.Getenv(envCrashFormatAt); stage != "" {
		storage.SetFormatHook(func(at string) {
			if at == stage {
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {} // the signal is on its way
			}
		})
	}
	if at := os.Getenv(envCrashRollAt); at != "" {
		var stage string
		var n int
		if _, err := fmt.Sscanf(at, "%s %d", &stage, &n); err != nil {
			fmt.Printf("E %s=%q: %v\n", envCrashRollAt, at, err)
			os.Exit(3)
		}
		// The roll and journal hooks run on the writer and on the
		// background goroutine both.
		var left atomic.Int64
		left.Store(int64(n))
		hook := func(s string) {
			if s == stage {
				if left.Add(-1) == 0 {
					_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
					select {} // the signal is on its way
				}
			}
		}
		storage.SetRollHook(hook)
		storage.SetJournalHook(hook)
		storage.SetSnapshotHook(hook)
	}
	if os.Getenv(envCrashShared) != "" {
		crashSharedChild(dir, seed)
	}
	if os.Getenv(envCrashSnapshot) != "" {
		crashSnapshotChild(dir, seed)
	}
	s, id, err := storage.OpenDir(dir, crashID, crashOptions())
	if err != nil {
		fmt.Printf("E open: %v\n", err)
		os.Exit(3)
	}
	q, _ := s.QuorumState()
	maxEpoch := max(q.Epoch, s.LastEpoch(), 1)
	fmt.Printf("R %d %s\n", s.LEO(), id.DirectoryID)
	for seq := 0; ; seq++ {
		batch := nextCrashBatch(rng, s, &maxEpoch)
		fmt.Printf("B %d %v\n", seq, batch)
		if err := batch.apply(s); err != nil {
			fmt.Printf("E %d %v: %v\n", seq, batch, err)
			os.Exit(3)
		}
		fmt.Printf("K %d %d\n", seq, batch.payloadSum())
		st := s.Stats()
		fmt.Printf("S rolls %d deleted %d checkpoints %d\n", st.Rolls, st.SegmentsDeleted, st.Checkpoints)
	}
}

// nextCrashBatch is the child's next batch for s, built against the state
// its earlier writes leave; maxEpoch is the highest epoch used so far.
func nextCrashBatch(rng *rand.Rand, s storage.Store, maxEpoch *uint64) crashBatch {
	leo, start, last := s.LEO(), s.LogStart(), s.LastEpoch()
	var batch crashBatch
	for size := 1 + rng.IntN(4); len(batch) < size; {
		switch r := rng.IntN(100); {
		case r < 6 && leo > start:
			// A truncation, then a new epoch as a new leader would; the
			// last epoch is then the store's to say: the batch ends.
			*maxEpoch++
			batch = append(batch,
				crashOp{kind: 'T', a: leo - 1 - rng.Uint64N(min(leo-start, 50))},
				crashOp{kind: 'Q', epoch: *maxEpoch})
			size = 0
		case r < 10 && leo > start:
			op := crashOp{kind: 'D', a: start + rng.Uint64N((leo-start)/2+1)}
			batch, start = append(batch, op), op.a
		case r < 12:
			*maxEpoch++
			batch = append(batch, crashOp{kind: 'Q', epoch: *maxEpoch})
		case r < 16:
			batch = append(batch, crashOp{kind: 'H', a: leo - rng.Uint64N(leo-start+1)})
		default:
			epoch := max(last, 1)
			if epoch < *maxEpoch && rng.IntN(3) == 0 {
				epoch = *maxEpoch
			}
			op := crashOp{kind: 'A', a: leo, b: 1 + rng.Uint64N(200), epoch: epoch}
			batch, leo, last = append(batch, op), leo+op.b, epoch
		}
	}
	return batch
}

func TestDirCrashRecovery(t *testing.T) {
	if os.Getenv(envCrashDir) != "" {
		return // we are the child
	}
	testCrashRecovery(t, crashStages)
}

// TestDirCrashRecoveryJournal is TestDirCrashRecovery with the commit
// journal: kills at random moments (mostly during journal appends), at
// the stages of a roll or deletion (inside checkpoints) and at the
// journal's stages (an append written but not synced, a checkpoint
// committed but the journal not cut).
func TestDirCrashRecoveryJournal(t *testing.T) {
	if os.Getenv(envCrashDir) != "" {
		return // we are the child
	}
	t.Setenv(envCrashJournal, "1") // the children inherit it
	testCrashRecovery(t, append(slices.Clone(crashStages), crashJournalStages...))
}

// killRun runs child k of a crash test in dir and returns the stage it
// was to die at ("" for none) and its output lines: every other child (odd k) dies at a stage of stages, in turn,
// counted in staged; the others are killed at a random moment.
func killRun(t *testing.T, dir string, seed uint64, k int, stages []string, rng *rand.Rand, staged map[string]int) (string, []string) {
	t.Helper()
	stage := ""
	if k%2 == 1 {
		stage = fmt.Sprintf("%s %d", stages[(k/2)%len(stages)], 1+rng.IntN(4))
	}
	lines, selfKilled, err := runAndKill(t, dir, seed+uint64(k), time.Duration(rng.IntN(120)+1)*time.Millisecond, stage)
	if err != nil {
		t.Fatalf("kill %d: %v", k, err)
	}
	if selfKilled {
		staged[strings.Fields(stage)[0]]++
	}
	return stage, lines
}

// crashSchedule is a crash test's number of kills (REPLOG_CRASH_KILLS,
// default 24), its seed (REPLOG_CRASH_SEED or the clock, logged to replay
// a failure) and the random source of its kill schedule.
func crashSchedule(t *testing.T) (int, uint64, *rand.Rand) {
	kills := 24
	if v := os.Getenv(envCrashKills); v != "" {
		kills, _ = strconv.Atoi(v)
	}
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("REPLOG_CRASH_SEED"); v != "" {
		seed, _ = strconv.ParseUint(v, 10, 64)
	}
	t.Logf("seed %d (set REPLOG_CRASH_SEED to replay the kill schedule)", seed)
	return kills, seed, rand.New(rand.NewPCG(seed, 1))
}

// testCrashRecovery runs the crash test, every other child dying at one
// of stages in turn.
func testCrashRecovery(t *testing.T, stages []string) {
	crashOpts := crashOptions()
	kills, seed, rng := crashSchedule(t)
	dir := t.TempDir()
	var acked []crashBatch // every acknowledged batch so far, in order
	inFlightApplied, totalEntries, totalWrites, rolls, deleted, checkpoints := 0, 0, 0, uint64(0), uint64(0), uint64(0)
	voterRows, rowsBelowStart := 0, 0 // the most rows after a kill; kills after which one was below the log start
	staged := map[string]int{}
	dirID := ""
	// Every other run dies at a stage of a roll or a deletion, each stage
	// in turn; the others are killed by the parent at a random moment.
	for k := 0; k < kills; k++ {
		stage, lines := killRun(t, dir, seed, k, stages, rng, staged)
		var inFlight crashBatch
		begun := map[string]crashBatch{}
		for _, l := range lines {
			f := strings.Fields(l)
			switch {
			case len(f) == 0:
			case f[0] == "E":
				t.Fatalf("kill %d: child failed: %s", k, l)
			case f[0] == "B":
				b, err := parseBatch(f[2:])
				if err != nil {
					t.Fatalf("kill %d: %q: %v", k, l, err)
				}
				begun[f[1]] = b
				inFlight = b
			case f[0] == "K":
				b, ok := begun[f[1]]
				if !ok {
					t.Fatalf("kill %d: ack %q of a batch not begun", k, l)
				}
				if want := strconv.FormatUint(uint64(b.payloadSum()), 10); len(f) != 3 || f[2] != want {
					t.Fatalf("kill %d: child's payload checksum %q, parent's %s", k, l, want)
				}
				for _, op := range b {
					if op.kind == 'A' {
						totalEntries += int(op.b)
					}
				}
				totalWrites += len(b)
				acked = append(acked, b)
				inFlight = nil
			}
		}
		s, id, err := storage.OpenDir(dir, crashID, crashOpts)
		if err != nil {
			t.Fatalf("kill %d (%q): reopen: %v", k, stage, err)
		}
		// The open removed what the crash left of a roll or a deletion:
		// every sealed file on disk is in the log's table.
		if segs, _ := filepath.Glob(filepath.Join(dir, "replog-*.seg")); len(segs) != s.Stats().Sealed {
			t.Fatalf("kill %d (%q): %d sealed files on disk, %d in the log", k, stage, len(segs), s.Stats().Sealed)
		}
		if _, err := os.Stat(filepath.Join(dir, storage.DataFileName+".next")); !os.IsNotExist(err) {
			t.Fatalf("kill %d (%q): a roll's new file is left: %v", k, stage, err)
		}
		// The identity survives every kill: the directory ID the child saw
		// at its open is the one every later open sees.
		for _, l := range lines {
			if f := strings.Fields(l); len(f) == 3 && f[0] == "R" && f[2] != id.DirectoryID {
				t.Fatalf("kill %d: child opened directory %s, reopened as %s", k, f[2], id.DirectoryID)
			}
		}
		if dirID == "" {
			dirID = id.DirectoryID
		} else if id.DirectoryID != dirID {
			t.Fatalf("kill %d: directory ID changed from %s to %s", k, dirID, id.DirectoryID)
		}
		model := replay(t, acked)
		errWithout := storagetest.Compare(s, model)
		if errWithout != nil {
			if inFlight == nil {
				t.Fatalf("kill %d: store differs from the acknowledged writes (nothing in flight): %v", k, errWithout)
			}
			withBatch := replay(t, append(acked[:len(acked):len(acked)], inFlight))
			if err := storagetest.Compare(s, withBatch); err != nil {
				t.Fatalf("kill %d: store is neither the acknowledged batches (%v) nor those plus the whole batch in flight %v (%v)",
					k, errWithout, inFlight, err)
			}
			acked = append(acked, inFlight)
			inFlightApplied++
		}
		if err := storagetest.CheckConsistent(s); err != nil {
			t.Fatalf("kill %d: %v", k, err)
		}
		implied := impliedVoters(acked)
		if got, want := storagetest.VoterSetsString(s.VoterSets()), storagetest.VoterSetsString(implied); got != want {
			t.Fatalf("kill %d: voter sets %s, the surviving batches imply %s", k, got, want)
		}
		voterRows = max(voterRows, len(implied))
		if len(implied) > 0 && implied[0].Offset < s.LogStart() {
			rowsBelowStart++
		}
		rolls += parseCount(lines, "rolls")
		deleted += parseCount(lines, "deleted")
		checkpoints += parseCount(lines, "checkpoints")
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d kills (%v at a stage), %d acknowledged batches (%d writes, %d entries appended), %d unacknowledged batches found applied; at least %d rolls, %d segments deleted and %d checkpoints; up to %d voter-set rows, one below the log start after %d kills",
		kills, staged, len(acked), totalWrites, totalEntries, inFlightApplied, rolls, deleted, checkpoints, voterRows, rowsBelowStart)
	if crashOpts.Journal && checkpoints == 0 {
		t.Fatal("no checkpoint in any run: the journal's checkpoints and cuts were never killed")
	}
	if len(acked) < kills {
		t.Fatalf("only %d batches acknowledged in %d runs: the child made no progress", len(acked), kills)
	}
	if voterRows == 0 {
		t.Fatal("no voter-set row after any kill: the voters entries were never exercised")
	}
	if kills >= 2*len(stages) && len(staged) < len(stages) {
		t.Fatalf("the children died at stages %v: not every stage of a roll and a deletion was reached", staged)
	}
}

// parseCount returns the largest count a child printed in "S rolls N
// deleted M" lines (what its store had done by its last ack).
func parseCount(lines []string, what string) uint64 {
	var n uint64
	for _, l := range lines {
		f := strings.Fields(l)
		for i := 0; i+1 < len(f); i++ {
			if f[0] == "S" && f[i] == what {
				v, _ := strconv.ParseUint(f[i+1], 10, 64)
				n = max(n, v)
			}
		}
	}
	return n
}

func replay(t *testing.T, batches []crashBatch) *storage.Memory {
	t.Helper()
	m := storage.NewMemory()
	for i, b := range batches {
		if err := b.apply(m); err != nil {
			t.Fatalf("model: batch %d (%v): %v", i, b, err)
		}
	}
	return m
}

// runAndKill starts the child, waits until it has opened the store, lets it
// write for delay, kills it with SIGKILL and returns its output lines. With
// a stage ("stage N"), the child kills itself there (selfKilled); if it
// has not after 20 s, the parent kills it.
func runAndKill(t *testing.T, dir string, seed uint64, delay time.Duration, stage string) (lines []string, selfKilled bool, err error) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), envCrashDir+"="+dir, fmt.Sprintf("%s=%d", envCrashSeed, seed))
	if stage != "" {
		cmd.Env = append(cmd.Env, envCrashRollAt+"="+stage)
		delay = 20 * time.Second
	}
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, false, err
	}
	if err := cmd.Start(); err != nil {
		return nil, false, err
	}
	linec := make(chan string, 1024)
	go func() {
		defer close(linec)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			linec <- sc.Text()
		}
	}()
	killedBy := func() error {
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			return fmt.Errorf("child did not die of SIGKILL (%v); output %q", cmd.ProcessState, lines)
		}
		return nil
	}
	// The kill comes delay after the child is ready, or at its first
	// acknowledged write if that is later (so that every run makes
	// progress even on a loaded machine).
	ready := time.After(60 * time.Second)
	kill := (<-chan time.Time)(nil)
	acked, fired := false, false
	for !(acked && fired) {
		select {
		case l, ok := <-linec:
			if !ok {
				_ = cmd.Wait()
				if stage != "" {
					return lines, true, killedBy() // it died at its stage
				}
				return lines, false, fmt.Errorf("child exited before it was killed; output %q", lines)
			}
			lines = append(lines, l)
			if strings.HasPrefix(l, "R ") && kill == nil {
				kill = time.After(delay)
			}
			acked = acked || strings.HasPrefix(l, "K ")
		case <-ready:
			if !acked {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
				return lines, false, fmt.Errorf("child made no write within 60s; output %q", lines)
			}
		case <-kill:
			fired, kill = true, nil
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return lines, false, err
	}
	for l := range linec {
		lines = append(lines, l)
	}
	_ = cmd.Wait()
	return lines, false, killedBy()
}

// A process killed while OpenDir creates a directory — after the identity
// is written and before the data file exists, or after the data file is
// complete and before the identity says so — leaves a directory that the
// next OpenDir completes, keeping the directory ID the identity recorded;
// the node then works and its data survives a reopen.
func TestOpenDirKilledDuringCreation(t *testing.T) {
	if os.Getenv(envCrashDir) != "" {
		return // we are the child
	}
	for _, stage := range []string{"identity", "data"} {
		t.Run(stage, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "d")
			cmd := exec.Command(os.Args[0], "-test.run=^TestCrashHelper$", "-test.count=1")
			cmd.Env = append(os.Environ(), envCrashDir+"="+dir, envCrashSeed+"=1", envCrashDieAt+"="+stage)
			out, err := cmd.CombinedOutput()
			if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
				t.Fatalf("child did not die of SIGKILL at %s: %v; output:\n%s", stage, err, out)
			}
			text, err := os.ReadFile(filepath.Join(dir, storage.IdentityFileName))
			if err != nil {
				t.Fatalf("no identity after a kill at %s: %v", stage, err)
			}
			if !strings.Contains(string(text), "state creating") {
				t.Fatalf("identity after a kill at %s:\n%s", stage, text)
			}
			_, statErr := os.Stat(filepath.Join(dir, storage.DataFileName))
			if (stage == "identity") != os.IsNotExist(statErr) {
				t.Fatalf("kill at %s: data file: %v", stage, statErr)
			}
			s, id, err := storage.OpenDir(dir, crashID, storage.DirOptions{})
			if err != nil {
				t.Fatalf("OpenDir after a kill at %s: %v", stage, err)
			}
			if !strings.Contains(string(text), fmt.Sprintf("directory_id %q", id.DirectoryID)) {
				t.Fatalf("directory ID %s is not the one the killed process recorded:\n%s", id.DirectoryID, text)
			}
			if err := s.Append(crashEntries(0, 5, 1)); err != nil {
				t.Fatal(err)
			}
			s.Close()
			s, again, err := storage.OpenDir(dir, crashID, storage.DirOptions{})
			if err != nil || again != id || s.LEO() != 5 {
				t.Fatalf("reopen: %+v, %v (want %+v)", again, err, id)
			}
			s.Close()
		})
	}
}

// A SIGKILL in the middle of stamping a directory's format (one from
// before formats were recorded; with the journal turned on, the stamp of
// format 2 before the journal is made) leaves the old state (no format
// file) or the new one (the whole file), never a mix, and the directory
// opens with its log.
func TestFormatStampKilled(t *testing.T) {
	if os.Getenv(envCrashDir) != "" {
		return // we are the child
	}
	for _, journal := range []bool{false, true} {
		for _, stage := range []string{"tmp", "renamed"} {
			t.Run(fmt.Sprintf("journal=%v/%s", journal, stage), func(t *testing.T) {
				dir := filepath.Join(t.TempDir(), "d")
				s, _, err := storage.OpenDir(dir, crashID, storage.DirOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if err := s.Append(crashEntries(0, 5, 1)); err != nil {
					t.Fatal(err)
				}
				s.Close()
				if err := os.Remove(filepath.Join(dir, storage.FormatFileName)); err != nil {
					t.Fatal(err)
				}
				cmd := exec.Command(os.Args[0], "-test.run=^TestCrashHelper$", "-test.count=1")
				cmd.Env = append(os.Environ(), envCrashDir+"="+dir, envCrashSeed+"=1", envCrashFormatAt+"="+stage)
				want := "format 1\n"
				if journal {
					cmd.Env = append(cmd.Env, envCrashJournal+"=1")
					want = "format 2\n"
				}
				out, err := cmd.CombinedOutput()
				if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
					t.Fatalf("child did not die of SIGKILL at %s: %v; output:\n%s", stage, err, out)
				}
				b, err := os.ReadFile(filepath.Join(dir, storage.FormatFileName))
				switch {
				case stage == "tmp" && !os.IsNotExist(err):
					t.Fatalf("killed before the rename: format file %q, %v", b, err)
				case stage == "renamed" && (err != nil || string(b) != string(storage.EncodeFormat(int(want[7]-'0')))):
					t.Fatalf("killed after the rename: format file %q, %v", b, err)
				}
				if _, err := os.Stat(filepath.Join(dir, storage.JournalFileName)); !os.IsNotExist(err) {
					t.Fatalf("a journal before its format was recorded: %v", err)
				}
				opts := storage.DirOptions{Journal: journal}
				s, _, err = storage.OpenDir(dir, crashID, opts)
				if err != nil {
					t.Fatalf("OpenDir after a kill at %s: %v", stage, err)
				}
				if s.LEO() != 5 {
					t.Fatalf("LEO %d after a kill at %s, want 5", s.LEO(), stage)
				}
				s.Close()
				if b, _ := os.ReadFile(filepath.Join(dir, storage.FormatFileName)); !strings.Contains(string(b), want) {
					t.Fatalf("format file after the reopen: %q", b)
				}
			})
		}
	}
}
