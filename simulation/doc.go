// Package simulation holds replog's deterministic cluster simulator: whole
// clusters of nodes, each the protocol core (replica.Replica) in the real
// shell's round (internal/shell.Node, the type the root's loop drives: the
// same order of Tick, Step, Persisted and Ready, the same proposal
// outcomes and reader wake-ups, readers reading through shell.ReadBatch),
// driven single-threaded by a
// discrete-event scheduler in simulated time, over a simulated network
// (network.go: delays, drops, duplicates, reordering, partitions, delivery
// across restarts) and simulated disks (disk.go: random write latency,
// crashes that lose what was not yet durable, failing writes, torn writes,
// nodes without fsync), with a workload of appends and reads (workload.go)
// and of retention requests (retention.go: deletions below offsets around
// a node's HW, on any node), a nemesis (nemesis.go: crashes, pauses,
// partitions, clock jumps and stalls, lulls; retention.go: nodes lagging
// while their leader deletes, observers restarted on an empty store),
// gossip hints true, stale and false (gossip.go), and an
// invariant checker run after every event (checker.go for safety,
// liveness.go for liveness while faults run).
//
// One *rand.Rand seeded from Options.Seed drives every choice, including
// the cores' own randomness (issue 9's faults draw from a second stream
// seeded from it too), so a seed names one exact run: the same seed always
// produces the same trace (see Result.Hash). A failure reports its seed;
// rerunning that seed reproduces it.
//
// Running it:
//
//	go test -race ./simulation                      # CI: 250 seeds x 5000 steps
//	go test ./simulation -run TestSimulation -sim.seed=N -v [-sim.trace]
//	go test ./simulation -run TestSimulation -sim.seeds=100000 -sim.start=1000000 -sim.stats
//	go test -tags replog_bug_vote_no_logcheck ./simulation -run TestSimulation -sim.seeds=3000
//
// Flags: -sim.seeds, -sim.steps, -sim.seed, -sim.start, -sim.trace,
// -sim.maxfail (stop after this many failing seeds), -sim.workers,
// -sim.safetyonly (check consequences only, not protocol rules),
// -sim.stable=false (skip the final false-hint stability phase),
// -sim.classic (only the faults of before issue 9, drawn from the same
// random stream), -sim.live=false (no liveness rules), -sim.corecontact
// (liveness counts leader contact as the core did at a2e649b), -sim.stats
// (print the totals of issues 9's and 11's fault kinds; -v prints them
// too).
//
// A run: 1–7 voters and 0–2 observers; faults (crashes that lose unsynced
// writes, some leaving torn writes, power cuts, failing writes, NoSync
// nodes losing their page cache, restarts, stalls, clock jumps and stalls,
// partitions symmetric and one-way, message drops, duplicates, delays and
// reordering, delivery to a restarted receiver, clock drift, stale and
// false membership hints) for the first 70% of the steps, in some runs in
// storms separated by lulls; then a fault-free workload; then no workload
// until the cluster converges (one leader, every replica with the same log
// and HW), which must happen within a bound of simulated time; then
// (Options.Stable) false "leader failed" gossip hints, which must not
// depose the healthy leader. All along, the liveness rules of liveness.go
// hold: a leader every voter follows within a bound of the last fault, no
// leader that a majority reaches deposed, no follower leaving a leader
// that answers it.
package simulation
