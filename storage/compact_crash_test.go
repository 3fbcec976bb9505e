package storage_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/replog-io/replog/internal/storagetest"
	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/storage"
)

// The compaction crash test (R104's crash safety, storage.md 13): a child
// process (this binary, TestCompactCrashHelper selected) fills a
// directory with small segments once, then compacts its sealed segments
// round after round, each round dropping the entries compactDrop picks
// for it, printing "P base round" before a pass and "D base round
// swapped" after it; appends go on between passes. The parent kills it
// with SIGKILL at random moments, or has it kill itself when a pass has
// written its file (not renamed) or renamed it (the directory not
// synced), reopens the store and checks every offset: each segment reads
// as all the passes acknowledged for it had run and, for the one in
// flight, either without it or with it whole, never a mix; no .compact
// file is left.

const (
	envCompactDir   = "REPLOG_COMPACT_HELPER_DIR"
	envCompactRound = "REPLOG_COMPACT_HELPER_ROUND"
	envCompactDieAt = "REPLOG_COMPACT_HELPER_DIE_AT"
	compactFill     = 600 // entries written before the first pass
)

var compactCrashOpts = storage.DirOptions{Timeout: 30 * time.Second, SegmentBytes: 16 << 10}

// compactDrop reports whether round r's pass drops the entry at off.
func compactDrop(off uint64, r int) bool { return (off*2654435761+uint64(r)*40503)%7 == 0 }

// compactEntries is the child's deterministic log: epoch 1 + off/50.
func compactEntries(from uint64, n int) []protocol.Entry {
	es := storagetest.Batch(from, n, 1+from/50, 64)
	for i := range es {
		es[i].Epoch = 1 + es[i].Offset/50
		es[i].Data = storagetest.Payload(es[i].Offset, es[i].Epoch, 64)
		es[i].Time = int64(1_700_000_000_000 + es[i].Offset)
	}
	return es
}

func TestCompactCrashHelper(t *testing.T) {
	dir := os.Getenv(envCompactDir)
	if dir == "" {
		return
	}
	if step := os.Getenv(envCompactDieAt); step != "" {
		storage.SetCompactHook(func(at string) {
			if at == step {
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {}
			}
		})
	}
	round, _ := strconv.Atoi(os.Getenv(envCompactRound))
	s, _, err := storage.OpenDir(dir, crashID, compactCrashOpts)
	if err != nil {
		fmt.Printf("E open: %v\n", err)
		os.Exit(3)
	}
	appendTo := func(n int) {
		for s.LEO() < uint64(n) {
			k := min(10, n-int(s.LEO()))
			es := compactEntries(s.LEO(), k)
			// A batch never crosses an epoch, as a leader's never does.
			if e := es[0].Epoch; es[k-1].Epoch != e {
				k = int(50 - s.LEO()%50)
				es = es[:k]
			}
			if err := s.Append(es); err != nil {
				fmt.Printf("E append: %v\n", err)
				os.Exit(3)
			}
		}
	}
	appendTo(compactFill)
	fmt.Printf("R %d\n", s.LEO())
	for ; ; round++ {
		for _, seg := range s.Segments() {
			if seg.Active {
				continue
			}
			fmt.Printf("P %d %d\n", seg.Base, round)
			res, err := s.CompactSegment(seg.Base, func(e protocol.Entry) bool { return compactDrop(e.Offset, round) }, nil)
			if err != nil {
				fmt.Printf("E compact %d: %v\n", seg.Base, err)
				os.Exit(3)
			}
			fmt.Printf("D %d %d %v\n", seg.Base, round, res.Swapped)
		}
		appendTo(int(s.LEO()) + 30)
	}
}

// TestDirCrashDuringCompaction: see the comment above.
func TestDirCrashDuringCompaction(t *testing.T) {
	if os.Getenv(envCompactDir) != "" {
		return
	}
	kills, _, rng := crashSchedule(t)
	dir := t.TempDir()
	done := map[uint64][]int{} // segment base -> rounds whose pass swapped
	round, staged := 1, map[string]int{}
	for k := range kills {
		step := ""
		if k%3 != 0 {
			step = []string{"written", "renamed"}[k%2]
		}
		lines, self := runCompactChild(t, dir, round, step, time.Duration(rng.IntN(150)+5)*time.Millisecond)
		if self {
			staged[step]++
		}
		var inFlight *[2]int // base, round
		for _, l := range lines {
			f := strings.Fields(l)
			switch f[0] {
			case "E":
				t.Fatalf("kill %d: child failed: %s", k, l)
			case "P":
				b, _ := strconv.Atoi(f[1])
				r, _ := strconv.Atoi(f[2])
				inFlight = &[2]int{b, r}
				round = max(round, r)
			case "D":
				b, _ := strconv.Atoi(f[1])
				r, _ := strconv.Atoi(f[2])
				if f[3] == "true" {
					done[uint64(b)] = append(done[uint64(b)], r)
				}
				inFlight = nil
			}
		}
		s, _, err := storage.OpenDir(dir, crashID, compactCrashOpts)
		if err != nil {
			t.Fatalf("kill %d (step %q): reopen: %v", k, step, err)
		}
		if m, _ := globCompact(dir); len(m) != 0 {
			t.Fatalf("kill %d: leftover %v", k, m)
		}
		// A pass whose segment changed meanwhile would not have swapped;
		// one of the in-flight segment may or may not have.
		for _, seg := range s.Segments() {
			base := seg.Base
			var alt []int
			if inFlight != nil && uint64(inFlight[0]) == base {
				alt = []int{inFlight[1]}
			}
			es, err := s.Entries(max(base, s.LogStart()), int(seg.End-base), 1<<30)
			if err != nil {
				t.Fatalf("kill %d: read segment %d: %v", k, base, err)
			}
			matches := func(extra []int) bool {
				for i, e := range es {
					off := max(base, s.LogStart()) + uint64(i)
					want := compactEntries(off, 1)[0]
					gone := false
					for _, r := range append(append([]int(nil), done[base]...), extra...) {
						gone = gone || compactDrop(off, r)
					}
					if seg.Active {
						gone = false
					}
					// A placeholder has its run's newest time.
					if e.Offset != off || e.Epoch != want.Epoch || e.Time != want.Time && (e.Type != protocol.EntryHole || e.Time < want.Time) {
						return false
					}
					if gone != (e.Type == protocol.EntryHole) || !gone && string(e.Data) != string(want.Data) {
						return false
					}
				}
				return true
			}
			if !matches(nil) && (alt == nil || !matches(alt)) {
				for i, e := range es {
					t.Logf("offset %d: %v epoch %d time %d (%d bytes)", max(base, s.LogStart())+uint64(i), e.Type, e.Epoch, e.Time, len(e.Data))
				}
				t.Fatalf("kill %d (step %q): segment [%d, %d) is neither before nor after the pass in flight %v (done %v)", k, step, base, seg.End, inFlight, done[base])
			}
			if alt != nil && matches(alt) && !matches(nil) {
				done[base] = append(done[base], alt[0])
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		round++
	}
	t.Logf("%d kills, %d at a step %v, segments compacted %d", kills, staged["written"]+staged["renamed"], staged, len(done))
	if len(done) == 0 {
		t.Fatal("no pass completed: the test proves nothing")
	}
}

func globCompact(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	var out []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".compact") {
			out = append(out, e.Name())
		}
	}
	return out, err
}

// runCompactChild runs the helper on dir from round, killing it after
// delay (or letting it kill itself at step), and returns its lines.
func runCompactChild(t *testing.T, dir string, round int, step string, delay time.Duration) ([]string, bool) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCompactCrashHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), envCompactDir+"="+dir, fmt.Sprintf("%s=%d", envCompactRound, round))
	if step != "" {
		cmd.Env = append(cmd.Env, envCompactDieAt+"="+step)
	}
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	linec := make(chan string, 1024)
	go func() {
		defer close(linec)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			linec <- sc.Text()
		}
	}()
	var lines []string
	var kill <-chan time.Time
	limit := time.After(60 * time.Second)
	for {
		select {
		case l, ok := <-linec:
			if !ok {
				_ = cmd.Wait()
				ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
				if step == "" || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
					t.Fatalf("child ended on its own (%v); output %q", cmd.ProcessState, lines)
				}
				return lines, true
			}
			lines = append(lines, l)
			if strings.HasPrefix(l, "R ") && step == "" {
				kill = time.After(delay)
			}
		case <-kill:
			_ = cmd.Process.Signal(syscall.SIGKILL)
			for l := range linec {
				lines = append(lines, l)
			}
			_ = cmd.Wait()
			return lines, false
		case <-limit:
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("child did not die within 60s; output %q", lines)
		}
	}
}
