package storage_test

import (
	"bytes"
	"context"
	"encoding/json"
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

	bolt "go.etcd.io/bbolt"

	"github.com/replog-io/replog/internal/storagetest"
	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/storage"
)

// The damage tests open damaged copies of a real data directory in a child
// process (this test binary re-executed with TestDamageChild selected), so
// that an open that panics or faults shows as a failing case with the
// child's output instead of killing the whole test run.

const (
	envDamageDir     = "REPLOG_DAMAGE_DIR"
	envDamageCluster = "REPLOG_DAMAGE_CLUSTER"
	envDamageNode    = "REPLOG_DAMAGE_NODE"
	envDamageReadAt  = "REPLOG_DAMAGE_READ_AT"
	damageEntries    = 3000
	damageLogStart   = 500 // DeletePrefix: leaves free pages
)

// damageResult is what the child reports.
type damageResult struct {
	Err         string
	Corrupt     bool // errors.Is(err, ErrCorrupt)
	Mismatch    bool // errors.Is(err, ErrIdentityMismatch)
	Entries     int  // entries read back after a successful open
	ReadErr     string
	ReadCorrupt bool
	Identity    storage.Identity
	LogStart    uint64
	QuorumLead  string
	// After a successful open: the result of the verification Open leaves
	// to the background (WaitVerified), and, if it failed, of an append.
	VerifyErr     string
	VerifyCorrupt bool
	ApplyErr      string
	ApplyCorrupt  bool
	// With envDamageReadAt set: reading the entry at that offset, and
	// whether the last entry reads back.
	AtErr     string
	AtCorrupt bool
	TailOK    bool
}

// TestDamageChild is the child's body: it opens the directory and prints a
// damageResult as JSON on the last line.
func TestDamageChild(t *testing.T) {
	dir := os.Getenv(envDamageDir)
	if dir == "" {
		return
	}
	var res damageResult
	b, id, err := storage.OpenDir(dir, storage.Identity{ClusterID: os.Getenv(envDamageCluster), NodeID: os.Getenv(envDamageNode)},
		storage.DirOptions{Timeout: 10 * time.Second})
	if err != nil {
		res.Err, res.Corrupt, res.Mismatch = err.Error(), errors.Is(err, storage.ErrCorrupt), errors.Is(err, storage.ErrIdentityMismatch)
	} else {
		res.Identity, res.LogStart = id, b.LogStart()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		if err := b.WaitVerified(ctx); err != nil {
			res.VerifyErr, res.VerifyCorrupt = err.Error(), errors.Is(err, storage.ErrCorrupt)
			// Refused (so nothing is written to the damaged file).
			if err := b.Append(storagetest.Batch(b.LEO(), 1, b.LastEpoch(), 100)); err != nil {
				res.ApplyErr, res.ApplyCorrupt = err.Error(), errors.Is(err, storage.ErrCorrupt)
			}
		}
		cancel()
		if at := os.Getenv(envDamageReadAt); at != "" {
			// One entry inside the damage, and the last one.
			var off uint64
			fmt.Sscan(at, &off)
			if _, err := b.Entries(off, 1, 1<<30); err != nil {
				res.AtErr, res.AtCorrupt = err.Error(), errors.Is(err, storage.ErrCorrupt)
			}
			es, err := b.Entries(b.LEO()-1, 1, 1<<30)
			res.TailOK = err == nil && len(es) == 1 && bytes.Equal(es[0].Data, storagetest.Payload(es[0].Offset, es[0].Epoch, 100))
		}
		es, err := b.Entries(b.LogStart(), 0, 1<<30)
		if err != nil {
			res.ReadErr, res.ReadCorrupt = err.Error(), errors.Is(err, storage.ErrCorrupt)
		}
		for _, e := range es {
			if !bytes.Equal(e.Data, storagetest.Payload(e.Offset, e.Epoch, 100)) {
				res.ReadErr = fmt.Sprintf("entry %d reads back wrong", e.Offset)
				break
			}
		}
		res.Entries = len(es)
		q, _ := b.QuorumState()
		res.QuorumLead = q.LeaderID
		_ = b.Close()
	}
	out, _ := json.Marshal(res)
	fmt.Printf("\nDAMAGE-RESULT %s\n", out)
}

// damageTemplate is a data directory written by OpenDir, and what
// its bbolt file's pages are.
type damageTemplate struct {
	dir       string
	id        storage.Identity
	pageSize  int
	hwm       int
	rootPage  int   // the leaf page listing the buckets
	branches  []int // branch pages of the entries bucket
	leaves    []int // leaf pages of the entries bucket
	free      []int
	metaPages []int
}

func buildTemplate(dir string) (*damageTemplate, error) {
	b, id, err := storage.OpenDir(dir, idN1, storage.DirOptions{NoSync: true})
	if err != nil {
		return nil, err
	}
	for i := 0; i < damageEntries; i += 100 {
		if err := b.Append(storagetest.Batch(uint64(i), 100, 1, 100)); err != nil {
			return nil, err
		}
	}
	if err := b.DeletePrefix(damageLogStart); err != nil {
		return nil, err
	}
	if err := b.SetHWCheckpoint(2000); err != nil {
		return nil, err
	}
	if err := b.SetQuorumState(protocol.QuorumState{Epoch: 1, VotedFor: "n1", LeaderID: "n1"}); err != nil {
		return nil, err
	}
	// The deleted prefix stays in the active segment (unreadable) until
	// the segment is sealed and deleted: opening the template changes
	// nothing.
	if err := b.Close(); err != nil {
		return nil, err
	}
	tp := &damageTemplate{dir: dir, id: id}
	db, err := bolt.Open(filepath.Join(dir, storage.DataFileName), 0o600, &bolt.Options{ReadOnly: true, PreLoadFreelist: true})
	if err != nil {
		return nil, err
	}
	defer db.Close()
	err = db.View(func(tx *bolt.Tx) error {
		tp.pageSize = db.Info().PageSize
		tp.hwm = int(tx.Size()) / tp.pageSize
		tp.rootPage = int(tx.Cursor().Bucket().Root())
		for id := 0; id < tp.hwm; id++ {
			p, err := tx.Page(id)
			if err != nil {
				return err
			}
			switch {
			case p.Type == "meta":
				tp.metaPages = append(tp.metaPages, id)
			case p.Type == "free":
				tp.free = append(tp.free, id)
			case p.Type == "branch":
				tp.branches = append(tp.branches, id)
			case p.Type == "leaf" && id != tp.rootPage:
				tp.leaves = append(tp.leaves, id)
			}
			id += p.OverflowCount
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(tp.branches) == 0 || len(tp.leaves) < 3 || len(tp.free) == 0 || len(tp.metaPages) != 2 {
		return nil, fmt.Errorf("template layout %+v lacks a page kind the tests need", tp)
	}
	return tp, nil
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	ents, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// overwritePage fills page id with seeded garbage.
func overwritePage(tp *damageTemplate, id int, seed uint64) func(t *testing.T, dir string) {
	return func(t *testing.T, dir string) {
		rng := rand.New(rand.NewPCG(seed, uint64(id)))
		g := make([]byte, tp.pageSize)
		for i := range g {
			g[i] = byte(rng.Uint32())
		}
		writeAt(t, filepath.Join(dir, storage.DataFileName), g, int64(id*tp.pageSize))
	}
}

func writeAt(t *testing.T, path string, b []byte, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func runDamageChild(t *testing.T, dir string, id storage.Identity) damageResult {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestDamageChild$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), envDamageDir+"="+dir, envDamageCluster+"="+id.ClusterID, envDamageNode+"="+id.NodeID)
	out, err := cmd.CombinedOutput()
	i := bytes.LastIndex(out, []byte("DAMAGE-RESULT "))
	if err != nil || i < 0 {
		t.Fatalf("child crashed or failed (%v); output:\n%s", err, tail(out, 4000))
	}
	line := out[i+len("DAMAGE-RESULT "):]
	line = line[:bytes.IndexByte(line, '\n')]
	var res damageResult
	if err := json.Unmarshal(line, &res); err != nil {
		t.Fatalf("child's result %q: %v", line, err)
	}
	return res
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// TestDamagedDirectory opens damaged copies of a data directory: each
// damage returns an error wrapping ErrCorrupt (or ErrIdentityMismatch)
// naming the damaged file, in a child that neither panics nor faults, and
// leaves every file as it was. Damage in a page Open checks itself fails
// the open; damage in a leaf of the entries that Open does not read (it
// reads the paths to the first and last entries and to the log start,
// docs/storage.md section 9) is found by the verification that follows
// Open: WaitVerified returns it, an append is refused with it, and a read
// of the damaged entries fails with ErrCorrupt. Damage that loses nothing
// (a free page) opens and reads back everything, as does the undamaged
// directory.
func TestDamagedDirectory(t *testing.T) {
	tp, err := buildTemplate(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	data, idFile := storage.DataFileName, storage.IdentityFileName
	fileSize := func(dir string) int64 {
		fi, err := os.Stat(filepath.Join(dir, data))
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	truncate := func(size func(int64) int64) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) {
			if err := os.Truncate(filepath.Join(dir, data), size(fileSize(dir))); err != nil {
				t.Fatal(err)
			}
		}
	}
	const (
		corrupt  = "corrupt"  // Open fails
		later    = "later"    // found after Open
		mismatch = "mismatch" // Open fails
		opens    = "opens"
	)
	layout := readLayout(t, filepath.Join(tp.dir, data))
	atOpen := layout.openPages(t, damageLogStart)
	// pageWant is what damage to in-use page id gives: found at open
	// unless it is a leaf of the entries off Open's paths.
	pageWant := func(id int) string {
		if p, ok := layout.page(id); ok && p.leaf && !atOpen[id] {
			return later
		}
		return corrupt
	}
	type tc struct {
		name   string
		damage func(t *testing.T, dir string)
		id     storage.Identity // default idN1
		want   string           // corrupt, later, mismatch, opens
		page   int              // the page damaged, if one
		file   string           // named in the error
		says   string           // also in the error
	}
	mid := tp.leaves[len(tp.leaves)/2]
	cases := []tc{
		{name: "undamaged", want: opens},
		{name: "meta page 0 garbage", damage: overwritePage(tp, 0, 1), want: corrupt, file: data, says: "meta page 0"},
		{name: "meta page 1 garbage", damage: overwritePage(tp, 1, 1), want: corrupt, file: data, says: "meta page 1"},
		{name: "first 4 KiB zeroed", damage: func(t *testing.T, dir string) {
			writeAt(t, filepath.Join(dir, data), make([]byte, 4096), 0)
		}, want: corrupt, file: data, says: "meta page 0"},
		{name: "bucket list page garbage", damage: overwritePage(tp, tp.rootPage, 1), want: corrupt, file: data},
		{name: "branch page garbage", damage: overwritePage(tp, tp.branches[0], 1), want: pageWant(tp.branches[0]), page: tp.branches[0], file: data},
		{name: "first leaf garbage", damage: overwritePage(tp, tp.leaves[0], 1), want: pageWant(tp.leaves[0]), page: tp.leaves[0], file: data},
		{name: "middle leaf garbage", damage: overwritePage(tp, mid, 1), want: pageWant(mid), page: mid, file: data},
		{name: "last leaf garbage", damage: overwritePage(tp, tp.leaves[len(tp.leaves)-1], 1), want: pageWant(tp.leaves[len(tp.leaves)-1]), page: tp.leaves[len(tp.leaves)-1], file: data},
		{name: "leaf element count inflated", damage: func(t *testing.T, dir string) {
			writeAt(t, filepath.Join(dir, data), []byte{0xff, 0x0f}, int64(mid*tp.pageSize+10))
		}, want: pageWant(mid), page: mid, file: data, says: fmt.Sprintf("page %d", mid)},
		{name: "leaf key position out of the page", damage: func(t *testing.T, dir string) {
			writeAt(t, filepath.Join(dir, data), []byte{0xff, 0xff, 0, 0}, int64(mid*tp.pageSize+16+4))
		}, want: pageWant(mid), page: mid, file: data, says: fmt.Sprintf("leaf page %d", mid)},
		{name: "leaf page id changed", damage: func(t *testing.T, dir string) {
			writeAt(t, filepath.Join(dir, data), []byte{byte(mid + 1)}, int64(mid*tp.pageSize))
		}, want: pageWant(mid), page: mid, file: data, says: "names itself"},
		{name: "free page garbage (nothing lost)", damage: overwritePage(tp, tp.free[0], 1), want: opens},
		{name: "truncated to half its pages", damage: truncate(func(int64) int64 { return int64(tp.hwm / 2 * tp.pageSize) }),
			want: corrupt, file: data, says: "truncated"},
		{name: "truncated to a non-page multiple", damage: truncate(func(n int64) int64 { return n - 100 }),
			want: corrupt, file: data, says: "not a multiple of the page size"},
		{name: "truncated below two pages", damage: truncate(func(int64) int64 { return 3000 }), want: corrupt, file: data},
		{name: "zero length", damage: truncate(func(int64) int64 { return 0 }), want: corrupt, file: data, says: "is empty"},
		{name: "data file missing", damage: func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, data)); err != nil {
				t.Fatal(err)
			}
		}, want: corrupt, file: data, says: "is missing"},
		{name: "not a bbolt file", damage: func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, data), bytes.Repeat([]byte("not a bbolt file "), 1000), 0o600); err != nil {
				t.Fatal(err)
			}
		}, want: corrupt, file: data},
		{name: "identity corrupt", damage: func(t *testing.T, dir string) {
			writeAt(t, filepath.Join(dir, idFile), []byte{'X'}, 40)
		}, want: corrupt, file: idFile, says: "checksum"},
		{name: "identity truncated", damage: truncateIdentity(30), want: corrupt, file: idFile},
		{name: "identity of another node", id: idN2, want: mismatch, file: idFile, says: `node ID is "n1", expected "n2"`},
		{name: "identity of another cluster", id: idC2, want: mismatch, file: idFile, says: `cluster ID is "c1", expected "c2"`},
		{name: "identity missing, data of another node", damage: removeIdentity, id: idN2, want: mismatch, file: data,
			says: `node ID is "n1", expected "n2"`},
		{name: "identity missing (rewritten from the data file)", damage: removeIdentity, want: opens},
		{name: "identity of another directory", damage: func(t *testing.T, dir string) {
			other := t.TempDir()
			b, _ := mustOpenDir(t, other, idN1)
			b.Close()
			copyDir(t, filepath.Join(other), dir)                              // both files of the other directory...
			copyFile(t, filepath.Join(tp.dir, data), filepath.Join(dir, data)) // ...but this one's data
		}, want: corrupt, file: data, says: "different directories"},
	}
	for i := 0; i < 6; i++ { // random in-use pages
		rng := rand.New(rand.NewPCG(uint64(i), 99))
		inUse := append(append(append([]int{tp.rootPage}, tp.branches...), tp.leaves...), tp.metaPages...)
		p := inUse[rng.IntN(len(inUse))]
		cases = append(cases, tc{name: fmt.Sprintf("random in-use page %d garbage", p), damage: overwritePage(tp, p, uint64(i)),
			want: pageWant(p), page: p, file: data})
	}
	kinds := map[string]int{}
	for _, c := range cases {
		kinds[c.want]++
	}
	// Both kinds of page damage are exercised (positive controls of each
	// other): a layout change that left one out would weaken the test.
	if kinds[later] < 3 || kinds[corrupt] < 8 {
		t.Fatalf("cases by outcome %v: the template no longer exercises damage both at and after Open", kinds)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			copyDir(t, tp.dir, dir)
			if c.damage != nil {
				c.damage(t, dir)
			}
			id := c.id
			if id == (storage.Identity{}) {
				id = idN1
			}
			before := snapshot(t, dir)
			res := runDamageChild(t, dir, id)
			switch c.want {
			case opens:
				if res.Err != "" || res.ReadErr != "" {
					t.Fatalf("open: %s; read: %s", res.Err, res.ReadErr)
				}
				if res.Entries != damageEntries-damageLogStart || res.LogStart != damageLogStart || res.QuorumLead != "n1" ||
					res.Identity.DirectoryID != tp.id.DirectoryID || res.VerifyErr != "" {
					t.Fatalf("read back %+v; want %d entries from %d, the vote and directory ID %s, verified",
						res, damageEntries-damageLogStart, damageLogStart, tp.id.DirectoryID)
				}
				return
			case later:
				// Opens; the verification after Open finds the damage,
				// names the file and the page; appends are refused with
				// it; the damaged entries do not read.
				if res.Err != "" || !res.VerifyCorrupt || !res.ApplyCorrupt {
					t.Fatalf("open %q, verification %q, append %q: want the open to succeed and the verification and append to fail with ErrCorrupt",
						res.Err, res.VerifyErr, res.ApplyErr)
				}
				for _, e := range []string{res.VerifyErr, res.ApplyErr} {
					if !strings.Contains(e, filepath.Join(dir, c.file)) || !strings.Contains(e, c.says) {
						t.Fatalf("error %q: want it to name %s and say %q", e, filepath.Join(dir, c.file), c.says)
					}
				}
				if res.ReadErr == "" && res.Entries != damageEntries-damageLogStart {
					t.Fatalf("read %d entries without an error", res.Entries)
				}
				if p, _ := layout.page(c.page); p.last >= damageLogStart && (!res.ReadCorrupt || !strings.Contains(res.ReadErr, filepath.Join(dir, c.file))) {
					t.Fatalf("read of the log, whose entries %d-%d are damaged: %q, want ErrCorrupt naming %s", p.first, p.last, res.ReadErr, c.file)
				}
				sameSnapshot(t, before, snapshot(t, dir))
				if testing.Verbose() {
					t.Logf("verification: %s; read: %s", res.VerifyErr, res.ReadErr)
				}
				return
			case corrupt:
				if !res.Corrupt || res.Mismatch {
					t.Fatalf("error %q: want ErrCorrupt", res.Err)
				}
			case mismatch:
				if !res.Mismatch || res.Corrupt {
					t.Fatalf("error %q: want ErrIdentityMismatch", res.Err)
				}
			}
			if !strings.Contains(res.Err, filepath.Join(dir, c.file)) || !strings.Contains(res.Err, c.says) {
				t.Fatalf("error %q: want it to name %s and say %q", res.Err, filepath.Join(dir, c.file), c.says)
			}
			sameSnapshot(t, before, snapshot(t, dir))
			if testing.Verbose() {
				t.Logf("%s", res.Err)
			}
		})
	}
}

func removeIdentity(t *testing.T, dir string) {
	if err := os.Remove(filepath.Join(dir, storage.IdentityFileName)); err != nil {
		t.Fatal(err)
	}
}

func truncateIdentity(n int64) func(t *testing.T, dir string) {
	return func(t *testing.T, dir string) {
		if err := os.Truncate(filepath.Join(dir, storage.IdentityFileName), n); err != nil {
			t.Fatal(err)
		}
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
}
