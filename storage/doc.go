// Package storage holds replog's log store: the durable, ordered sequence of
// entries a replica keeps, its leader-epoch map (Kafka's leader-epoch
// checkpoint) and its durable quorum state (the vote).
//
// Two implementations share one contract (see the tests): [Bolt], backed by
// a single bbolt file, and [Memory], an in-memory store for tests and the
// deterministic simulation, which can also simulate a crash.
//
// Every change is a protocol.Write, and a store's one write method,
// [Store.Apply], takes a batch of them and applies it in order as one
// atomic, durable transaction (for [Bolt]: one bbolt commit). The protocol
// core issues the writes; the node's writer hands the store everything
// queued in one Apply (group commit). Readers (the public iterator, the
// fetch path) may read concurrently with Apply.
//
// # Data directory
//
// A node's data directory is owned by this package: [OpenDir] creates,
// checks and opens it, and nothing else (in replog or outside it) may
// create, change or delete its files while a node may open it. It holds:
//
//   - replog.identity ([IdentityFileName]): a few lines of text, written
//     once at creation (and again when the creation completes) through a
//     synced temporary file renamed into place: a header and format
//     version, the cluster ID, the node ID, a random directory ID (32 hex
//     digits), the state of the creation ("creating" until the data file
//     is complete, then "ready"), and a CRC-32C of all of it. It lets a
//     node refuse a directory of another node or cluster, and lets the
//     cluster tell a node whose disk was wiped (a new directory ID) from
//     its old self.
//   - replog.db ([DataFileName]): the bbolt file of [Bolt]: buckets
//     "entries" (8-byte big-endian offset → entry record with its CRC),
//     "epochs" (epoch → start offset), "quorum" (the vote), "meta" (format,
//     log start, HW checkpoint). bbolt's lock on it excludes a second
//     process for as long as the store is open.
//   - replog.identity.tmp, only briefly (or after a crash, then ignored).
//
// Damage never takes the process down: [OpenBolt] and [OpenDir] verify the
// bbolt file's structure before bbolt maps it, and return an error
// wrapping [ErrCorrupt] naming the file and what is wrong; every entry read
// verifies the entry's CRC.
package storage
