package storage

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/replog-io/replog/protocol"
)

// The voter-set rows' storage (docs/protocol.md R55, docs/storage.md section 2): the row
// codec, damaged rows at open, files from before voter sets, and rows
// that disagree with their entries (VerifyDir). The rows' semantics are
// the contract suite's (storagetest: VoterSets*).

func testVoters(k int) []protocol.Voter {
	vs := make([]protocol.Voter, 1+k%3)
	for i := range vs {
		vs[i] = protocol.Voter{ID: fmt.Sprintf("n%d", i+1), DirID: fmt.Sprintf("d%d-%d", k, i)}
	}
	return vs
}

func votersEntry(off, epoch uint64, k int) protocol.Entry {
	return protocol.Entry{Offset: off, Epoch: epoch, Type: protocol.EntryVoters, Data: protocol.EncodeVoters(testVoters(k))}
}

// Every single-bit flip of a stored row, and a row read at another offset,
// is ErrCorrupt naming the offset; the row itself decodes.
func TestVotersRowEveryBitFlipDetected(t *testing.T) {
	vs := testVoters(2)
	row := protocol.VotersAt{Offset: 7, Voters: vs[:1], Owed: vs[1:]} // owed ones are covered too
	v := encodeVotersRow(row)
	got, err := decodeVotersRow(7, v)
	if err != nil || fmt.Sprint(got) != fmt.Sprint(row) {
		t.Fatalf("round trip: %v, %v; want %v", got, err, row)
	}
	if _, err := decodeVotersRow(8, v); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "offset 8") {
		t.Fatalf("row of offset 7 read as offset 8: %v; want ErrCorrupt naming offset 8", err)
	}
	for i := range 8 * len(v) {
		b := bytes.Clone(v)
		b[i/8] ^= 1 << (i % 8)
		if _, err := decodeVotersRow(7, b); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "offset 7") {
			t.Fatalf("bit %d flipped: %v; want ErrCorrupt naming offset 7", i, err)
		}
	}
	for n := range len(v) {
		if _, err := decodeVotersRow(7, v[:n]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("row cut to %d bytes: %v; want ErrCorrupt", n, err)
		}
	}
}

// votersCorruptions damage the voters bucket of a file whose log is
// [3, 12) with rows at 0 (below the log start), 4 and 9.
var votersCorruptions = map[string]func(tx *bolt.Tx) error{
	"row checksum fails": func(tx *bolt.Tx) error {
		vb := tx.Bucket(bucketVoters)
		v := bytes.Clone(vb.Get(u64key(4)))
		v[len(v)-6] ^= 1 // in the last directory ID
		return vb.Put(u64key(4), v)
	},
	"row does not decode": func(tx *bolt.Tx) error {
		set := []byte{1, 0} // no voters: DecodeVoters refuses it
		return tx.Bucket(bucketVoters).Put(u64key(4), binaryAppendCRC(4, set))
	},
	"row key of bad length": func(tx *bolt.Tx) error {
		return tx.Bucket(bucketVoters).Put([]byte{4}, encodeVotersRow(protocol.VotersAt{Offset: 4, Voters: testVoters(1)}))
	},
	"row at the LEO": func(tx *bolt.Tx) error {
		return tx.Bucket(bucketVoters).Put(u64key(12), encodeVotersRow(protocol.VotersAt{Offset: 12, Voters: testVoters(1)}))
	},
	"three rows below the log start": func(tx *bolt.Tx) error {
		// Two are allowed: the set in force at the log start and the
		// newest change before it (R55).
		vb := tx.Bucket(bucketVoters)
		if err := vb.Put(u64key(1), encodeVotersRow(protocol.VotersAt{Offset: 1, Voters: testVoters(1)})); err != nil {
			return err
		}
		return vb.Put(u64key(2), encodeVotersRow(protocol.VotersAt{Offset: 2, Voters: testVoters(2)}))
	},
}

func binaryAppendCRC(off uint64, set []byte) []byte {
	v := bytes.Clone(set)
	c := votersRowCRC(off, set)
	return append(v, byte(c>>24), byte(c>>16), byte(c>>8), byte(c))
}

// votersLog writes the log votersCorruptions expect into s.
func votersLog(t *testing.T, s Store) {
	t.Helper()
	es := append([]protocol.Entry{votersEntry(0, 1, 0)}, ents(1, 11, 1)...)
	es[4], es[9] = votersEntry(4, 1, 1), votersEntry(9, 1, 2)
	err := s.Apply([]protocol.Write{
		{Kind: protocol.WriteAppend, Entries: es},
		{Kind: protocol.WriteDeletePrefix, Offset: 3},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(s.VoterSets()); got != fmt.Sprint([]protocol.VotersAt{{Offset: 0, Voters: testVoters(0)}, {Offset: 4, Voters: testVoters(1)}, {Offset: 9, Voters: testVoters(2)}}) {
		t.Fatalf("rows %s", got)
	}
}

func damageFile(t *testing.T, path string, f func(tx *bolt.Tx) error) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(f); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// A damaged row fails the open (OpenDir, OpenDirReadOnly) with
// ErrCorrupt naming the file (and the offset, for a row's own damage);
// the undamaged directory (positive control) opens with its rows.
func TestVotersRowDamageAtOpen(t *testing.T) {
	for name, corrupt := range votersCorruptions {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			id := Identity{ClusterID: "c", NodeID: "n"}
			d, _, err := OpenDir(dir, id, DirOptions{NoSync: true})
			if err != nil {
				t.Fatal(err)
			}
			votersLog(t, d)
			d.Close()
			if d, _, err = OpenDir(dir, id, DirOptions{}); err != nil { // positive control
				t.Fatal(err)
			}
			if len(d.VoterSets()) != 3 {
				t.Fatalf("reopen: rows %v", d.VoterSets())
			}
			d.Close()
			active := filepath.Join(dir, DataFileName)
			damageFile(t, active, corrupt)
			if d, _, err := OpenDir(dir, id, DirOptions{}); err == nil {
				d.Close()
				t.Fatal("OpenDir succeeded")
			} else if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), active) {
				t.Fatalf("OpenDir: %v; want ErrCorrupt naming %s", err, active)
			} else if name == "row checksum fails" && !strings.Contains(err.Error(), "offset 4") {
				t.Fatalf("OpenDir: %v; want the offset named", err)
			}
			if d, _, err := OpenDirReadOnly(dir, DirOptions{}); err == nil {
				d.Close()
				t.Fatal("OpenDirReadOnly succeeded")
			} else if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), active) {
				t.Fatalf("OpenDirReadOnly: %v; want ErrCorrupt naming %s", err, active)
			}
		})
	}
}

func fileSum(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

// An active file from before voter sets (no voters bucket) opens with no
// rows and is not changed by the open; the first row written creates the
// bucket, and the row survives a reopen.
func TestVotersFileWithoutBucket(t *testing.T) {
	dropBucket := func(tx *bolt.Tx) error { return tx.DeleteBucket(bucketVoters) }
	dir := t.TempDir()
	path := filepath.Join(dir, DataFileName)
	id := Identity{ClusterID: "c", NodeID: "n"}
	d, _, err := OpenDir(dir, id, DirOptions{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Append(ents(0, 3, 1)); err != nil {
		t.Fatal(err)
	}
	d.Close()
	damageFile(t, path, dropBucket)
	before := fileSum(t, path)
	if d, _, err = OpenDir(dir, id, DirOptions{NoSync: true}); err != nil {
		t.Fatal(err)
	}
	if rows := d.VoterSets(); rows != nil {
		t.Fatalf("rows %v in a directory without the bucket", rows)
	}
	d.Close()
	if fileSum(t, path) != before {
		t.Fatal("opening a file without the voters bucket changed it")
	}
	if d, _, err = OpenDir(dir, id, DirOptions{NoSync: true}); err != nil {
		t.Fatal(err)
	}
	if err := d.Append([]protocol.Entry{votersEntry(3, 1, 1)}); err != nil {
		t.Fatal(err)
	}
	d.Close()
	if d, _, err = OpenDir(dir, id, DirOptions{NoSync: true}); err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if got := fmt.Sprint(d.VoterSets()); got != fmt.Sprint([]protocol.VotersAt{{Offset: 3, Voters: testVoters(1)}}) {
		t.Fatalf("directory rows after reopen %s", got)
	}
}

// Open checks rows cheaply (each decodes, in order, below the LEO);
// VerifyDir, which reads every entry, also finds a row that does not hold
// its entry's set, a voters entry without a row and a row without an
// entry, naming the offset. The sound directory (positive control) passes.
func TestVerifyDirChecksVoterRows(t *testing.T) {
	cases := map[string]func(tx *bolt.Tx) error{
		"row holds another set": func(tx *bolt.Tx) error {
			return tx.Bucket(bucketVoters).Put(u64key(4), encodeVotersRow(protocol.VotersAt{Offset: 4, Voters: testVoters(5)}))
		},
		"row missing": func(tx *bolt.Tx) error {
			return tx.Bucket(bucketVoters).Delete(u64key(4))
		},
		"row without an entry": func(tx *bolt.Tx) error {
			return tx.Bucket(bucketVoters).Put(u64key(5), encodeVotersRow(protocol.VotersAt{Offset: 5, Voters: testVoters(5)}))
		},
	}
	for name, corrupt := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			d, _, err := OpenDir(dir, Identity{ClusterID: "c", NodeID: "n"}, DirOptions{NoSync: true})
			if err != nil {
				t.Fatal(err)
			}
			votersLog(t, d)
			d.Close()
			if r, err := VerifyDir(dir, DirOptions{}); err != nil || r.Entries != 9 {
				t.Fatalf("VerifyDir of the sound directory: %+v, %v", r, err)
			}
			damageFile(t, filepath.Join(dir, DataFileName), corrupt)
			d, _, err = OpenDirReadOnly(dir, DirOptions{})
			if err != nil {
				t.Fatalf("OpenDirReadOnly: %v (open's checks pass: the row is well-formed)", err)
			}
			d.Close()
			_, err = VerifyDir(dir, DirOptions{})
			want := "offset 4"
			if name == "row without an entry" {
				want = "offset 5"
			}
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), want) {
				t.Fatalf("VerifyDir: %v; want ErrCorrupt naming %s", err, want)
			}
		})
	}
}
