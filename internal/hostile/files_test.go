package hostile

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/replog-io/replog"
)

// childDirEnv names the data directory a child process opens (see
// TestMain): a damaged file may fault the process (bbolt maps the file),
// which no recover catches, so each reopen runs in a child.
const childDirEnv = "HOSTILE_CHILD_DIR"

const (
	filesNode    = "damaged-node"
	filesEntries = 400
	dataFile     = "replog.db" // storage.DataFileName
)

func filesOptions(dir string) replog.Options {
	return replog.Options{Dir: dir, NodeID: filesNode, ClusterID: clusterID, NoSync: true}
}

func recordData(i int) []byte {
	return fmt.Appendf(nil, "record-%04d-%s", i, strings.Repeat("x", 100+i%50))
}

// childOpen opens dir as the single node the parent created and prints
// one result line: "open-error corrupt=BOOL: MESSAGE" or
// "open-ok read=N verified=BOOL err=ERROR". It returns the exit code.
func childOpen(dir string) int {
	l, err := replog.Open(filesOptions(dir))
	if err != nil {
		fmt.Printf("open-error corrupt=%t: %s\n", errors.Is(err, replog.ErrCorrupt), strings.ReplaceAll(err.Error(), "\n", " "))
		return 0
	}
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// A single node leads and commits its log once it has appended the
	// control entry of its new epoch.
	for st := l.Status(); st.Role != "leader" || st.ReadableHW < st.LEO; st = l.Status() {
		if ctx.Err() != nil || st.Error != "" {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	n, ok := 0, true
	var rerr error
	for e, err := range l.ReadRange(ctx, 0, l.Status().ReadableHW) {
		if err != nil {
			rerr = err
			break
		}
		if !bytes.Equal(e.Data, recordData(n)) {
			ok = false
		}
		n++
	}
	fmt.Printf("open-ok read=%d verified=%t err=%v\n", n, ok, rerr)
	return 0
}

// boltRoot returns the page size and the root page of the newest valid
// bbolt meta page (layout: page header of 16 bytes, then magic, version,
// page size, flags (uint32 each), root bucket (root page, sequence),
// freelist page, high-water page, txid), in native (little-endian) order.
func boltRoot(b []byte) (pageSize int, root, hwm uint64) {
	var bestTx uint64
	for _, off := range []int{0, 4096} {
		if len(b) < off+16+64 {
			continue
		}
		m := b[off+16:]
		if binary.LittleEndian.Uint32(m) != 0xED0CDAED {
			continue
		}
		ps := int(binary.LittleEndian.Uint32(m[8:]))
		if off != 0 && off != ps {
			continue
		}
		tx := binary.LittleEndian.Uint64(m[48:])
		if tx >= bestTx {
			bestTx, pageSize = tx, ps
			root, hwm = binary.LittleEndian.Uint64(m[16:]), binary.LittleEndian.Uint64(m[40:])
		}
	}
	return pageSize, root, hwm
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	ents, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDamagedDataFiles is finding 8: a stopped node's data file is
// damaged (a random page overwritten, the root page overwritten, the file
// cut in half, emptied, or deleted with the directory's identity left in
// place) and the node reopened in a child process. The process must never
// panic or fault; a reopen either fails with ErrCorrupt naming the data
// file, or (for a random page that holds nothing live) serves only the
// data that was written. An empty or missing data file is never started
// as a new empty node.
func TestDamagedDataFiles(t *testing.T) {
	base := t.TempDir()
	l, err := replog.Open(filesOptions(base))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := range filesEntries {
		if _, err := l.Append(ctx, recordData(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	orig, err := os.ReadFile(filepath.Join(base, dataFile))
	if err != nil {
		t.Fatal(err)
	}
	pageSize, root, hwm := boltRoot(orig)
	if pageSize == 0 || root < 2 || hwm <= root {
		t.Fatalf("cannot read the bbolt meta page: page size %d, root %d, high water %d", pageSize, root, hwm)
	}

	// Positive control: the undamaged copy opens and reads back whole.
	if out := runChild(t, base, orig, func(b []byte) []byte { return b }, false); !strings.Contains(out, fmt.Sprintf("open-ok read=%d verified=true err=<nil>", filesEntries)) {
		t.Fatalf("positive control: the undamaged directory reopens as %q", out)
	}

	overwrite := func(page uint64, seed uint64) func([]byte) []byte {
		return func(b []byte) []byte {
			r := rand.New(rand.NewPCG(seed, page))
			for i := int(page) * pageSize; i < int(page+1)*pageSize && i < len(b); i++ {
				b[i] = byte(r.Uint32())
			}
			return b
		}
	}
	type damage struct {
		name string
		fn   func([]byte) []byte // nil: delete the file
		// mustFail: the reopen must fail with ErrCorrupt (otherwise it may
		// also open and serve exactly the written data).
		mustFail bool
	}
	cases := []damage{
		{"root-page", overwrite(root, 1), true},
		{"truncated-half", func(b []byte) []byte { return b[:len(b)/2] }, true},
		{"truncated-mid-page", func(b []byte) []byte { return b[:len(b)/2+pageSize/3] }, true},
		{"zero-length", func(b []byte) []byte { return nil }, true},
		{"deleted-identity-left", nil, true},
	}
	r := rand.New(rand.NewPCG(16, 8))
	for i := range 6 {
		page := 2 + r.Uint64N(hwm-2)
		cases = append(cases, damage{fmt.Sprintf("random-page-%d", page), overwrite(page, uint64(i)), false})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out := runChild(t, base, orig, tc.fn, tc.fn == nil)
			t.Logf("reopen: %s", out)
			switch {
			case strings.HasPrefix(out, "open-error corrupt=true: "):
				if !strings.Contains(out, dataFile) {
					t.Errorf("the error does not name the data file: %s", out)
				}
			case strings.HasPrefix(out, "open-ok ") && !tc.mustFail:
				if !strings.Contains(out, "verified=true") || (!strings.Contains(out, "err=<nil>") && !strings.Contains(out, "corrupt")) {
					t.Errorf("the damaged file opened and served other data than was written: %s", out)
				}
			default:
				t.Errorf("reopen after %s: %s (want an error wrapping ErrCorrupt naming %s)", tc.name, out, dataFile)
			}
		})
	}
}

// runChild copies base to a new directory, writes damage(orig) as its
// data file (or deletes it), reopens it in a child process and returns the
// child's result line. A child that dies (panic, fault) fails the test.
func runChild(t *testing.T, base string, orig []byte, damage func([]byte) []byte, remove bool) string {
	t.Helper()
	dir := t.TempDir()
	copyDir(t, base, dir)
	path := filepath.Join(dir, dataFile)
	if remove {
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
	} else if err := os.WriteFile(path, damage(append([]byte(nil), orig...)), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childDirEnv+"="+dir)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, io.MultiWriter(&stderr)
	err := cmd.Run()
	if err != nil {
		tail := stderr.String()
		if len(tail) > 2000 {
			tail = tail[:2000]
		}
		t.Fatalf("the reopen killed the process (%v):\n%s", err, tail)
	}
	for _, line := range strings.Split(stdout.String(), "\n") {
		if strings.HasPrefix(line, "open-") {
			return line
		}
	}
	t.Fatalf("child printed no result: %q %q", stdout.String(), stderr.String())
	return ""
}
