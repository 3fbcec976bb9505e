package main

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/storage"
)

var offlineID = storage.Identity{ClusterID: "ctl", NodeID: "n1"}

func record(off uint64) []byte {
	return fmt.Appendf(nil, "record-%d-%s", off, strings.Repeat("x", 100))
}

// offlineDir returns a stopped node's data directory: entries in small
// segments (several sealed files), a control entry, two epochs, a vote,
// an HW checkpoint and a deleted prefix; and its identity.
func offlineDir(t *testing.T) (string, storage.Identity) {
	t.Helper()
	dir := t.TempDir()
	s, id, err := storage.OpenDir(dir, offlineID, storage.DirOptions{SegmentBytes: 48 << 10, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var off uint64
	put := func(n int, epoch uint64, typ protocol.EntryType) {
		es := make([]protocol.Entry, n)
		for i := range es {
			es[i] = protocol.Entry{Offset: off, Epoch: epoch, Type: typ, Time: 1700000000000 + int64(off), Data: record(off)}
			if typ == protocol.EntryControl {
				es[i].Data = nil
			}
			off++
		}
		if err := s.Append(es); err != nil {
			t.Fatal(err)
		}
	}
	for range 15 {
		put(20, 1, protocol.EntryData)
	}
	put(1, 2, protocol.EntryControl)
	for range 15 {
		put(20, 2, protocol.EntryData)
	}
	err = s.Apply([]protocol.Write{
		{Kind: protocol.WriteQuorumState, Quorum: protocol.QuorumState{Epoch: 2, VotedFor: "n1", LeaderID: "n1"}},
		{Kind: protocol.WriteHWCheckpoint, Offset: 550},
		{Kind: protocol.WriteDeletePrefix, Offset: 100},
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := s.Stats().Sealed; n < 3 {
		t.Fatalf("only %d sealed segments", n)
	}
	return dir, id
}

func TestInspect(t *testing.T) {
	dir, id := offlineDir(t)
	code, out, errOut := runCmd(t, "inspect", dir)
	if code != exitOK {
		t.Fatalf("inspect: exit %d, %s", code, errOut)
	}
	if testing.Verbose() {
		t.Logf("inspect:\n%s", out)
	}
	for _, want := range []string{
		fmt.Sprintf(`cluster "ctl", node "n1", directory %s`, id.DirectoryID),
		"log start      100", "LEO            601", "HW checkpoint  550",
		`epoch 2, voted for "n1", leader "n1"`,
		"replog.db (active)", "replog-000000000000000000",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("inspect output lacks %q:\n%s", want, out)
		}
	}
	// --json: the same, as one object; the segments are contiguous and
	// end at the LEO, the epoch map covers the log start.
	code, out, errOut = runCmd(t, "inspect", "--json", dir)
	if code != exitOK {
		t.Fatalf("inspect --json: exit %d, %s", code, errOut)
	}
	var r inspectReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("inspect --json: %v\n%s", err, out)
	}
	if r.Identity != id || r.LogStart != 100 || r.LEO != 601 || r.HWCheckpoint == nil || *r.HWCheckpoint != 550 ||
		r.Quorum.VotedFor != "n1" || fmt.Sprint(r.Epochs) != "[{1 100} {2 300}]" {
		t.Fatalf("inspect --json: %+v", r)
	}
	next := r.Segments[0].Base
	for i, seg := range r.Segments {
		if seg.Base != next || seg.Bytes == 0 || seg.Active != (i == len(r.Segments)-1) {
			t.Fatalf("segment %d: %+v", i, seg)
		}
		next = seg.End
	}
	if next != r.LEO || r.Segments[0].Base > r.LogStart {
		t.Fatalf("segments %+v do not cover [%d, %d)", r.Segments, r.LogStart, r.LEO)
	}
}

// verify passes a sound directory (exit 0), and fails (exit 1) naming the
// file and offset of one entry whose byte was flipped in a sealed segment.
func TestVerify(t *testing.T) {
	dir, _ := offlineDir(t)
	code, out, errOut := runCmd(t, "verify", dir)
	if code != exitOK || !strings.Contains(out, "ok: 501 entries [100, 601)") {
		t.Fatalf("verify of a sound directory: exit %d, %q, %q", code, out, errOut)
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "replog-*.seg"))
	name := segs[len(segs)-1]
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var off uint64
	i := -1
	for off = 100; off < 601 && i < 0; off++ {
		i = bytes.Index(b, record(off))
	}
	off--
	if i < 0 {
		t.Fatalf("no record found in %s", name)
	}
	b[i+3] ^= 0x20
	if err := os.WriteFile(name, b, 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = runCmd(t, "verify", dir)
	if code != exitFailure || out != "" || !strings.Contains(errOut, name) || !strings.Contains(errOut, fmt.Sprintf("offset %d", off)) ||
		!strings.Contains(errOut, "checksum") {
		t.Fatalf("verify with entry %d damaged: exit %d, %q, %q; want exit 1 naming %s and the offset", off, code, out, errOut, name)
	}
}

// dump prints [--from, --to) as JSON lines with the records in base64,
// across segments; the default range is the whole log; a range outside
// the log fails.
func TestDump(t *testing.T) {
	dir, _ := offlineDir(t)
	lines := func(out string) []dumpLine {
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
	code, out, errOut := runCmd(t, "dump", "--from", "250", "--to", "420", dir)
	if code != exitOK {
		t.Fatalf("dump: exit %d, %s", code, errOut)
	}
	ls := lines(out)
	if len(ls) != 170 || ls[0].Offset != 250 || ls[len(ls)-1].Offset != 419 {
		t.Fatalf("dump --from 250 --to 420: %d lines, %+v ... %+v", len(ls), ls[0], ls[len(ls)-1])
	}
	for _, l := range ls {
		if l.Offset == 300 {
			if l.Type != "control" || l.Kind != "epoch-start" || l.Epoch != 2 || l.Data != nil {
				t.Fatalf("offset 300: %+v, want epoch 2's control entry, the first of its epoch", l)
			}
			continue
		}
		if l.Data == nil {
			t.Fatalf("offset %d: %+v, a record without data", l.Offset, l)
		}
		data, err := base64.StdEncoding.DecodeString(*l.Data)
		switch {
		case err != nil:
			t.Fatal(err)
		case l.Type != "data" || l.Kind != "record" || !bytes.Equal(data, record(l.Offset)) || l.Time != 1700000000000+int64(l.Offset):
			t.Fatalf("offset %d: %+v", l.Offset, l)
		}
	}
	code, out, _ = runCmd(t, "dump", dir)
	if ls := lines(out); code != exitOK || len(ls) != 501 || ls[0].Offset != 100 {
		t.Fatalf("dump of the whole log: exit %d, %d lines", code, len(ls))
	}
	for _, args := range [][]string{{"--from", "99"}, {"--to", "602"}} {
		code, out, errOut := runCmd(t, append(append([]string{"dump"}, args...), dir)...)
		if code != exitFailure || out != "" || !strings.Contains(errOut, "out of range") {
			t.Fatalf("dump %v: exit %d, %q, %q; want exit 1, out of range", args, code, out, errOut)
		}
	}
	if code, _, _ := runCmd(t, "dump", "--from", "x", dir); code != exitUsage {
		t.Fatalf("dump --from x: exit %d, want 2", code)
	}
}

// The offline commands need exactly one directory, and refuse one a node
// holds (exit 1, saying it is in use) without waiting long; a missing
// directory fails.
func TestOfflineRefusals(t *testing.T) {
	dir, _ := offlineDir(t)
	for _, name := range []string{"inspect", "verify", "dump"} {
		if code, _, errOut := runCmd(t, name); code != exitUsage || !strings.Contains(errOut, "one data directory") {
			t.Errorf("%s without a directory: exit %d, %q", name, code, errOut)
		}
		if code, _, _ := runCmd(t, name, dir, dir); code != exitUsage {
			t.Errorf("%s with two directories: exit %d", name, code)
		}
		if code, _, errOut := runCmd(t, name, filepath.Join(dir, "nope")); code != exitFailure || errOut == "" {
			t.Errorf("%s of a missing directory: exit %d, %q", name, code, errOut)
		}
	}
	s, _, err := storage.OpenDir(dir, offlineID, storage.DirOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"inspect", "verify", "dump"} {
		code, out, errOut := runCmd(t, name, "--timeout", "50ms", dir)
		if code != exitFailure || out != "" || !strings.Contains(errOut, "locked by a running node") {
			t.Errorf("%s while a node holds the directory: exit %d, %q, %q", name, code, out, errOut)
		}
	}
	s.Close()
	if code, _, errOut := runCmd(t, "inspect", dir); code != exitOK { // positive control
		t.Fatalf("inspect after the node closed: exit %d, %s", code, errOut)
	}
}
