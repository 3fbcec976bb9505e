// Command replog-bench measures replog's append throughput and commit
// latency: it starts a cluster of N nodes in this process, talking over
// loopback TCP with fsync on, runs C concurrent appenders of S-byte records
// against the leader for D, and prints ops/s, MB/s, commit latency
// percentiles and the process's peak RSS.
//
// Usage:
//
//	go run ./cmd/replog-bench -nodes 3 -clients 64 -size 128 -duration 10s
//
// Flags:
//
//	-nodes N         voters in the cluster (default 3; 1 runs a single node
//	                 without a transport)
//	-clients C       concurrent appenders, each waiting for its commit
//	                 before the next append (default 1)
//	-async N         each appender keeps N appends in flight with
//	                 AppendAsync instead of waiting for each (default 0:
//	                 synchronous Append); latency is then from the call to
//	                 when the appender took the outcome
//	-size S          record size in bytes (default 128)
//	-duration D      how long to append (default 10s)
//	-via leader|all  where appenders send: the leader (default), or every
//	                 node in turn, so followers forward
//	-dir DIR         data directory, one subdirectory per node (default: a
//	                 temporary one, removed at the end)
//	-nosync          no fsync: measures the code, not the disk (not what
//	                 production does)
//	-cpuprofile F    write a CPU profile of the run to F
//
// The nodes authenticate each other with a random secret, as production
// nodes would (the handshake is part of what a new connection costs), on
// addresses picked on 127.0.0.1 up front. Output, four lines:
//
//	nodes=3 clients=64 async=0 size=128B fsync=true via=leader duration=…
//	appends=… failed=… ops/s=… MB/s=…
//	latency p50=… p99=… max=…
//	peak RSS=…
//
// Latency is from Append's call to its return (the commit: a majority
// fsynced); failed counts appends that returned an error before the end.
// The exit status is 2 for an unknown flag, and 1 for a bad value or if
// the cluster did not start, elected no leader within 30s or committed
// nothing.
//
// Numbers depend on the machine and its disk: compare runs made in one
// sitting on one machine (issue 10 asks for -clients 64 and 256, before and
// after a change; issue 14 compares -clients 1 -async N with -clients 256). The command uses only replog's public API; nothing
// imports it. docs/design.md section 5.4 describes the write path it
// measures.
package main
