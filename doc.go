// Package replog is an embedded replicated log for Go services: import it,
// open a Log on each node, and the nodes share one durable, totally ordered
// log. Append on any node; read committed entries on any node through an
// iterator. There is nothing else to run: no broker, no ZooKeeper, no
// controller.
//
// # Opening a log
//
// The smallest log is a single node with nothing but a directory:
//
//	l, err := replog.Open(replog.Options{Dir: "/var/lib/myservice/log"})
//	if err != nil { ... }
//	defer l.Close()
//
// A cluster names its voters and tells each node how to find the others,
// either statically (Peers: node ID → replication address) or by gossip
// (GossipAddr and Join, through hashicorp/memberlist):
//
//	l, err := replog.Open(replog.Options{
//		Dir:        "/var/lib/myservice/log",
//		NodeID:     "n1",
//		Voters:     []string{"n1", "n2", "n3"},
//		RPCAddr:    "10.0.0.1:7400",
//		GossipAddr: "10.0.0.1:7401",
//		Join:       []string{"10.0.0.2:7401", "10.0.0.3:7401"},
//		Secret:     secret, // the same 32 random bytes on every node
//	})
//
// Nodes that talk to each other must authenticate each other: with Secret
// every connection starts with a mutual challenge-response handshake and
// gossip is encrypted with a key derived from it; mutual TLS
// (Options.TLS, with TLSVerifyNodeID to bind certificates to node IDs)
// works too. Open refuses a networked node with neither, unless
// Options.Insecure says so. The secret authenticates; only TLS encrypts
// the replication traffic.
//
// The directory records the cluster and node it was created for: Open
// refuses another node's directory (ErrIdentityMismatch), and one whose
// data file vanished (ErrCorrupt) rather than starting an empty node that
// would vote as if it had its log.
//
// A node whose ID is not among the Voters is an observer: it keeps a full
// copy and serves reads, but never votes and never counts for commits.
//
// # Many logs per node
//
// A Node hosts many named logs on one transport, gossip member and commit
// journal (OpenNode; docs/logs.md). Which logs exist is replicated state
// of its default log (Node.Default, the log Open opens): CreateLog and
// DeleteLog work on any node, every node opens the logs it is a replica
// of, and each named log is a *Log with everything a Log offers:
//
//	node, err := replog.OpenNode(opts)
//	if err != nil { ... }
//	defer node.Close()
//	orders, err := node.CreateLog(ctx, "orders", replog.LogOptions{})
//
// # Appending
//
// Append returns once the entry is committed: written durably (fsync) by a
// majority of voters. The returned offset is final: every reader on every
// node sees the entry at that offset, forever.
//
//	off, err := l.Append(ctx, []byte("hello"))
//
// If Append fails with ErrUnknownOutcome the entry may or may not be in the
// log (the leader changed, or ctx ended, while it was in flight); make
// records idempotent or carry an ID if retries must not duplicate.
//
// # Reading
//
// Read iterates committed entries, then waits for more until ctx ends:
//
//	for e, err := range l.Read(ctx, 0) {
//		if err != nil { break } // ctx ended, or the log closed
//		fmt.Println(e.Offset, string(e.Data))
//	}
//
// Offsets increase but have gaps: the log also holds control entries (a
// new leader's epoch start, barriers) that readers never see. Resume from
// the last offset you got + 1; never count entries to compute one.
//
// Readers see only entries below the high watermark (HW): entries a
// majority holds. That is the seed of this project: Kafka's rule for when
// the log end offset (LEO) and the HW move. A follower learns the HW one
// fetch round after the leader; an entry below a node's HW is never taken
// back.
//
// # Which reads are linearizable
//
// A plain Read is committed (it never shows an entry that could be taken
// back) and monotonic (an entry seen stays, at its offset), but it may be
// stale: a follower learns of commits a fetch round after its leader, and
// a node cut off from its leader keeps serving what it had. Barrier closes
// the gap: a Read that starts after Barrier returned on a node sees every
// append acknowledged, on any node, before Barrier was called
// (read-your-writes across nodes; etcd's ReadIndex, hashicorp/raft's
// Barrier). Barrier costs one append of a control entry.
//
//	if err := l.Barrier(ctx); err != nil { ... }
//	for e, err := range l.Read(ctx, from) { ... }
//
// A reader that must not wait silently on a node cut off from its leader
// reads with a context from WithRequireLeader: it then fails with an error
// wrapping ErrNoLeader after a bounded time without a leader.
//
// # Readiness and events
//
// WaitReady returns once the node knows a leader and has caught up with
// it: call it after Open instead of polling Status. Watch yields the
// node's role, leader, epoch and voters whenever they change. Status
// reports the role as a Role (RoleLeader, RoleFollower, ...), names no
// leader while the node knows none, and says RoleClosed after Close.
//
// # Asynchronous appends
//
// Append waits for its commit, so throughput needs many goroutines.
// AppendAsync returns at once with an *AppendResult whose outcome (the
// offset, or what Append would have returned) arrives later: one
// goroutine can keep thousands of appends in flight, and the node commits
// what is in flight together.
//
// # How it works
//
// Replication is pulled, as in Kafka: each follower fetches from the leader
// and its fetch carries its LEO; the leader records it (the remote LEO) and
// moves the HW to the largest offset a majority of voters holds. Leader
// epochs (Kafka's KIP-101 and KIP-279) decide what a follower truncates
// after a failure, never its HW. Leaders are elected by the voters as in
// KRaft, with pre-votes so that a node coming back from a partition does not
// depose a healthy leader. The protocol core (package replica) is a
// deterministic state machine, tested by simulation; storage is a bbolt
// file per node (package storage); nodes talk over TCP, optionally TLS
// (package transport), and discover each other by gossip (package
// membership).
package replog
