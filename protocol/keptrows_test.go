package protocol_test

import (
	"fmt"
	"testing"

	"github.com/replog-io/replog/protocol"
)

// TestKeptVoterRows: a prefix deletion keeps every row at or above its
// start and, below it, the newest row and the newest before it with
// another set (copies of the set in force are no change); rows is not
// modified.
func TestKeptVoterRows(t *testing.T) {
	set := func(ids ...string) []protocol.Voter {
		vs := make([]protocol.Voter, len(ids))
		for i, id := range ids {
			vs[i] = protocol.Voter{ID: id, DirID: "d" + id}
		}
		return vs
	}
	abc, ab, abd := set("a", "b", "c"), set("a", "b"), set("a", "b", "d")
	rows := []protocol.VotersAt{{Offset: 0, Voters: abc}, {Offset: 3, Voters: ab}, {Offset: 5, Voters: ab}, {Offset: 7, Voters: abd}, {Offset: 9, Voters: abd}}
	offsets := func(rs []protocol.VotersAt) string {
		s := ""
		for _, r := range rs {
			s += fmt.Sprint(r.Offset, " ")
		}
		return s
	}
	for _, c := range []struct {
		start uint64
		want  string
	}{
		{0, "0 3 5 7 9 "},
		{1, "0 3 5 7 9 "}, // one row below: kept
		{4, "0 3 5 7 9 "}, // two below, different sets
		{6, "0 5 7 9 "},   // 5 copies 3: the change kept is 0's
		{8, "5 7 9 "},
		{10, "5 9 "}, // 9 copies 7: the change before is 5's
		{100, "5 9 "},
	} {
		if got := offsets(protocol.KeptVoterRows(rows, c.start)); got != c.want {
			t.Errorf("KeptVoterRows(start %d) = %s, want %s", c.start, got, c.want)
		}
	}
	if got := offsets(rows); got != "0 3 5 7 9 " {
		t.Fatalf("rows modified: %s", got)
	}
	// Only copies below the start: the newest alone.
	copies := []protocol.VotersAt{{Offset: 1, Voters: ab}, {Offset: 2, Voters: ab}}
	if got := offsets(protocol.KeptVoterRows(copies, 5)); got != "2 " {
		t.Fatalf("copies only: %s, want 2", got)
	}
}
