// Package shell is the deterministic part of a replog node's shell: the
// per-round logic around the core (replica) that the root package's event
// loop and the simulation both drive, so that the simulation runs the same
// round order, proposal bookkeeping, reader wake-ups and leader claims as
// a real node (docs/architecture.md section 3, docs/testing.md): what the simulation checks is the
// node that runs, not a model of it.
//
// What it owns: a Node wraps one *replica.Replica and fixes the order of a
// round (Tick, then the round's events in arrival order, then Persisted
// with the highest durable Seq reported since, then Ready); it remembers
// the requests handed to the core (appends, read barriers, voter
// changes, transfers, cursor commits and reads, log changes) and resolves
// each exactly
// once (acked, refused, or of unknown outcome when the core halts or the
// node closes);
// it says when the readable high watermark moved (readers must be woken),
// when the catalog of named logs changed (the root reconciles its logs),
// and when the leader claim this node should gossip changed. ReadBatch is
// the reader view: which entries a reader of a store sees below the
// readable high watermark (Log.Read and the simulation's reader checks
// both use it).
//
// What it does not own: goroutines, sockets, clocks, channels and disks.
// The caller (root loop.go, or the simulation's node) collects a round's
// events, calls Round with its clock's time, and carries out the Output:
// the writes go to its writer (which reports durability back through
// Persisted), the messages to its network, the resolutions to whoever
// waits for them.
//
// Only the root package and the simulation import it (internal).
package shell
