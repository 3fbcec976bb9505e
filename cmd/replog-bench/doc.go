// Command replog-bench measures replog's append throughput and commit
// latency: it starts a cluster of N nodes in this process, talking over
// loopback TCP with fsync on, runs C concurrent appenders of S-byte records
// against the leader for D, and prints ops/s, MB/s, commit latency
// percentiles, each node's data-directory size (sampled during the run)
// and the process's peak RSS. Its catch-up mode times an empty replica
// catching up with a filled log.
//
// Usage:
//
//	go run ./cmd/replog-bench -nodes 3 -clients 64 -size 128 -duration 10s
//	go run ./cmd/replog-bench -nodes 3 -clients 64 -size 128 -duration 10m \
//		-retention-bytes 256MiB -segment-bytes 16MiB
//	go run ./cmd/replog-bench -nodes 3 -clients 64 -size 128 -duration 30s \
//		-catchup 1000000
//
// Flags:
//
//	-nodes N         voters in the cluster (default 3; 1 runs a single node
//	                 without a transport, except with -catchup)
//	-clients C       concurrent appenders, each waiting for its commit
//	                 before the next append (default 1; 0 only with
//	                 -catchup: the catch-up without a load)
//	-async N         each appender keeps N appends in flight with
//	                 AppendAsync instead of waiting for each (default 0:
//	                 synchronous Append); latency is then from the call to
//	                 when the appender took the outcome
//	-size S          record size in bytes (default 128)
//	-duration D      how long to append (default 10s); with -catchup, the
//	                 load before the replica starts
//	-via leader|all  where appenders send: the leader (default), or every
//	                 node in turn, so followers forward
//	-dir DIR         data directory, one subdirectory per node (default: a
//	                 temporary one, removed at the end)
//	-nosync          no fsync: measures the code, not the disk (not what
//	                 production does)
//	-cpuprofile F    write a CPU profile of the run to F
//	-trace F         write an execution trace of the run to F (go tool
//	                 trace: scheduler latency, syscalls, goroutines)
//	-memprofile F    write a heap profile to F (go tool pprof
//	                 -sample_index=inuse_space): with -idle-logs once the
//	                 idle logs are open and settled, after a collection;
//	                 otherwise at the end of the run
//	-retention-bytes B  Options.RetentionBytes of every node, e.g. 256MiB
//	                 (KiB, MiB, GiB; default 0: keep everything)
//	-retention-age D Options.RetentionAge of every node (default 0: off)
//	-segment-bytes B Options.SegmentBytes of every node, e.g. 16MiB
//	                 (default 0: the store's 64 MiB)
//	-disk-every D    how often to measure each node's data directory
//	                 (default 2s)
//	-id              give every append its own ID (replog.WithID), as a
//	                 client deduplicating its retries would (default off)
//	-no-idempotence  Options.DisableIdempotence: appends carry no producer
//	                 key and are not retried after an unknown outcome, to
//	                 measure what idempotence costs (default off)
//	-catchup N       catch-up mode: fill the log with N records, run the
//	                 load for -duration, then start an empty observer under
//	                 the same load and wait until its readable HW reaches
//	                 the leader's readable HW at its start (default 0: off);
//	                 it then prints the leader's replication-quota counters
//	-catchup-rate B  Options.CatchUpBytesPerSecond of every node, e.g.
//	                 64MiB, or off (default 0: the leader's 32 MiB/s)
//	-max-uncommitted B
//	                 Options.MaxUncommittedBytes of every node, e.g. 16MiB,
//	                 or off (default 0: 64 MiB)
//
// State-on-the-log modes (docs/operations.md, Benchmarking, has their
// result lines):
//
//	-kv-clients N    package kv on the leader's log, N clients, each
//	                 operation for -duration: Put, Get (local) and
//	                 GetLinearizable (a barrier first); ops/s, p50, p99
//	-kv-keys K       the keys they use, at random (default 1000); values
//	                 of -size bytes
//	-snapshot-mb S   a snapshot of S MiB saved on the leader, the log
//	                 deleted below it, an empty observer started: the
//	                 save's rate, the time until the observer installed
//	                 the shipped snapshot and its MB/s, the time until it
//	                 caught up
//
// Many-logs modes, each on -nodes replog.Nodes with named logs of 3
// replicas (docs/operations.md, Benchmarking, has their result lines):
//
//	-logs N          N named logs, -clients appenders on each at once;
//	                 prints the totals as the one-log run does (-logs 64
//	                 -clients 4 against -clients 256), then per node its
//	                 shared journal's rounds, the logs' batches per round,
//	                 and the logs' checkpoints, their time and journal
//	                 waits over the load
//	-idle-logs N     N idle named logs against one, each measured for
//	                 -duration: process CPU / nodes, fetches/s and
//	                 heartbeats/s per peer pair, heap and RSS per idle log
//	-create-logs N   time N CreateLogs one after another on one node, and
//	                 from each call until the node knows the log's leader
//	-create-concurrency G
//	                 G goroutines create the logs at once, each taking the
//	                 next name (default 1: one after another): what
//	                 -create-logs times, and how the other modes set up
//	                 their logs (-restart-logs 1000 -create-concurrency 32)
//	-restart-logs N  restart the last node with N logs: time until every
//	                 log it holds accepts an append through it, and
//	                 until the leaders are within ±1 of even (R107)
//	-failover-logs N kill the node leading the most of N logs (links cut,
//	                 those towards it first, no handover): time until
//	                 each has a leader again; the elections and epochs
//	                 each took (1: no split vote), when its first
//	                 voter stood, how many the successor won (R106)
//
// The nodes authenticate each other with a random secret, as production
// nodes would (the handshake is part of what a new connection costs), on
// addresses picked on 127.0.0.1 up front. Output:
//
//	nodes=3 clients=64 async=0 size=128B fsync=true via=leader duration=… idempotence=true ids=false
//	floor: 4KiB write+fdatasync p50 …, loopback round trip p50 …, sum …
//	retention-bytes=… retention-age=… segment-bytes=… disk-every=…
//	appends=… failed=… ops/s=… MB/s=… over …
//	latency p50=… p99=… max=…
//	cpu/append=…µs allocs/append=… B/append=… (process CPU … over the load: … cores; … GCs)
//	disk samples=… bound=… (retention-bytes + 2 segments)
//	disk n1 max=… final=… du-max=… du-final=… files-max=… log-start=… held=…
//	…
//	disk bound held=…
//	peak RSS=…
//
// The floor line (with fsync on) is what a 1-client commit cannot beat
// on this machine, measured in the run's directory before the load: a
// 4 KiB write and fdatasync of a preallocated file (the commit journal's
// write on the follower) plus a loopback round trip (the fetch answer and
// the next fetch), each the median of 200. Latency is from Append's call to its return (the commit: a majority
// fsynced); max is the worst append of the run; failed counts appends that
// returned an error before the end. cpu/append is the process's CPU time
// (user and system: every node's, and the clients') over the load divided
// by the appends committed (allocs/append and B/append: the heap
// allocations over the load, objects and bytes, per append; GCs the
// collections over the load), and cores that CPU time over the load's
// duration: on a machine the run has to itself CPU per append is what
// bounds ops/s once cores reaches the machine's cores. On a busy machine
// it rises too (fewer entries per round, more scheduler work: about 4x at
// a load average of 10 on 2 cores), so compare it, and allocs/append,
// between runs made at the same load. The disk lines give, per node, the
// largest and the final size of its data directory over the samples (one
// at the start, one every -disk-every, one after the load): max and final
// add up the files' sizes (as ls, and Log.Stats' StorageBytes), du-max and
// du-final their allocated blocks (as du; bbolt grows a file by
// truncating it, so its tail may be a hole). With -retention-bytes, held
// says whether max stayed within retention-bytes + 2 segments, what
// Options.RetentionBytes promises (one sealed segment more than the bound,
// plus the active one). Samples are taken every -disk-every, so a peak
// between two may be missed, and the leader applies retention once a
// second: a node writing more than a segment a second can exceed the
// bound between its checks.
//
// In the catch-up mode the load lines appear twice, prefixed "before
// catch-up: " (the -duration load before the observer starts) and "during
// catch-up: " (the same load from the observer's Open until it caught up),
// around two lines of its own:
//
//	fill records=N in …: … records/s … MB/s
//	catch-up obs: entries=… (offsets … to …) in …: … entries/s … MB/s of records; its directory … (… MB/s)
//
// The fill appends N records with AppendBatch (4 callers, about 1 MiB a
// batch). The catch-up time runs from the observer's Open (an empty
// directory, nothing wiped) to its readable HW reaching the leader's
// readable HW at that moment; entries are the offsets it holds then
// (from the leader's log start: with retention it resets to it), MB/s
// counts the records' bytes. The disk lines include the observer.
//
// The exit status is 2 for an unknown flag or a bad value, and 1 if the
// cluster did not start, elected no leader within 30s, committed nothing,
// or the observer did not catch up within 10 minutes.
//
// Numbers depend on the machine and its disk: compare runs made in one
// sitting on one machine: -clients 64 and 256 before and after a change
// to the append path; -clients 1 -async N against -clients 256 for
// asynchronous appends; 10-minute runs with and without -retention-bytes,
// and the append p99 before and during a catch-up, for retention). The command uses only
// replog's public API (and storage.DefaultSegmentBytes for the bound,
// internal/tcplink for the fail-over mode's kill); nothing imports it. docs/architecture.md section 4 describes the write path
// it measures.
package main
