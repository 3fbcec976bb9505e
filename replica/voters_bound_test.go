package replica

import (
	"slices"

	"github.com/replog-io/replog/protocol"
)

// boundLog is a LogReader of a cluster past its bootstrap (R57): its voter
// set, each voter at the directory Config.DirID defaults to (its ID), is in
// force from before offset 0, as if recorded before the log's first entry.
// Tests of the rules that do not depend on the bootstrap run on it, so their
// offsets stay those of the scenarios they write down (the seed
// walkthrough's); the bootstrap has tests of its own.
type boundLog struct {
	LogReader
	voters []string
}

// bound returns log with voters in force from before offset 0.
func bound(log LogReader, voters []string) LogReader {
	return boundLog{LogReader: log, voters: slices.Clone(voters)}
}

// VoterSets is the synthetic row (at offset 0) and the store's own.
func (b boundLog) VoterSets() []protocol.VotersAt {
	vs := make([]protocol.Voter, len(b.voters))
	for i, id := range b.voters {
		vs[i] = protocol.Voter{ID: id, DirID: id}
	}
	return append([]protocol.VotersAt{{Offset: 0, Voters: vs}}, b.LogReader.VoterSets()...)
}
