// Package simulation holds replog's deterministic cluster simulator. It
// runs whole clusters of nodes, each the protocol core (replica.Replica)
// in the real shell's round (internal/shell.Node, the type the root
// package's loop drives: the same order of Tick, Step, Persisted and
// Ready, the same proposal outcomes and reader wake-ups, readers reading
// through shell.ReadBatch), single-threaded, under a discrete-event
// scheduler in simulated time. Nothing in a run reads a real clock, starts
// a goroutine or does I/O. A node runs a round as the loop does (R97,
// deadline.go): when an input reaches it, and when the deadline its last
// round returned (Output.Deadline, R96) passes on its clock, up to a
// millisecond or three late; it has no timer of its own.
//
// # Determinism
//
// One *rand.Rand seeded from Options.Seed drives every choice, including
// the cores' own randomness. The extended faults, retention, voter
// changes, read barriers, the catalog workload, the snapshot workload,
// the compaction workload and the exactly-once workload each draw from a
// stream of their own seeded from the same seed, so that turning one of
// them off (Options.Classic, NoVoterChanges) leaves the others' draws as
// they were. A seed therefore names one exact run: the same seed and
// options always give the same trace, summed up by Result.Hash (an FNV
// hash of every event, message, write, acknowledgement and their times,
// trace.go). A failure reports its seed and the command that reruns it;
// a rerun that does not fail the same way is reported as
// NONDETERMINISTIC, a bug of the simulator or of the node code.
//
// Node code must not depend on map iteration order either: where the
// core builds output from a map (a leader's copies of live keys above the
// log start, R66) it sorts it first. TestDeterminism and
// testdata/trace_hashes.txt hold exactly-once seeds whose leaders make
// such copies.
//
// # What a run simulates
//
// A run has 1–7 voters and 0–2 observers (at least one in runs with voter
// changes, to add). Its phases: faults and workload for the first 70% of
// the steps (in some runs in storms separated by lulls), then the
// workload without faults, then no workload until the cluster converges
// (one leader, every replica with the same log and HW, no voter change
// unanswered), which must happen within a bound of simulated time; then
// (Options.Stable) false "leader failed" gossip hints, which must not
// depose the healthy leader.
//
// Workload (workload.go, barrier.go, catalog.go, exactlyonce.go): appends
// of 1..n records and reads on random live nodes; read barriers (R50); in
// half the non-classic runs creates and deletes of three log names in the
// catalog (R80–R82), keyed and retried with their key; in
// exactly-once runs (Options.ExactlyOnce, R61–R67) keyed appends retried
// with their key after unknown outcomes, caller IDs reused within and
// past the deduplication window; retention requests at offsets around a
// node's HW, on any node (retention.go, R51–R53); voter changes proposed
// on random nodes, and in a quarter of the runs ManualVoterChanges on
// every node with the workload healing wiped voters itself (voters.go,
// R55–R58); in a third of the non-classic runs the version mix
// (versions.go, R68): nodes of two releases, one supporting feature level
// 8 (pipelined fetches, the previous release) and one 9 (named logs)
// (replica.Config.SupportedFeatureLevel), upgrades and rollbacks as
// restarts among the faults (a rollback refused once a level above 8 was
// written), in some runs every node holding the level at 8 until its hold
// is released, and a node halted at a level it cannot run at rolled
// forward; snapshots (snapshot.go, R87, R88, R92–R95): every node's
// service keeps a state of the committed records (a count and a running
// hash), restored from its newest snapshot at start and read on; in
// three non-classic runs of four random nodes (the leader half the
// time) save it as a snapshot, in some of those with retention bounded
// by each node's newest snapshot (RetainUntilSnapshot), and every core
// ships snapshots (Config.ShipSnapshots: ServeSnapshot and
// ReceiveSnapshotChunk on an in-memory store whose unsynced partial a
// crash cuts or damages); in half the non-classic runs (compaction.go,
// kvsim.go, R102-R105, R90; not with ExactlyOnce), once the cluster is
// at level 10, appends with entry keys from a small key space,
// tombstones and KV operations
// (Put as a keyed entry, Delete as a tombstone, and in most of those runs
// Create and Update naming the revision the proposing node's service
// holds or a stale one, encoded as the kv package does through
// internal/kvstate), and compaction passes on random live nodes at random
// times through replica.CompactionPlan and storage.Memory.Compact (the
// Dir's pass on the memory store), with a lag and a tombstone retention
// chosen per run, the rewrite a disk delay after the plan so that a crash
// between leaves the range as it was; every node's service also keeps the
// KV's state, applied through kvstate.State.Apply and saved and restored
// in its snapshots; a message of a named log never crosses to or from a node of
// the previous release (its wire version, R79), though the simulation
// runs no named logs yet, so what the mix exercises is the level's
// negotiation. In and outside the mix the cluster reaches level 8 or
// above, where followers fetch while their entry writes are still on the
// simulated disk (R71), and a crash loses those writes.
//
// Fault kinds. The basic ones, in every run: crashes that lose what was
// not yet durable, restarts, pauses, partitions symmetric and one-way,
// message drops, duplicates, delays and reordering, clock drift, true
// and stale membership hints (network.go, nemesis.go, gossip.go). The
// extended ones, off in classic runs (Options.Classic): lulls, clock
// jumps and stalls, failing writes, torn writes, NoSync nodes losing
// their page cache, messages delivered across a restart to the
// receiver's next incarnation, false leader hints, clusters of 6 or 7
// voters (nemesis.go, disk.go, network.go, gossip.go); nodes lagging
// while their leader deletes, observers restarted on an empty store
// (retention.go); receivers crashed in the middle of a snapshot transfer
// and failed chunk writes (snapshot.go); voters restarted on an empty store with a new
// directory ID, "v1.d0" then "v1.d1" (voters.go, which argues how many
// voters may lose their disks, and when). Closed connections (R69,
// peerdown.go): a crashed process's links close, so every live node hears
// PeerDown a network delay later (a power cut's, a pause's and a
// partition's links only go quiet), and the nemesis resets the link
// between two live nodes now and then, a fault on both. FaultCounts (stats.go) counts
// each kind; a default sweep of 500 seeds or more fails if any kind was
// never injected, and one of 250 or more (CI's) if no compaction pass
// removed an entry, no reader passed a hole, or no KV conditional write
// both succeeded and failed.
//
// # Invariants
//
// Checked after every event (checker.go has the full list): no two
// replicas hold different entries below their HWs; a newly committed
// entry is durable on a majority of the voter set in force, each voter at
// the directory the set records; one leader per epoch, holding every
// entry committed before its epoch; a leader's HW moves only onto an
// entry of its own epoch; HW and ReadableHW never move back; a vote is
// durable before it is sent, one grant per epoch per disk; appends are
// contiguous and epochs never decrease along a log; acknowledgements are
// declared only for committed records at the acked offsets, ErrNotLeader
// only when nothing was appended; readers get exactly the committed
// entries; no record is committed at two offsets, and every ack of a
// keyed append names the same offset; the voter sets obey R55–R60 (one
// uncommitted change at a time, majorities counted against the set in
// force, a wiped incarnation never counted as its old self, debts of the
// automatic replacement carried until paid); log starts never move back
// and nothing at or above the HW is deleted (retention.go); committed
// feature levels never go down, no node runs above its release or passes
// a committed level it cannot run at without halting, and a leader raises
// the level only within its release and hold, after every other voter
// told it within FetchTimeout that it supports the level (versions.go);
// a round without inputs before a node's deadline (an early tick, at
// random, deadline.go) does nothing: an empty Output, the same Status and
// deadline (R96); a node's rounds without inputs do not leave its
// deadline due more than three times in a row while doing nothing (it
// would spin its loop; a round that writes, resolves or changes
// its Status made progress, one that only sends did not);
// the committed log's log changes never create a held name or delete an
// unheld one, a copy repeats the committed catalog's entry, every node's
// known catalog is the committed log's as of the readable HW it is
// published for, and a leader writes a log change only at level 9
// (catalog.go); every node's service state at an offset is the state the
// committed log below it makes, whether replayed or restored from a
// snapshot, no body is installed that no node saved at its offset and
// tag, no reset comes before the install of the snapshot it waits for
// or after one below it, and under RetainUntilSnapshot no leader deletes
// past the newest snapshot any node held (snapshot.go); a compaction pass
// removes only a committed keyed data entry that a later committed entry
// of its key below the pass's point supersedes, or a tombstone past its
// retention: never a key's newest value, a control entry or an entry
// without a key; a placeholder in a store or a follower's write stands
// for an entry some pass removed, of its epoch, so per offset a replica
// holds the committed entry or a hole; readers see every other committed
// entry at its offset (compaction.go); the committed log's replay of the
// KV decides every Create and Update as the checker's own model of
// revisions says (an Update succeeds only against the revision it
// names), every node decides each alike, and a node's KV state is the
// replay's at its offset whenever no hole it passed over left a key's
// state unknown (kvsim.go); after convergence every store holds exactly
// the committed log, holes only where passes removed entries. While faults
// run, three liveness rules hold (liveness.go): a leader every voter
// follows within a bound of the last fault, no leader that a majority
// reaches deposed, no follower leaving a leader that answers it.
// Options.SafetyOnly keeps only the consequence checks (lost or changed
// entries), to show that a broken rule is caught by what it breaks.
//
// The checker has teeth: sabotage options (ForgeVotes, ForgePreVotes,
// LyingDisk, DropAnswers) must make it fail (TestCheckerHasTeeth,
// TestCheckerCatchesLyingDisk, TestLivenessHasTeeth), and the core built
// with a deliberate bug (-tags replog_bug_*, the replica package's bug
// toggles) must fail the regression seeds that guard its rule.
//
// # Tests and flags
//
//	go test -race ./internal/simulation       # CI: TestSimulation's 250 seeds x 5000 steps, and the rest
//	go test ./internal/simulation -run TestSimulation -sim.seed=N -sim.steps=S -v [-sim.trace]
//	go test ./internal/simulation -run TestSimulation -sim.seeds=100000 -sim.start=1000000 -sim.steps=1500 -sim.stats
//	go test ./internal/simulation -run TestRegressionSeeds -v
//	go test ./internal/simulation -run TestTraceHashes -sim.hashes=/tmp/h -sim.hashes.write -sim.seeds=2000 -sim.steps=1500
//	go test -tags replog_bug_wiped_voter ./internal/simulation -run 'TestRegressionSeeds/^(55|120|3726)_' # must fail
//
// TestRegressionSeeds (regress_test.go) runs one table of seeds that
// failed once, each with its length, its options and the rule or failure
// it guards; a seed a sweep finds failing goes there once fixed.
// TestTraceHashes checks that the runs of testdata/trace_hashes.txt keep
// their hashes (a refactoring must not change behaviour; a change of
// behaviour rewrites the file on purpose). TestDeterminism runs seeds
// twice, plain and exactly-once, and compares the hashes.
//
// Flags: -sim.seeds (number of seeds, from -sim.start), -sim.steps
// (workload steps per seed; the convergence phase comes on top),
// -sim.seed (run only this seed), -sim.trace (print its trace),
// -sim.maxfail (stop after this many failing seeds), -sim.workers
// (parallel seeds), -sim.stats (print the fault and liveness totals; -v
// prints them too); options of the runs: -sim.safetyonly, -sim.stable=false
// (no final false-hint phase), -sim.classic (basic faults only),
// -sim.live=false (no liveness rules), -sim.corecontact (liveness counts
// leader contact the narrower way, Options.CoreContact),
// -sim.voters=false (no voter changes or wipes), -sim.versions=false (no
// version mix, Options.NoVersionMix), -sim.connclose=false (no closed
// connections, Options.NoConnClose), -sim.catalog=false (no catalog
// workload, Options.NoCatalog), -sim.compaction=false (no entry keys,
// compaction or KV, Options.NoCompaction), -sim.load (tight load bounds,
// Options.TightLoad: quota waits and backlog refusals), -sim.exactlyonce (the
// exactly-once workload; -sim.eoseeds is how many seeds
// TestSimulationExactlyOnce runs), -sim.bugs (stop steering around known
// core bugs, below); -sim.hashes and -sim.hashes.write (TestTraceHashes'
// file, and writing it instead of checking it).
//
// # Reproducing a seed
//
// A failing seed prints its reproduce line: the seed, its steps, the
// options that differ from the defaults and any build tags, e.g.
//
//	go test ./internal/simulation -run TestSimulation -sim.seed=19702 -sim.steps=1500 -v -sim.trace
//
// -sim.trace prints every event, message, write and outcome with its
// simulated time; the failure itself prints the last 80 lines. The run is
// the same at every rerun, on any machine, with or without -race or the
// trace. Once the bug is fixed, add the seed to TestRegressionSeeds'
// table with one line on what it guards.
//
// # Known core bugs
//
// A core bug the simulation finds and that is not fixed at once may be
// steered around by default, so that the default run passes: a field of
// KnownBugs says how, and -sim.bugs=NAME (or all) stops steering, so
// that runs fail where it bites. None is open now; -sim.bugs accepts
// the names of fixed ones and changes nothing.
package simulation
