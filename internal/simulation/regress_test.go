package simulation

import (
	"fmt"
	"testing"
)

// regressMode is the options a regression seed runs with, besides the
// defaults (Stable on, liveness on, voter changes on, every fault kind).
type regressMode int

const (
	modeDefault     regressMode = iota
	modeClassic                 // Options.Classic: the basic faults only
	modeSafetyOnly              // Options.SafetyOnly: consequence checks only
	modeExactlyOnce             // Options.ExactlyOnce: the keyed workload
	// modeAll runs with the version mix, closed connections, the catalog
	// workload and quiescence (the rows found since they exist), without
	// compaction.
	modeAll
	// modeKeys runs as TestSimulation does by default: modeAll with entry
	// keys, compaction and the KV (compaction.go, kvsim.go).
	modeKeys
)

func (m regressMode) String() string {
	return [...]string{"", "classic", "safetyonly", "exactlyonce", "all", "keys"}[m]
}

// options are the Options of seed's run in mode m: fixed, whatever the
// command line's -sim.* flags say, so that a row always replays its run.
// The rows were found before the version mix (versions.go), closed
// connections (peerdown.go), the catalog workload (catalog.go) and
// quiescence (quiescence.go) existed, whose events draw from the main
// stream: they run without them, except in modeAll and modeKeys; and
// before compaction (compaction.go), whose proposals change the main
// stream's messages: it runs only in modeKeys.
func (m regressMode) options(seed int64, steps int) Options {
	o := Options{Seed: seed, Steps: steps, Stable: true, Bugs: knownBugs(), NoVersionMix: true, NoConnClose: true, NoCatalog: true, NoQuiescence: true, NoCompaction: true}
	switch m {
	case modeAll:
		o.NoVersionMix, o.NoConnClose, o.NoCatalog, o.NoQuiescence = false, false, false, false
	case modeKeys:
		o.NoVersionMix, o.NoConnClose, o.NoCatalog, o.NoQuiescence, o.NoCompaction = false, false, false, false, false
	case modeClassic:
		o.Classic = true
	case modeSafetyOnly:
		o.SafetyOnly = true
	case modeExactlyOnce:
		o.ExactlyOnce = true
	}
	return o
}

// regression is one row of the regression table: a seed that once failed
// (or made the checker fail falsely), the length and options of its run,
// and the rule or failure it guards. Where a replica bug toggle
// (-tags replog_bug_*, replica's bugs doc) makes the run fail, guards
// names it: the row then has teeth for that rule.
type regression struct {
	seed  int64
	steps int
	mode  regressMode
	// guards is the rule or failure the run guards against.
	guards string
	// exercised, if set, checks that the run still does what the seed was
	// chosen for (the random streams change with the simulator, and a
	// seed may drift away from its scenario): it returns what is missing,
	// or "".
	exercised func(Result) string
}

func wipedAVoter(r Result) string {
	if r.Faults.VoterWipes == 0 {
		return "it wiped no voter"
	}
	return ""
}

func installedASnapshot(r Result) string {
	if r.Faults.SnapshotsInstalled == 0 {
		return "it installed no shipped snapshot"
	}
	return ""
}

func resyncedAQuiescentLog(r Result) string {
	if r.QuiescentFetches == 0 || r.Resyncs == 0 {
		return "it resynced no quiescent log"
	}
	return ""
}

func restartedAQuiescentLog(r Result) string {
	if r.QuiescentFetches == 0 || r.Crashes == 0 {
		return fmt.Sprintf("it sent %d quiescent fetches and crashed %d processes", r.QuiescentFetches, r.Crashes)
	}
	return ""
}

func compactedAndDecided(r Result) string {
	if r.Faults.CompactionRemoved == 0 || r.Faults.HolesFetched == 0 || r.Faults.KVConditionalOK == 0 || r.Faults.KVConditionalFailed == 0 {
		return fmt.Sprintf("it removed %d entries by compaction, fetched %d placeholders, and its KV's conditional writes: %d succeeded, %d failed",
			r.Faults.CompactionRemoved, r.Faults.HolesFetched, r.Faults.KVConditionalOK, r.Faults.KVConditionalFailed)
	}
	return ""
}

func compactedAndFetched(r Result) string {
	if r.Faults.CompactionRemoved == 0 || r.Faults.HolesFetched == 0 {
		return fmt.Sprintf("it removed %d entries by compaction and fetched %d placeholders", r.Faults.CompactionRemoved, r.Faults.HolesFetched)
	}
	return ""
}

func madeADeadAdd(r Result) string {
	if r.Faults.DeadAdds == 0 || !r.Tainted {
		return fmt.Sprintf("it made no dead add (DeadAdds %d, tainted %v)", r.Faults.DeadAdds, r.Tainted)
	}
	return ""
}

// regressions are the simulation's regression seeds, one table. A seed a
// sweep finds failing goes here once what it found is fixed.
var regressions = []regression{
	// Entry keys, compaction and the KV (compaction.go, kvsim.go).
	{21, 3000, modeKeys, "compaction passes remove only superseded keyed entries, followers fetch the placeholders, and the KV's Updates succeed only against the revision they name (R103, R104, R90; fails with replog_bug_compact_drop_newest and replog_bug_kv_update_no_revision)", compactedAndDecided},
	{81, 3000, modeKeys, "as 21 x3000, another run: a key's newest value is never compacted away, a conditional write commits only against the revision it names (R103, R90; fails with replog_bug_compact_drop_newest and replog_bug_kv_update_no_revision)", compactedAndDecided},
	{112, 1500, modeKeys, "a complete pass leaves each key at most one entry below its point, so the next pass may skip the clean segments it does not supersede (R103; fails with replog_bug_compact_skip_superseded and replog_bug_compact_drop_newest)", compactedAndFetched},
	// Elections and epochs.
	{130025491, 1500, modeClassic, "a vote answer counts only for the round it answers: a late pre-vote grant of an earlier round must not make a candidate that deposes a healthy leader (R20)", nil},
	{80201032, 5000, modeDefault, "a follower reset to its leader's log start compares in elections as the log it stands for (the leader's epoch below its log start), so it never elects a candidate without committed entries (R53; fails with replog_bug_no_outgoing)", nil},
	{80201032, 1500, modeDefault, "as at 5000 steps: a reset log compares as the log it stands for (R53; fails with replog_bug_no_outgoing)", nil},
	{80124747, 1500, modeDefault, "a voter judges a candidate its own set lacks (it lacks the entry adding it) by the candidate's set, so the longest log can still be elected (R42, Raft §4.2.3)", nil},

	// Voter sets: a leader that removes itself (R55, R58).
	{85008750, 1500, modeDefault, "a leader that appended its own removal and lost its quorum before it committed still campaigns in that set, else nobody is electable (R55 outgoing)", nil},
	{70100862, 5000, modeDefault, "an outgoing replica (its uncommitted newest set removed it) campaigns until the removal commits (R55; fails with replog_bug_no_outgoing)", nil},
	{70110741, 5000, modeDefault, "an outgoing replica campaigns until the removal commits (R55); a wiped voter's new incarnation is not counted as its old self (R56; fails with replog_bug_wiped_voter)", nil},
	{70107078, 5000, modeDefault, "an outgoing replica campaigns until the removal commits (R55; fails with replog_bug_no_outgoing)", nil},
	{70111570, 5000, modeDefault, "an outgoing replica campaigns until the removal commits (R55; fails with replog_bug_no_outgoing and replog_bug_wiped_voter)", nil},
	{70102668, 5000, modeDefault, "an outgoing replica campaigns until the removal commits, with a wiped observer re-added (R55)", nil},
	{70114583, 5000, modeDefault, "an outgoing replica campaigns until the removal commits; a commit counts voters at their recorded directories (R55, R56; fails with replog_bug_no_outgoing)", nil},

	// Wiped voters (R56) and their automatic replacement (R58).
	{2, 1500, modeSafetyOnly, "a wiped voter's new incarnation, its log empty, is never counted as its old self: no committed entry is lost (R56; fails with replog_bug_wiped_voter)", wipedAVoter},
	{12, 1500, modeSafetyOnly, "as seed 2: a wiped voter is not counted as its old self (R56; fails with replog_bug_wiped_voter)", wipedAVoter},
	{3726, 1500, modeSafetyOnly, "as seed 2: a wiped voter is not counted as its old self (R56; fails with replog_bug_wiped_voter)", wipedAVoter},
	{84027860, 1500, modeDefault, "a replica that votes in no set of its own (a wiped sole bootstrap voter holding the first set) follows whoever leads, catches up and is replaced (R42)", nil},
	{82044543, 1500, modeDefault, "an add needs a fetch now (within FetchMaxWait+ElectionTimeout): a node wiped just after its last fetch is not added at its dead directory (R58)", nil},
	{84001358, 5000, modeDefault, "a leader adding an incarnation whose disk was lost since its last fetch (within R58's bound) stops the run as tainted, not failed: with one more voter lost no protocol elects", madeADeadAdd},
	{19702, 1500, modeDefault, "below the log start, voter-set rows keep the newest change too, so any leader completes an automatic replacement whose removal retention passed (R58; fails with replog_bug_wiped_voter)", nil},
	{3424, 1500, modeDefault, "a follower reset to its leader's log start records the leader's voter-set rows below it, so it holds a set and the cluster can elect again (R53, R55)", nil},
	{70100495, 5000, modeDefault, "a change made between an automatic replacement's two steps carries the debt to the wiped voter, which is added back (R58 owed)", nil},
	{85200210, 5000, modeDefault, "a voter set carries whom it owes a place even once retention pruned the rows that showed the removal (R58 owed)", nil},
	{85202873, 5000, modeDefault, "a voter change keeps the debts of the set in force: the leader's next set still owes a place to a wiped voter whose old incarnation was removed (R58 owed; fails with replog_bug_wiped_voter)", nil},
	{85200189, 5000, modeDefault, "a leader's voter change keeps the debt to a wiped voter that is no voter of the new set (R58 owed; fails with replog_bug_drop_owed)", nil},

	// Pipelined fetches (R70, R71).
	{1, 1500, modeDefault, "a follower fetching ahead of its durable offset is counted at its durable offset, so nothing commits that a majority does not hold durably (R70; fails with replog_bug_count_fetch_offset)", nil},

	// Snapshot transfer (R92-R95).
	{3, 5000, modeDefault, "a follower resets to its leader's log start only once the snapshot it pulls is installed, never on its last chunk (R94; fails with replog_bug_snapshot_reset_first)", installedASnapshot},
	{45, 5000, modeDefault, "a voter pulling a snapshot keeps contact with its leader through contact fetches, both ways (R92, R77; fails with replog_bug_snapshot_no_contact, and with replog_bug_snapshot_reset_first)", installedASnapshot},

	// Bootstrap (R57, R60).
	{1551, 1500, modeDefault, "a wiped sole bootstrap voter asks the members before it bootstraps and joins its cluster instead of forking a second one (R60)", nil},
	{70000336, 20000, modeDefault, "every bootstrap voter wiped: a fresh store asks the members before it bootstraps, no second cluster (R60; fails with replog_bug_no_outgoing and replog_bug_wiped_voter)", nil},
	{82044721, 1500, modeDefault, "a bootstrap round asks again those that have not answered, so seven voters and two observers elect (R57, R60)", nil},
	{82042895, 1500, modeDefault, "a cluster counts as formed only once a voter set is committed: a first set held only by an observer does not make every bootstrap voter observe for ever (R60)", nil},
	{84206751, 5000, modeDefault, "a Formed answer means a cluster exists that the asker is not part of as it is now (R60)", nil},

	// The catalog of named logs (R80-R82).
	{3212, 1500, modeAll, "a follower restarted with its log start above 0 learns the catalog though its leader, elected on a fully committed log, appends nothing (idle, quiescent): it forwards a barrier of the leader's epoch (R82; fails with replog_bug_catalog_no_barrier)", nil},

	// Ticks only at deadlines (R96).
	{100075, 1500, modeKeys, "a leader whose Ready appends after the key table's round (R68's level entry, raised once a wiped voter's removal leaves no voter without a standing report) hands out the key checkpoint it earns in that Ready, not in the next, input-less round (R96, R76; fails with replog_bug_key_checkpoint_late)", nil},

	// Quiescent idle logs (R98-R100).
	{3093, 1500, modeAll, "two voters: the follower's quiescent fetch is lost, and the leader's resync request with it, so the leader parks nothing and resigns (R27) while its node's heartbeats keep the follower quiesced on it; the follower wakes on its former leader's fetch or pre-vote and fetches again (R99, R100; fails with replog_bug_quiesce_trusts_leader)", resyncedAQuiescentLog},

	{115343, 1500, modeKeys, "a fetch of a follower's earlier life, delayed past its restart (a late message), replaces its parked quiescent fetch at the leader, which answers the parked one instead of dropping it: else the follower waits for it for ever with nothing lost (R99, R100; fails with replog_bug_quiesce_replaced_unanswered)", restartedAQuiescentLog},

	{100030, 5000, modeKeys, "a quiescent fetch taken for lost by the heartbeats' counts (a resync) that arrives late after all is counted, and must not then hide the loss of the follower's next quiescent fetch: else no resync comes and the follower misses every append (R100)", resyncedAQuiescentLog},
	{500833, 1500, modeKeys, "as 115343: a parked quiescent fetch replaced by a fetch of its follower's earlier life is answered, not dropped (R99; fails with replog_bug_quiesce_replaced_unanswered)", restartedAQuiescentLog},

	// The simulator's own judgement: runs that once failed falsely.
	{115770, 1500, modeKeys, "a quiescent fetch the network duplicated is counted once on its receiver's contact clock, as TCP delivers a frame once: counted twice, it hid the loss of the follower's next quiescent fetch from the heartbeats' counts, no resync came and the follower missed every append (R100); that fetch was quiescent though a contact answer just before showed the leader ahead (R99; the run takes other paths since, so TestDuplicatedQuiescentMessageCountedOnce and TestContactAnswerEndsQuiescence hold the checks)", resyncedAQuiescentLog},
	{130036950, 1500, modeClassic, "the cluster has not converged while its leader is paused: the stable phase must not start then", nil},
	{130063570, 1500, modeClassic, "as 130036950: convergence waits for a paused leader", nil},
	{93038914, 5000, modeDefault, "a vote grant is judged by the voter set of the round that issued it: the grant waits for its durable write, and a reset may change the set meanwhile (fails with replog_bug_wiped_voter)", nil},
	{97538327, 5000, modeDefault, "a node's messages are judged by the sets it had while they may have been built: a message waits in the core for the writes before it", nil},
}

// reproduceRow is the command line that reruns r's seed with its trace.
func reproduceRow(r regression) string {
	cmd := fmt.Sprintf("go test ./internal/simulation -run 'TestSimulation$' -sim.seed=%d -sim.steps=%d -sim.versions=false -sim.connclose=false -sim.catalog=false -sim.quiescence=false -sim.compaction=false", r.seed, r.steps)
	if r.mode == modeKeys {
		cmd = fmt.Sprintf("go test ./internal/simulation -run 'TestSimulation$' -sim.seed=%d -sim.steps=%d", r.seed, r.steps)
	} else if r.mode == modeAll {
		cmd = fmt.Sprintf("go test ./internal/simulation -run 'TestSimulation$' -sim.seed=%d -sim.steps=%d -sim.compaction=false", r.seed, r.steps)
	} else if r.mode != modeDefault {
		cmd += " -sim." + r.mode.String()
	}
	if tags := buildTags(); tags != "" {
		cmd = "go test -tags " + tags + cmd[len("go test"):]
	}
	return cmd + " -v -sim.trace"
}

// TestRegressionSeeds runs the regression table: every seed must pass, and
// still do what it was chosen for. Built with a bug toggle, the rows whose
// guards name it must fail (go test -tags replog_bug_no_outgoing
// ./internal/simulation -run TestRegressionSeeds fails).
func TestRegressionSeeds(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range regressions {
		name := fmt.Sprintf("%d_x%d", r.seed, r.steps)
		if r.mode != modeDefault {
			name += "_" + r.mode.String()
		}
		if seen[name] {
			t.Fatalf("row %s is listed twice", name)
		}
		seen[name] = true
		if r.guards == "" {
			t.Errorf("row %s does not say what it guards", name)
		}
		t.Run(name, func(t *testing.T) {
			res := Run(r.mode.options(r.seed, r.steps))
			if res.Err != nil {
				t.Fatalf("seed %d x%d %s: %v\n  guards: %s\n  reproduce: %s", r.seed, r.steps, r.mode, res.Err, r.guards, reproduceRow(r))
			}
			if r.exercised != nil {
				if miss := r.exercised(res); miss != "" {
					t.Errorf("seed %d x%d %s passes but %s: it no longer tests what it guards (%s); choose another seed", r.seed, r.steps, r.mode, miss, r.guards)
				}
			}
		})
	}
}
