package main

import (
	"bufio"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/storage"
)

// A directory whose log holds voters entries (docs/protocol.md R55), one of
// them below the log start after a deletion: verify passes it, inspect
// lists its voter sets (the one in force at the log start first), dump
// shows its voters entries with their sets.
func TestOfflineVoterSets(t *testing.T) {
	dir := t.TempDir()
	s, _, err := storage.OpenDir(dir, offlineID, storage.DirOptions{SegmentBytes: 48 << 10, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	set := func(dirs ...string) []protocol.Voter {
		var vs []protocol.Voter
		for i, d := range dirs {
			vs = append(vs, protocol.Voter{ID: "n" + string(rune('1'+i)), DirID: d})
		}
		return vs
	}
	es := make([]protocol.Entry, 300)
	for i := range es {
		es[i] = protocol.Entry{Offset: uint64(i), Epoch: 1, Type: protocol.EntryData, Data: record(uint64(i))}
	}
	es[0] = protocol.Entry{Offset: 0, Epoch: 1, Type: protocol.EntryVoters, Data: protocol.EncodeVoters(set("a0", "b0", "c0"))}
	es[10] = protocol.Entry{Offset: 10, Epoch: 1, Type: protocol.EntryVoters, Data: protocol.EncodeVoters(set("a1", "b1", "c1"))}
	es[200] = protocol.Entry{Offset: 200, Epoch: 1, Type: protocol.EntryVoters, Data: protocol.EncodeVoters(set("a2", "b2"))}
	err = s.Apply([]protocol.Write{{Kind: protocol.WriteAppend, Entries: es}, {Kind: protocol.WriteDeletePrefix, Offset: 100}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Append([]protocol.Entry{{Offset: 300, Epoch: 1, Type: protocol.EntryData, Data: record(300)}}); err != nil {
		t.Fatal(err)
	}
	s.Close()

	if code, out, errOut := runCmd(t, "verify", dir); code != exitOK || !strings.Contains(out, "ok: 201 entries [100, 301)") {
		t.Fatalf("verify: exit %d, %q, %q", code, out, errOut)
	}
	code, out, errOut := runCmd(t, "inspect", dir)
	if code != exitOK {
		t.Fatalf("inspect: exit %d, %s", code, errOut)
	}
	// Below the log start the store keeps the set in force there (10) and
	// the newest change before it (0: protocol.KeptVoterRows).
	if !strings.Contains(out, "voter sets     3") || !strings.Contains(out, "  0    n1/a0,n2/b0,n3/c0\n  10   n1/a1,n2/b1,n3/c1\n  200  n1/a2,n2/b2\n") {
		t.Fatalf("inspect output lacks the voter sets at 0, 10 and 200:\n%s", out)
	}
	code, out, errOut = runCmd(t, "inspect", "--json", dir)
	var r inspectReport
	if err := json.Unmarshal([]byte(out), &r); code != exitOK || err != nil || len(r.VoterSets) != 3 || r.VoterSets[1].Offset != 10 {
		t.Fatalf("inspect --json: exit %d, %v, %+v, %s", code, err, r.VoterSets, errOut)
	}
	code, out, errOut = runCmd(t, "dump", "--from", "199", "--to", "202", dir)
	if code != exitOK {
		t.Fatalf("dump: exit %d, %s", code, errOut)
	}
	var types []string
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var l dumpLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		types = append(types, l.Type)
		if l.Offset == 200 && !slices.Equal(l.Voters, []string{"n1/a2", "n2/b2"}) {
			t.Fatalf("offset 200: %+v, want its voters", l)
		}
		if l.Offset != 200 && l.Voters != nil {
			t.Fatalf("offset %d: %+v, a data entry with voters", l.Offset, l)
		}
	}
	if !slices.Equal(types, []string{"data", "voters", "data"}) {
		t.Fatalf("dump types %v", types)
	}
}
