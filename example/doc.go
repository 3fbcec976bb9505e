// Command example is a small service that embeds replog the way an
// application would: each node opens a replog.Log and serves an HTTP API
// (append, with an Idempotency-Key for retries that must not duplicate;
// read; a key-value view, /kv/{key}; consumer cursors; delete before an
// offset; add and remove voters; hand the leadership over; status;
// Prometheus metrics) and a live dashboard of the replication state.
// With -pipeline FROM=TO a node also runs an exactly-once pipeline:
// committed records starting with FROM are appended again with TO
// instead, each once, however often the node is killed (an ID derived
// from the input's offset, a cursor).
//
// Without -id it runs a demo: three voters (-nodes) as child processes on
// loopback, and a spare node (-spares) that is not started until the
// dashboard's Start button: it joins as an observer, and "add voter" makes
// it a voter. A control API serves the dashboard's kill, restart and wipe
// buttons.
//
// Usage:
//
//	go run ./example                 # demo: prints three dashboard URLs
//	go run ./example -nodes 5        # demo with five voters
//	go run ./example -dir demo       # demo, data kept in ./demo for the next run
//	go run ./example -id n1 -dir D   # one node (see -help)
//
// A node of a three-node cluster:
//
//	example -id n1 -dir /var/lib/n1 -http 127.0.0.1:8081 -rpc 10.0.0.1:9001 \
//	    -voters n1,n2,n3 -peers n2=10.0.0.2:9001,n3=10.0.0.3:9001 \
//	    -secret-file /etc/replog/secret
//
// A fourth node joining such a cluster (its nodes run with -gossip): a new
// ID, the same -voters (the bootstrap set, only used to find the cluster at
// first), -join naming a running node's gossip address. It opens as an
// observer; POST /voters/add?node=n4 on any node makes it a voter:
//
//	example -id n4 -dir /var/lib/n4 -rpc 10.0.0.4:9001 -gossip 10.0.0.4:9002 \
//	    -voters n1,n2,n3 -join 10.0.0.1:9002 -secret-file /etc/replog/secret
//
// The flags, in groups (-help lists each with its default):
//
//	-id, -dir, -cluster          node ID (none: the demo), data directory, cluster ID
//	-voters, -peers, -rpc,       the cluster: voter IDs; static ID=address of the
//	-rpc-advertise               others; this node's replication address (bound, dialled)
//	-gossip, -join               memberlist discovery instead of (or besides) -peers
//	-http, -http-peers           this node's HTTP address; the other dashboards' URLs
//	-secret-file                 the cluster secret (authenticates, keys gossip)
//	-tls-cert, -tls-key, -tls-ca mutual TLS, the alternative to a secret
//	-insecure                    no peer authentication: explicit opt-out
//	-fetch-timeout,              replog's timing Options (0: replog's defaults)
//	-election-timeout,
//	-fetch-max-wait
//	-retention-bytes,            retention: replog's RetentionBytes, RetentionAge and
//	-retention-age,              SegmentBytes (sizes take KiB, MiB, GiB); off by default
//	-segment-bytes
//	-compact, -compact-lag,      a compacted default log: replog's Compaction
//	-compact-tombstones,         (Enabled, Lag, TombstoneRetention,
//	-compact-rate, -compact-every BytesPerSecond, Interval); POST /compact runs
//	                             a pass now
//	-dedup-window                replog's DedupWindow (a compaction lag is never
//	                             shorter)
//	-nosync                      no fsync: tests only, a machine crash loses appends
//	-append-timeout              how long POST /append waits for the commit
//	-delete-timeout              how long POST /delete-before waits for the log start
//	-voter-timeout               how long POST /voters/add, /voters/remove and
//	                             /leader/transfer wait
//	-manual-voter-changes        no automatic replacement of a wiped voter
//	-pipeline, -pipeline-cursor  an exactly-once pipeline FROM=TO beside the node,
//	                             and its cursor's name (demo: beside n1)
//	-logs N                      named logs log-1..log-N created at start, each
//	                             served under /logs/NAME/ (the node is a
//	                             replog.Node; demo: on every voter)
//	-nodes, -spares              the demo's voters (3) and spare nodes (1)
//	-sample-interval,            status sampling for the dashboard's replay, only
//	-sample-idle                 while a dashboard reads it (stops after -sample-idle)
//	-log-level                   trace, debug, info, warn, error, off
//	-control                     set by the demo for its children
//
// Nodes of a cluster authenticate each other with a shared secret
// (-secret-file) or mutual TLS (-tls-cert, -tls-key, -tls-ca); -insecure
// opts out, and a cluster node refuses to start with none of them. The
// demo makes a secret for each run. The HTTP API itself has no
// authentication: bind it to loopback or a private network. The flags and
// the HTTP API are described in README.md beside this file.
//
// A node prints its HTTP address as http=ADDR and writes it to
// DIR/http.addr; it stops on SIGINT or SIGTERM (HTTP first, ending
// streaming reads, then the Node and its logs). Exit status: 0 after a clean stop or
// -help, 2 for bad flags, 1 for any other failure.
//
// The package is a program, not a library: nothing imports it. The fault
// tests (package faults) build it and run it as their node process, and
// the demo reads its children's http=ADDR lines, so its flags, its HTTP
// API and that line are their interface too: change them together. It uses replog only through the root package's
// public API, and internal/nodeproc to supervise the demo's children.
// docs/architecture.md section 2 places it among the packages.
package main
