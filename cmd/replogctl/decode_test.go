package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/replog-io/replog"
	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/storage"
)

// dumpLines parses dump's output.
func dumpLines(t *testing.T, out string) []dumpLine {
	t.Helper()
	var ls []dumpLine
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var l dumpLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		ls = append(ls, l)
	}
	return ls
}

// A real node's log, written through the public API: dump prints every
// record exactly as a reader of the Log saw it (not the key header the
// protocol stores in front of it), labels the voter set, the cursor
// commit and the barrier for what they are, and shows the keys where the
// protocol keeps them.
func TestDumpDecodesWhatANodeStored(t *testing.T) {
	dir := t.TempDir()
	l, err := replog.Open(replog.Options{NodeID: "n1", Dir: dir, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, rec := range []string{"plain one", "plain two"} {
		if _, err := l.Append(ctx, []byte(rec)); err != nil {
			t.Fatal(err)
		}
	}
	idOff, err := l.Append(ctx, []byte("with an id"), replog.WithID("order-17"))
	if err != nil {
		t.Fatal(err)
	}
	batchOff, err := l.AppendBatch(ctx, [][]byte{[]byte("b1"), {0, 1, 2, 0xff}, []byte("b3")})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.CommitCursor(ctx, "billing", batchOff); err != nil {
		t.Fatal(err)
	}
	if err := l.Barrier(ctx); err != nil {
		t.Fatal(err)
	}
	seen := map[uint64]string{}
	for e, err := range l.ReadRange(ctx, 0, l.Status().ReadableHW) {
		if err != nil {
			t.Fatal(err)
		}
		seen[e.Offset] = string(e.Data)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	code, out, errOut := runCmd(t, "dump", dir)
	if code != exitOK {
		t.Fatalf("dump: exit %d, %s", code, errOut)
	}
	kinds := map[string]int{}
	var producer string
	for _, ln := range dumpLines(t, out) {
		kinds[ln.Kind]++
		rec, isRecord := seen[ln.Offset]
		if isRecord != (ln.Kind == "record") {
			t.Errorf("offset %d: kind %q; a reader saw a record there: %v", ln.Offset, ln.Kind, isRecord)
			continue
		}
		if isRecord {
			if ln.Data == nil {
				t.Fatalf("offset %d: a record without data: %+v", ln.Offset, ln)
			}
			got, err := base64.StdEncoding.DecodeString(*ln.Data)
			if err != nil || string(got) != rec {
				t.Errorf("offset %d: dump's record %q, a reader saw %q", ln.Offset, got, rec)
			}
		}
		switch {
		case ln.Offset == idOff:
			if ln.Key == nil || ln.Key.ID != "order-17" || ln.Key.First != idOff || ln.Key.Entries != 1 || ln.Key.Producer == "" {
				t.Errorf("the append WithID at %d: key %+v", idOff, ln.Key)
			}
			producer = ln.Key.Producer
		case ln.Offset == batchOff || ln.Offset == batchOff+1:
			if ln.Key != nil {
				t.Errorf("offset %d, inside a batch: key %+v (the key rides on the batch's last entry)", ln.Offset, ln.Key)
			}
		case ln.Offset == batchOff+2:
			if ln.Key == nil || ln.Key.First != batchOff || ln.Key.Entries != 3 || ln.Key.ID != "" {
				t.Errorf("the batch's last entry: key %+v, want the batch [%d, %d)", ln.Key, batchOff, batchOff+3)
			}
		case ln.Kind == "cursor":
			if ln.Type != "state" || len(ln.State) != 1 || ln.State[0].Name != "billing" || ln.State[0].Next == nil || *ln.State[0].Next != batchOff || ln.Key == nil {
				t.Errorf("the cursor commit: %+v", ln)
			}
		case ln.Kind == "voter-set":
			if ln.Type != "voters" || len(ln.Voters) != 1 || !strings.HasPrefix(ln.Voters[0], "n1/") || ln.Data != nil {
				t.Errorf("the voter set: %+v", ln)
			}
		case ln.Kind == "barrier":
			if ln.Type != "control" || ln.Data != nil || ln.Key != nil {
				t.Errorf("the barrier: %+v", ln)
			}
		}
		if ln.Malformed != "" || ln.Raw != "" {
			t.Errorf("offset %d does not decode: %+v", ln.Offset, ln)
		}
	}
	if kinds["record"] != len(seen) || kinds["voter-set"] != 1 || kinds["cursor"] != 1 || kinds["barrier"] < 1 {
		t.Errorf("kinds %v; want %d records, a voter set, a cursor, a barrier", kinds, len(seen))
	}
	if len(producer) != 16 {
		t.Errorf("producer %q: want 16 hex digits", producer)
	}
}

// Entries that do not decode are shown with their bytes and the reason,
// not dropped nor printed as records.
func TestDumpShowsMalformedEntries(t *testing.T) {
	starts := newEpochStarts([]protocol.EpochStart{{Epoch: 1, StartOffset: 0}}, 0)
	for _, en := range []protocol.Entry{
		{Offset: 3, Epoch: 1, Type: protocol.EntryVoters, Data: []byte{9, 9}},
		{Offset: 4, Epoch: 1, Type: protocol.EntryKeyed, Data: []byte{200}},
		{Offset: 5, Epoch: 1, Type: protocol.EntryState, Data: protocol.KeyedData(nil, []byte{42})},
		{Offset: 6, Epoch: 1, Type: protocol.EntryControl, Data: []byte("x")},
		{Offset: 7, Epoch: 1, Type: protocol.EntryType(77), Data: []byte("?")},
	} {
		l := decodeEntry(en, starts)
		if l.Malformed == "" || l.Raw != base64.StdEncoding.EncodeToString(en.Data) || l.Data != nil {
			t.Errorf("%s entry %v: %+v, want it shown as malformed with its bytes", en.Type, en.Data, l)
		}
	}
}

// Control entries are told apart by where they sit: the first of an
// epoch, a later one, and one at a log start that a deletion moved (the
// epoch map's first row moved with it, so it cannot tell).
func TestControlKinds(t *testing.T) {
	rows := []protocol.EpochStart{{Epoch: 1, StartOffset: 0}, {Epoch: 3, StartOffset: 10}}
	fresh := newEpochStarts(rows, 0)
	for off, want := range map[uint64]string{0: "epoch-start", 5: "barrier", 10: "epoch-start", 11: "barrier"} {
		if got := fresh.controlKind(off); got != want {
			t.Errorf("log start 0, offset %d: %q, want %q", off, got, want)
		}
	}
	deleted := newEpochStarts([]protocol.EpochStart{{Epoch: 1, StartOffset: 4}, {Epoch: 3, StartOffset: 10}}, 4)
	for off, want := range map[uint64]string{4: "control", 5: "barrier", 10: "epoch-start"} {
		if got := deleted.controlKind(off); got != want {
			t.Errorf("log start 4, offset %d: %q, want %q", off, got, want)
		}
	}
}

// The offline commands say what is wrong with the directory in the
// user's terms, never naming the storage package's functions.
func TestOfflineErrorsSayWhatFailed(t *testing.T) {
	tmp := t.TempDir()
	empty := filepath.Join(tmp, "empty")
	file := filepath.Join(tmp, "file")
	orphan := filepath.Join(tmp, "orphan") // an identity, no data file
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, _, err := storage.OpenDir(orphan, offlineID, storage.DirOptions{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := os.Remove(filepath.Join(orphan, storage.DataFileName)); err != nil {
		t.Fatal(err)
	}
	held, _ := offlineDir(t)
	hs, _, err := storage.OpenDir(held, offlineID, storage.DirOptions{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer hs.Close()

	cases := []struct {
		dir  string
		want []string
	}{
		{filepath.Join(tmp, "nope"), []string{"nope does not exist"}},
		{empty, []string{"not a replog data directory", storage.DataFileName}},
		{file, []string{"is a file, not a data directory"}},
		{orphan, []string{"damaged", "no data file", "log and vote are gone"}},
		{held, []string{"locked by a running node", "stop the node"}},
	}
	for _, name := range []string{"inspect", "verify", "dump"} {
		for _, c := range cases {
			code, out, errOut := runCmd(t, name, "--timeout", "50ms", c.dir)
			if code != exitFailure || out != "" {
				t.Errorf("%s %s: exit %d, stdout %q", name, c.dir, code, out)
			}
			for _, w := range append(c.want, c.dir) {
				if !strings.Contains(errOut, w) {
					t.Errorf("%s %s: stderr %q lacks %q", name, c.dir, errOut, w)
				}
			}
			for _, internal := range []string{"OpenDirReadOnly", "VerifyDir", "replog: "} {
				if strings.Contains(errOut, internal) {
					t.Errorf("%s %s: stderr %q names %q", name, c.dir, errOut, internal)
				}
			}
		}
	}
}

// inspect says what the HW checkpoint is, beside the number.
func TestInspectExplainsTheHWCheckpoint(t *testing.T) {
	dir, _ := offlineDir(t)
	code, out, errOut := runCmd(t, "inspect", dir)
	if code != exitOK {
		t.Fatalf("inspect: exit %d, %s", code, errOut)
	}
	for _, want := range []string{"HW checkpoint  550 (the high watermark last saved to disk", "may lag the LEO", "by design", "learns the real high watermark from its leader"} {
		if !strings.Contains(out, want) {
			t.Errorf("inspect output lacks %q:\n%s", want, out)
		}
	}
}
