package storage_test

import (
	"bufio"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/storage"
	"github.com/replog-io/replog/storage/storagetest"
)

// The crash test runs a child process (this test binary, re-executed with
// TestCrashHelper selected) that opens a data directory with OpenDir and
// writes to its Bolt store in a loop and prints
// every write it starts ("B seq ...") and every write acknowledged
// ("K seq ..."). The parent kills it with SIGKILL at random moments, reopens
// the store and checks it against a model (a Memory store) built from the
// acknowledged writes: the store must equal the model, or the model plus
// the one write in flight when the child died, applied whole.

const (
	envCrashDir  = "REPLOG_CRASH_HELPER_DIR"
	envCrashSeed = "REPLOG_CRASH_HELPER_SEED"
	// envCrashKills overrides the number of kills (default 24).
	envCrashKills = "REPLOG_CRASH_KILLS"
	// envCrashDieAt makes the child kill itself at a stage of OpenDir's
	// creation of the directory ("identity" or "data").
	envCrashDieAt = "REPLOG_CRASH_HELPER_DIE_AT"
)

// crashID is the identity the crash test's directory is opened with.
var crashID = storage.Identity{ClusterID: "crash", NodeID: "child"}

// crashPayloadSize makes payload sizes deterministic from (offset, epoch).
func crashPayloadSize(off, epoch uint64) int { return int((off*31 + epoch*17) % 200) }

func crashEntries(first uint64, count int, epoch uint64) []protocol.Entry {
	es := make([]protocol.Entry, count)
	for i := range es {
		off := first + uint64(i)
		es[i] = protocol.Entry{Offset: off, Epoch: epoch, Type: protocol.EntryData,
			Data: storagetest.Payload(off, epoch, crashPayloadSize(off, epoch))}
	}
	return es
}

func payloadSum(es []protocol.Entry) uint32 {
	var c uint32
	for _, e := range es {
		c = crc32.Update(c, crc32.IEEETable, e.Data)
	}
	return c
}

// crashOp is one write as printed by the child.
type crashOp struct {
	kind        byte // A append, T truncate, D delete prefix, Q quorum, H HW checkpoint
	a, b, epoch uint64
}

func (o crashOp) String() string {
	return fmt.Sprintf("%c %d %d %d", o.kind, o.a, o.b, o.epoch)
}

func (o crashOp) apply(s storage.Store) error {
	switch o.kind {
	case 'A':
		return s.Append(crashEntries(o.a, int(o.b), o.epoch))
	case 'T':
		return s.TruncateSuffix(o.a)
	case 'D':
		return s.DeletePrefix(o.a)
	case 'Q':
		return s.SetQuorumState(protocol.QuorumState{Epoch: o.epoch, LeaderID: "child"})
	case 'H':
		return s.SetHWCheckpoint(o.a)
	}
	return fmt.Errorf("unknown op %c", o.kind)
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
// TestBoltCrashRecovery.
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
	s, id, err := storage.OpenDir(dir, crashID, storage.BoltOptions{Timeout: 30 * time.Second})
	if err != nil {
		fmt.Printf("E open: %v\n", err)
		os.Exit(3)
	}
	q, _ := s.QuorumState()
	maxEpoch := max(q.Epoch, s.LastEpoch(), 1)
	fmt.Printf("R %d %s\n", s.LEO(), id.DirectoryID)
	for seq := 0; ; seq++ {
		leo, start := s.LEO(), s.LogStart()
		var op crashOp
		switch r := rng.IntN(100); {
		case r < 6 && leo > start: // truncate, then a new epoch as a new leader would
			op = crashOp{kind: 'T', a: leo - 1 - rng.Uint64N(min(leo-start, 50))}
		case r < 8 && leo > start:
			op = crashOp{kind: 'D', a: start + rng.Uint64N((leo-start)/2+1)}
		case r < 12:
			maxEpoch++
			op = crashOp{kind: 'Q', epoch: maxEpoch}
		case r < 16:
			op = crashOp{kind: 'H', a: leo - rng.Uint64N(leo-start+1)}
		default:
			epoch := max(s.LastEpoch(), 1)
			if epoch < maxEpoch && rng.IntN(3) == 0 {
				epoch = maxEpoch
			}
			op = crashOp{kind: 'A', a: leo, b: 1 + rng.Uint64N(200), epoch: epoch}
		}
		fmt.Printf("B %d %v\n", seq, op)
		if err := op.apply(s); err != nil {
			fmt.Printf("E %d %v: %v\n", seq, op, err)
			os.Exit(3)
		}
		sum := uint32(0)
		if op.kind == 'A' {
			sum = payloadSum(crashEntries(op.a, int(op.b), op.epoch))
		}
		fmt.Printf("K %d %d\n", seq, sum)
		if op.kind == 'T' {
			// A new epoch after a truncation, as a new leader would; its
			// own write, announced before it is made like every other.
			maxEpoch++
			q := crashOp{kind: 'Q', epoch: maxEpoch}
			fmt.Printf("B %d.q %v\n", seq, q)
			if err := q.apply(s); err != nil {
				fmt.Printf("E %d.q %v: %v\n", seq, q, err)
				os.Exit(3)
			}
			fmt.Printf("K %d.q 0\n", seq)
		}
	}
}

func TestBoltCrashRecovery(t *testing.T) {
	if os.Getenv(envCrashDir) != "" {
		return // we are the child
	}
	kills := 24
	if v := os.Getenv(envCrashKills); v != "" {
		kills, _ = strconv.Atoi(v)
	}
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("REPLOG_CRASH_SEED"); v != "" {
		seed, _ = strconv.ParseUint(v, 10, 64)
	}
	t.Logf("seed %d (set REPLOG_CRASH_SEED to replay the kill schedule)", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	dir := t.TempDir()
	var acked []crashOp // every acknowledged write so far, in order
	inFlightApplied, totalEntries := 0, 0
	dirID := ""
	for k := 0; k < kills; k++ {
		lines, err := runAndKill(t, dir, seed+uint64(k), time.Duration(rng.IntN(120)+1)*time.Millisecond)
		if err != nil {
			t.Fatalf("kill %d: %v", k, err)
		}
		var inFlight *crashOp
		begun := map[string]crashOp{}
		for _, l := range lines {
			f := strings.Fields(l)
			switch {
			case len(f) == 0:
			case f[0] == "E":
				t.Fatalf("kill %d: child failed: %s", k, l)
			case f[0] == "B":
				op, err := parseOp(f[2:])
				if err != nil {
					t.Fatalf("kill %d: %q: %v", k, l, err)
				}
				begun[f[1]] = op
				inFlight = &op
			case f[0] == "K":
				op, ok := begun[f[1]]
				if !ok {
					t.Fatalf("kill %d: ack %q of a write not begun", k, l)
				}
				if op.kind == 'A' {
					if want := strconv.FormatUint(uint64(payloadSum(crashEntries(op.a, int(op.b), op.epoch))), 10); f[2] != want {
						t.Fatalf("kill %d: child's payload checksum %s, parent's %s", k, f[2], want)
					}
					totalEntries += int(op.b)
				}
				acked = append(acked, op)
				inFlight = nil
			}
		}
		s, id, err := storage.OpenDir(dir, crashID, storage.BoltOptions{Timeout: 30 * time.Second})
		if err != nil {
			t.Fatalf("kill %d: reopen: %v", k, err)
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
			withOp := replay(t, append(acked[:len(acked):len(acked)], *inFlight))
			if err := storagetest.Compare(s, withOp); err != nil {
				t.Fatalf("kill %d: store is neither the acknowledged writes (%v) nor those plus the write in flight %v (%v)",
					k, errWithout, *inFlight, err)
			}
			acked = append(acked, *inFlight)
			inFlightApplied++
		}
		if err := storagetest.CheckConsistent(s); err != nil {
			t.Fatalf("kill %d: %v", k, err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d kills, %d acknowledged writes (%d entries appended), %d unacknowledged writes found applied",
		kills, len(acked), totalEntries, inFlightApplied)
	if len(acked) < kills {
		t.Fatalf("only %d writes acknowledged in %d runs: the child made no progress", len(acked), kills)
	}
}

func replay(t *testing.T, ops []crashOp) *storage.Memory {
	t.Helper()
	m := storage.NewMemory()
	for i, op := range ops {
		if err := op.apply(m); err != nil {
			t.Fatalf("model: write %d (%v): %v", i, op, err)
		}
	}
	return m
}

// runAndKill starts the child, waits until it has opened the store, lets it
// write for delay, kills it with SIGKILL and returns its output lines.
func runAndKill(t *testing.T, dir string, seed uint64, delay time.Duration) ([]string, error) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), envCrashDir+"="+dir, fmt.Sprintf("%s=%d", envCrashSeed, seed))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	linec := make(chan string, 1024)
	go func() {
		defer close(linec)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			linec <- sc.Text()
		}
	}()
	// The kill comes delay after the child is ready, or at its first
	// acknowledged write if that is later (so that every run makes
	// progress even on a loaded machine).
	var lines []string
	ready := time.After(60 * time.Second)
	kill := (<-chan time.Time)(nil)
	acked, fired := false, false
	for !(acked && fired) {
		select {
		case l, ok := <-linec:
			if !ok {
				_ = cmd.Wait()
				return lines, fmt.Errorf("child exited before it was killed; output %q", lines)
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
				return lines, fmt.Errorf("child made no write within 60s; output %q", lines)
			}
		case <-kill:
			fired, kill = true, nil
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return lines, err
	}
	for l := range linec {
		lines = append(lines, l)
	}
	err = cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		return lines, fmt.Errorf("child did not die of SIGKILL: %v", err)
	}
	return lines, nil
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
			s, id, err := storage.OpenDir(dir, crashID, storage.BoltOptions{})
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
			s, again, err := storage.OpenDir(dir, crashID, storage.BoltOptions{})
			if err != nil || again != id || s.LEO() != 5 {
				t.Fatalf("reopen: %+v, %v (want %+v)", again, err, id)
			}
			s.Close()
		})
	}
}
