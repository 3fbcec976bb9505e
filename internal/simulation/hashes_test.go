package simulation

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
)

var (
	flagHashes      = flag.String("sim.hashes", "testdata/trace_hashes.txt", "TestTraceHashes: the file of seeds (seed, steps, hash, exactly-once) whose trace hashes must not change")
	flagHashesWrite = flag.Bool("sim.hashes.write", false, "TestTraceHashes: write -sim.hashes for -sim.start, -sim.seeds and -sim.steps (-sim.exactlyonce too) instead of checking it")
)

// TestTraceHashes: the trace hash covers every event, message, write and
// outcome of a run (Result.Hash), so a change that must not change
// protocol behaviour (a refactoring, a move of code) keeps every hash the
// file records. A change of behaviour rewrites the file, on purpose, with
// -sim.hashes.write. For a wider check write a file of thousands of seeds
// before the change and check it after:
//
//	go test ./internal/simulation -run TestTraceHashes -sim.hashes=/tmp/h -sim.hashes.write -sim.seeds=2000 -sim.steps=1500
//	go test ./internal/simulation -run TestTraceHashes -sim.hashes=/tmp/h
func TestTraceHashes(t *testing.T) {
	if *flagHashesWrite {
		writeHashes(t, *flagHashes)
		return
	}
	f, err := os.Open(*flagHashes)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		var seed int64
		var steps int
		var hash string
		var eo bool
		if _, err := fmt.Sscan(sc.Text(), &seed, &steps, &hash, &eo); err != nil {
			t.Fatalf("%s: line %q: %v", *flagHashes, sc.Text(), err)
		}
		want, err := strconv.ParseUint(hash, 16, 64)
		if err != nil {
			t.Fatalf("%s: line %q: %v", *flagHashes, sc.Text(), err)
		}
		o := runOpts(seed, steps)
		o.ExactlyOnce = eo
		if r := Run(o); r.Hash != want {
			t.Errorf("seed %d x%d (exactly-once %v): trace hash %016x, want %016x", seed, steps, eo, r.Hash, want)
		}
		n++
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatalf("%s lists no seeds", *flagHashes)
	}
	t.Logf("%d seeds: trace hashes as recorded", n)
}

func writeHashes(t *testing.T, path string) {
	var b strings.Builder
	for s := *flagStart; s < *flagStart+int64(*flagSeeds); s++ {
		o := runOpts(s, *flagSteps)
		fmt.Fprintf(&b, "%d %d %016x %v\n", s, *flagSteps, Run(o).Hash, o.ExactlyOnce)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %d trace hashes to %s", *flagSeeds, path)
}
