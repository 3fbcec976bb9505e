// Package kv is a key-value view on a replog.Log, built on the log's
// public API alone: each write is an entry of the log, and every node
// that opens a KV on its Log applies the committed entries, in log order,
// to the same state. Revisions are offsets: a key's revision is the
// offset of the entry that last set it.
//
//	store, err := kv.Open(ctx, l, kv.Options{SnapshotEveryEntries: 10000})
//	if err != nil { ... }
//	defer store.Close()
//	rev, err := store.Put(ctx, "orders/42", []byte("paid"))
//	e, err := store.GetLinearizable(ctx, "orders/42")
//
// # Reads: which is which
//
// Get, Keys, History and Watch read this node's state: committed (never
// taken back), monotonic, but possibly stale, as replog.Log.Read is: a
// follower learns of commits a fetch round after the leader, a node cut
// off from its leader keeps what it had, and the KV applies a moment
// later still. A write's caller sees its own write (Put returns once it is
// applied here). GetLinearizable, or Barrier before any read, is
// linearizable: it takes a replog.Log.Barrier (a log entry and a round to
// the leader) and waits until the KV has applied up to it, so it sees
// every write acknowledged, on any node, before it was called.
//
// # Conditional writes: checked where they are applied
//
// Create (only if absent: ErrExists) and Update (only at an expected
// revision: a *RevisionMismatchError carrying the current one) are not
// checked by whoever appends them: that check would race with other
// writers. The entry is appended unconditionally, carrying what it
// expects, and the check is made when the entry is applied (etcd applies
// its transactions so). Every node applies the same committed entries in
// the same order from the same state, so every node decides each check
// alike; the caller waits until its own entry (the offset Append
// returned) is applied on its node and learns the outcome there. Of two
// Updates naming one revision, the one at the lower offset succeeds, and
// the other then finds the revision changed: two writers cannot both win,
// on any node. A failed Create or Update costs a log entry all the same,
// as a Delete of a key without a value does.
//
// # Entries and other writers
//
// An operation's entry starts with a magic and a version byte. An entry
// that does not decode (another writer's on a shared log, or of a later
// version) is skipped and counted (Stats.Skipped), never fatal.
//
// # Snapshots and retention
//
// Every Options.SnapshotEveryEntries or SnapshotEveryBytes, the KV
// streams its whole state into Log.SaveSnapshot at the offset it has
// applied; Open restores the newest one and reads on from its offset.
// With the Log's Options.RetainUntilSnapshot, retention never deletes
// past the newest snapshot, so a KV reopened on the node always rebuilds
// its state. Snapshots are per node (docs/limits.md).
//
// # Compacted logs
//
// On a Log with compaction (Options.Compaction, at feature level 10 and
// above) a Put carries its key's entry key and a Delete is a tombstone,
// so compaction keeps each key's newest unconditional write; a Create and
// an Update carry none and are never compacted, since their outcome
// depends on the state before them (docs/architecture.md R105). A KV
// replayed from a compacted log, from its snapshot or from offset 0,
// therefore holds the same keys, values and revisions as one that applied
// every entry; History lists only the revisions the log still holds. With
// conditional writes keep tombstones for ever (a negative
// Compaction.TombstoneRetention): once one goes, a Create before it would
// bring its key back in a replay.
package kv
