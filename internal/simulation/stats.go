package simulation

import (
	"fmt"
	"reflect"
	"strings"
)

// FaultCounts counts the faults injected beyond the basic ones (crashes
// and partitions count in Result), by kind, per run (or summed over runs
// by the tests' -sim.stats).
type FaultCounts struct {
	// Lulls: fault-free stretches of about liveBound inside the fault
	// phase (liveness rule 1 is checked in each).
	Lulls int
	// Duplicates: duplicated messages; CrossIncarnation: messages sent to
	// one incarnation of a node and delivered to a later one.
	Duplicates, CrossIncarnation int
	// ClockJumps, ClockStalls: one node's clock stepped forward, or
	// frozen for a while.
	ClockJumps, ClockStalls int
	// DiskErrors: a write's completion failed; the node stopped and
	// restarted from its store. TornWrites: a crash left some pending
	// writes on disk with the last append cut short.
	DiskErrors, TornWrites int
	// NoSyncNodes: nodes run without fsync; NoSyncLosses: power losses
	// that cost a NoSync node writes it had reported durable;
	// NoSyncTainted: runs stopped because such a loss took a granted vote
	// or a committed entry's last majority.
	NoSyncNodes, NoSyncLosses, NoSyncTainted int
	// DeadAdds: runs stopped because a leader added an incarnation whose
	// disk was already lost (it fetched within the bound R58 allows, then
	// was wiped): with one more voter lost, no protocol could elect.
	DeadAdds int
	// PipelinedLosses: crashes of a node that had fetched past entries
	// still in its writer (R71), which the crash lost (no leader counted
	// them: R70).
	PipelinedLosses int
	// False leader hints: naming a node that does not lead, a non-voter,
	// or a bogus (too high) epoch.
	HintsWrongNode, HintsNonVoter, HintsBogusEpoch int
	// BigClusters: runs with 6 or 7 voters. PausesExtended: pauses of an
	// already paused node (the later resume time is kept).
	BigClusters, PausesExtended int
	// Retention (retention.go). DeletesRequested: DeleteBefore
	// events, on any node; DeletesMoved: prefix deletions of leaders (a
	// request that moved the log start); FollowDeletes: prefix deletions
	// of followers and observers following their leader's log start;
	// Resets: replicas that emptied their log and restarted it at the
	// leader's log start; LagFaults: a node paused or cut off while its
	// leader deletes; ObserverWipes: observers restarted on an empty
	// store; ReadsOutOfRange: reads below a log start, answered
	// ErrOutOfRange.
	DeletesRequested, DeletesMoved, FollowDeletes, Resets, LagFaults, ObserverWipes, ReadsOutOfRange int
	// Voters (voters.go). ManualRuns: runs with
	// ManualVoterChanges (the workload heals wiped voters). VoterChanges:
	// changes the workload proposed, VoterProbes among them those meant to
	// be refused (an unknown node to add, a non-voter or the last voter to
	// remove); VoterAdds, VoterRemoves: changes acknowledged;
	// VoterChangesRefused: changes answered with a documented refusal or
	// not-leader/unknown outcome; VoterSetsCommitted: committed voter sets
	// that changed the set (the workload's, and the automatic
	// replacement's removes and adds); RemovedLeaders: leaders that resigned
	// once the set removing them was committed; VoterWipes: voters
	// restarted on an empty store with a new directory; VoterWipesHeld:
	// voter wipes not made because another voter lacked its disk, a set
	// was too small or a majority was down; Replacements: wiped voters
	// whose new incarnation became a voter of the committed set again.
	ManualRuns, VoterChanges, VoterProbes, VoterAdds, VoterRemoves, VoterChangesRefused, VoterSetsCommitted, RemovedLeaders int
	VoterWipes, VoterWipesHeld, Replacements                                                                                int
	// KeyCheckpointRestores: restarts whose core rebuilt its keyed-state
	// table from the store's key checkpoint (R76) instead of the whole log.
	KeyCheckpointRestores int
	// Snapshots (snapshot.go). SnapshotsSaved: the workload's saves;
	// SnapshotsInstalled: shipped snapshots installed; SnapshotChunksFailed:
	// chunks whose write failed (a simulated disk error) or whose install
	// was refused (a damaged partial); SnapshotTransferCrashes: receivers
	// crashed by the nemesis in the middle of a transfer;
	// SnapshotRestores: services restored from a snapshot; SnapshotPartialsTorn:
	// crashes that cut or damaged a partial snapshot; SnapshotStatesLost:
	// services whose state a log start passed.
	SnapshotsSaved, SnapshotsInstalled, SnapshotChunksFailed, SnapshotTransferCrashes, SnapshotRestores, SnapshotPartialsTorn, SnapshotStatesLost int
	// Compaction (compaction.go, kvsim.go). CompactionPasses: passes that
	// rewrote a range (one per segment rewritten); CompactionRemoved: the
	// entries they removed;
	// HolesFetched: placeholders followers appended from a compacted
	// leader; HolesRead: committed data entries a reader or a service
	// passed over as holes; KVConditionalOK, KVConditionalFailed: the
	// committed Creates and Updates that succeeded and failed.
	CompactionPasses, CompactionRemoved, HolesFetched, HolesRead, KVConditionalOK, KVConditionalFailed int
}

// Add adds o's counts to f.
func (f *FaultCounts) Add(o FaultCounts) {
	a, b := reflect.ValueOf(f).Elem(), reflect.ValueOf(o)
	for i := 0; i < a.NumField(); i++ {
		a.Field(i).SetInt(a.Field(i).Int() + b.Field(i).Int())
	}
}

// String lists the counts as name=value pairs.
func (f FaultCounts) String() string {
	v := reflect.ValueOf(f)
	var b strings.Builder
	for i := 0; i < v.NumField(); i++ {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%d", v.Type().Field(i).Name, v.Field(i).Int())
	}
	return b.String()
}
