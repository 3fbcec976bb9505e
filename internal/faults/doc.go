// Package faults holds replog's process-level fault tests, in the style of
// Jepsen: a harness that builds the example node (./example) and runs 3 or
// 5 real node processes on loopback (fsync on), a fault-injecting TCP proxy
// per directed link (every node's -peers point at proxies the harness
// controls; gossip is off so nothing bypasses them), a nemesis that kills
// (SIGKILL, then restart on the same directory), pauses (SIGSTOP/SIGCONT),
// partitions (symmetric, one-way, majority/minority, bridge) and slows
// links on a seeded random schedule, concurrent appenders and tailing
// readers over the HTTP API, a recorded history, and a checker in the
// style of Jepsen's Kafka checker (lost writes, inconsistent offsets,
// non-monotonic and uncommitted reads, duplicates, failed-but-present and
// phantom writes, real-time order, convergence).
//
// Partitions are per directed link: node A reaches B only through the
// proxy A→B, so the harness can cut any set of links. Blocking A→B refuses
// (or silently drops, Drop mode) A's connections to B and drops A's bytes on
// B's connections to A, cutting them at heal; TCP needs both directions, so
// one-way here means one-way at the message level. Gossip is off in fault
// runs: memberlist advertises one address per node to every peer, so it
// cannot be proxied per link and would bypass the partitions; static
// -peers are used instead. -faults.gossip turns it on for runs with
// process faults only.
//
// Retention (TestRetentionFaults): the nodes run with small segments and
// retention (-segment-bytes 256 KiB, -retention-bytes 1 MiB,
// -retention-age 10s), so segments roll and drop all through the run; a
// deleter POSTs /delete-before to random nodes at random offsets (inside
// the retained log, above the HW, below the log start); readers lag now
// and then, and when a node answers that their next offset is below its
// log start they resume from it (recorded as a reset); and an observer is
// wiped (data directory deleted) and restarted empty every 15s and
// whenever the schedule draws wipe-observer, so that it catches up from
// the leader's log start; voters are wiped too (the default schedule's
// wipe-voter and wipe-crash-leader), and reset to the leader's log start
// with its voter sets (R53, R55).
// The checker accepts exactly what retention explains: an
// acknowledged entry or a read below a node's final log start need not be
// on that node, and a reader may skip to the log start a node named to
// it. Everything else still holds: an acknowledged entry at or above a
// node's log start is there with the same bytes; what any reader saw at
// an acknowledged offset is that append (also where it was deleted
// since); no payload read or held is at two offsets (but after a retried
// unknown outcome), never appended, or failed; nodes agree on every
// offset they both still hold; and log starts never go down (but for a
// wiped node) nor above the LEO, nor a leader's above its HW.
//
// Membership: the wipe-voter fault SIGKILLs a voter, deletes
// its data directory and starts it again with the same ID and flags; it
// comes back as an observer at a new directory ID and the leader must
// make it a voter again on its own (remove the old incarnation, add the
// new one); the fault waits for that (the leader's committed voter set
// naming the new directory, ReplaceTimeout), so at most one voter is
// without its disk at a time, then reads the node's whole log into the
// history for the checker. The rolling-restart fault restarts every
// voter in turn with SIGTERM (a leader hands over in Close) and measures
// per restart the longest gap without an acknowledged append. A
// VoterChanges run adds a 4th node (observer o1) with /voters/add through
// a random node and removes it again, over and over, and once removes
// the leader and adds it back. Both faults are in TestFaults' schedule;
// TestWipeVoterFaults, TestRollingRestartFaults and
// TestAddRemoveVoterFaults run each on its own, and the final checks
// require every node to agree on the voter set in force, each voter at
// the directory it runs on.
//
// Exactly once: every append carries an Idempotency-Key (its
// payload's id) and is retried with it, through random nodes, until
// acknowledged; a payload at two offsets is then the violation
// "duplicate". With -faults.idempotent=false appends carry no key and are
// retried twice, and a duplicate after an unknown outcome is
// "duplicate-retried", tolerated (at-least-once). An attempt answered as
// a duplicate must name the offset where the payload is, and counts as
// invoked with its payload's first attempt for real-time order. The
// summary counts the attempts whose outcome stayed unknown, by cause: the
// node's Log gave up when the append's context expired (node-timeout)
// or closed (node-closing), the only causes the library leaves (R67); another
// unknown outcome the node answered (node-unknown); the harness's own
// deadline (client-timeout: a paused or cut-off node) and broken
// connections (connection: a killed node).
//
// TestPipelineExactlyOnce runs the exactly-once pipeline (read, append
// with an ID, commit the cursor) as a real
// process: the observer o1 runs the example with -pipeline in-=out- (it
// reads committed inputs from its cursor, appends each output with an ID
// derived from the input's offset, commits the cursor) and is SIGKILLed
// and started again about every -faults.pipeline-kill-every (400ms),
// every 4th time with the leader, while inputs are appended through the
// voters for 8s (-faults.duration); once its cursor has passed the last input,
// every node's log must hold each input once and exactly one output per
// input.
//
// Every record is self-checking (EncodePayload: id, size, filler derived
// from the id; sizes from a few bytes to ~384 KiB so fetch responses get
// split), so a corrupted or mixed-up entry shows up as an anomaly too. The
// harness also polls every node's /status (one leader per epoch, no epoch
// or HW regression) and reports node processes that exit on their own.
//
// Runs:
//
//	go test -race ./internal/faults                      # checker/proxy unit tests, a 45s fault run, a 30s
//	                                            # retention run, a 40s run of 16 logs, 20s membership
//	                                            # runs and an 8s pipeline run side by side, a fake-node
//	                                            # self-test
//	go test ./internal/faults -run TestPipelineExactlyOnce -v -faults.duration=5m -timeout 0
//	go test -race ./internal/faults -run TestFaults -v -timeout 0 \
//	    -faults.duration=10m -faults.seed=N -faults.nodes=5 [-faults.concurrency=2]
//	go test ./internal/faults -run TestRetentionFaults -v -timeout 0 -faults.duration=10m [-faults.seed=N]
//	go test ./internal/faults -run 'TestWipeVoterFaults|TestRollingRestartFaults|TestAddRemoveVoterFaults' -v \
//	    -faults.duration=5m -timeout 0    # longer membership runs
//	go test ./internal/faults -run TestFaults -v -faults.tags=replog_bug_ack_leader_write \
//	    -faults.expect=lost-write               # teeth: the run must find lost writes
//	go test ./internal/faults -run TestFailover -v -faults.failover-rounds=15 -timeout 0
//	    # fail-over figures with the default timings (leader kill, pause, isolation)
//	go test ./internal/faults -run TestNoFalseFailover -v -faults.calm=10m -timeout 0
//	    # no election in a healthy cluster under load, loss and stalls
//	    # (-faults.calm-appenders, -faults.calm-loss, -faults.calm-stall,
//	    # -faults.calm-disk-stall, -faults.calm-hog, -faults.calm-proxies;
//	    # with the hog or no loss the nodes are linked directly)
//	go test ./internal/faults -run TestDiskStallsDeposeNoOne -v -faults.disk-stalls=10m -timeout 0
//	    # the leader's disk and every node's disk stalled in turn, under load
//	    # (-faults.disk-stall-shared: how long the shared stall lasts)
//	go test ./internal/faults -run 'KVFromSnapshot|SurvivesSIGKILL' -v
//	    # the KV's state: a wiped node, a transfer and saves SIGKILLed
//	go test ./internal/faults -run TestCompactionSurvivesSIGKILL -v
//	    # SIGKILL during compaction passes (teeth:
//	    # -faults.tags=replog_bug_compact_drop_newest must fail)
//	go test ./internal/faults -run TestManyLogsUnderFaults -v -faults.manylogs-duration=10m -timeout 0
//	    # 3 nodes x 16 logs under the nemesis, checked per log (40s by
//	    # default; -faults.logs, -faults.log-appenders, -faults.log-readers)
//	go test ./internal/faults -run TestManyLogsUnderFaults -v -faults.tags=replog_bug_ack_leader_write \
//	    -faults.expect=lost-write -faults.nemesis=isolate-kill-leader,kill-leader
//	    # teeth per log: the named logs' checks must find lost writes
//
// Many logs: TestManyLogsUnderFaults runs 3 nodes with -logs 16
// (log-1..log-16 beside the default log, every node hosting all of them)
// under the whole nemesis, with at least one voter wipe, so each kill,
// pause, partition and wipe hits every log of a node at once.
// RunConfig.Logs gives each named log appenders and a tailing reader of
// its own (-faults.log-appenders, -faults.log-readers) through
// Cluster.ForLog, a view whose HTTP methods use the log's /logs/NAME/
// routes, and its own history, status samples, recovery, convergence and
// check (Report.Logs); the test fails on any anomaly in any log. Its
// positive control checks one log's history against another log's final
// logs: lost writes must be found.
//
// State on the log: the example serves package kv's key-value view on
// its default log, snapshotted every -kv-snapshot-every operations, with
// retention bounded by those snapshots (-retain-until-snapshot). The
// harness writes it (Cluster.KVWrite: puts, deletes, creates, updates at
// a revision, each key one writer's, recorded in a KVHistory), reads a
// node's whole state (Cluster.KVState, GET /kv/?all=1 after a barrier)
// and checks it (CheckKV: every key at its last acknowledged write, or
// an unknown one after it; DiffKV: the nodes alike); ClusterConfig.KVEntries
// leaves the KV's entries out of the records' history.
// TestWipedNodeRestoresKVFromSnapshot wipes a follower once retention
// moved every log start and the leader keeps a snapshot above it, under
// KV writes and the records' workload: the node gets the snapshot
// shipped (R92) and its KV reopens from it. TestSnapshotTransferSurvivesSIGKILL
// SIGKILLs a wiped follower twice in the middle of pulling a 6.5 MB
// snapshot (32 KiB chunks, slowed links; its snapshots/incoming.partial
// watched on disk). TestKVSnapshotSaveSurvivesSIGKILL SIGKILLs each voter
// in turn while the KV's snapshot save has a temporary file in its
// directory. Each ends with every node's KV state equal and explained by
// the acknowledged writes.
//
// Compaction: TestCompactionSurvivesSIGKILL runs the example with a
// compacted default log (-compact, a lag of 1s, 64 KiB segments, passes
// only on demand through POST /compact, throttled to 1 MiB/s) under KV
// writers over 48 keys, and SIGKILLs each voter in turn, 6 times, while
// a pass it was told to run is rewriting a segment (its
// replog-<base>.seg.compact in the directory): a kill counts as landed
// mid-pass when the request got no answer and the rewrite outlived the
// process. At the end every node runs a whole pass, and per node each
// key's newest acknowledged put or delete is at its offset or a later
// entry of the key is, every acknowledged create and update (no key:
// never compacted) is at its offset, no offset holds different entries
// on two nodes, and the KV states are equal and explained (CheckKV).
// Positive controls: most kills landed mid-pass; the passes removed
// entries on every node. With -faults.tags=replog_bug_compact_drop_newest
// it must fail.
//
// Disk stalls: a run that stalls disks builds the node with the tag
// DiskStallTag (replog_fault_disk_stall: the root package's
// faultstall.go, in no other build) and runs it with
// REPLOG_FAULT_DISK_STALL=200ms; Cluster.StallDisk sends SIGUSR1, and
// every store write the node starts within 200ms waits until then (a
// signal during a stall prolongs it). The node logs each stall and each
// write it held (Cluster.DiskStalls reads them: the positive control).
//
// Other flags: -faults.nemesis=kill,pause,... (a subset of AllFaults),
// -faults.gossip (memberlist on; process faults only), -faults.race (node
// built with -race), -faults.keep (keep data, node logs and history.txt),
// -faults.results=FILE (one JSON line per run), -faults.fake (run the
// harness against internal/fakenode instead of ./example; not with
// TestRetentionFaults; it ignores the key, so those runs are not
// idempotent),
// -faults.observers=N; for TestRetentionFaults
// -faults.segment-bytes, -faults.retention-bytes, -faults.retention-age,
// -faults.delete-every and -faults.wipe-every; for TestWipeVoterFaults
// -faults.wipe-voter-every. On failure the
// temp dir with every node's log and the full history is kept and named.
package faults
