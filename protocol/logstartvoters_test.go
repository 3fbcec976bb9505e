package protocol_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/replog-io/replog/protocol"
)

// TestFetchResponseLogStartVoters: an out-of-range answer carries the
// leader's voter-set rows below its log start (R53, R55) through the
// codec; a set that DecodeVoters refuses, and a count the bytes cannot
// hold, are malformed.
func TestFetchResponseLogStartVoters(t *testing.T) {
	rows := []protocol.VotersAt{
		{Offset: 3, Voters: []protocol.Voter{{ID: "a", DirID: "da"}, {ID: "b", DirID: "db"}, {ID: "c", DirID: "dc"}}},
		{Offset: 41, Voters: []protocol.Voter{{ID: "a", DirID: "da"}, {ID: "b", DirID: "db"}}},
	}
	m := protocol.Message{From: "l", To: "f", Body: &protocol.FetchResponse{FetchID: 1, LeaderID: "l", Epoch: 2,
		Error: protocol.FetchOffsetOutOfRange, LogStartOffset: 50, LogStartVoters: rows}}
	b, err := protocol.AppendMessage(nil, m)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != protocol.EncodedSize(m) {
		t.Fatalf("encoded %d bytes, EncodedSize says %d", len(b), protocol.EncodedSize(m))
	}
	got, err := protocol.DecodeMessage(b)
	if err != nil {
		t.Fatal(err)
	}
	gr := got.Body.(*protocol.FetchResponse).LogStartVoters
	if len(gr) != 2 || gr[0].Offset != 3 || gr[1].Offset != 41 || !slices.Equal(gr[0].Voters, rows[0].Voters) || !slices.Equal(gr[1].Voters, rows[1].Voters) {
		t.Fatalf("decoded rows %v, want %v", gr, rows)
	}
	// The second set's format byte is the 2+4+... byte of its encoding:
	// find it from the end (the set is the last field).
	last := protocol.EncodeVoters(rows[1].Voters)
	bad := slices.Clone(b)
	bad[len(bad)-len(last)] = 9
	if _, err := protocol.DecodeMessage(bad); !errors.Is(err, protocol.ErrMalformed) || !strings.Contains(err.Error(), "log start voters set") {
		t.Fatalf("a malformed set: %v, want ErrMalformed naming the field", err)
	}
	// A forged count.
	short := slices.Clone(b[:len(b)-len(last)-12-len(protocol.EncodeVoters(rows[0].Voters))-12-4])
	short = append(short, 0xff, 0xff, 0xff, 0xff)
	if _, err := protocol.DecodeMessage(short); !errors.Is(err, protocol.ErrMalformed) || !strings.Contains(err.Error(), "log start voters") {
		t.Fatalf("a forged count: %v, want ErrMalformed naming the field", err)
	}
}
