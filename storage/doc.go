// Package storage holds replog's log store: the durable, ordered sequence of
// entries a replica keeps, its leader-epoch map (Kafka's leader-epoch
// checkpoint) and its durable quorum state (the vote).
//
// Two implementations share one contract (see the tests): [DirStore], the
// store: a node's data directory of bbolt segment files ([OpenDir]; read
// by tools with [OpenDirReadOnly]), and [Memory], an in-memory store for
// tests and the deterministic simulation, which can also simulate a crash.
//
// Every change is a protocol.Write, and a store's one write method,
// [Store.Apply], takes a batch of them and applies it in order as one
// atomic, durable transaction (for [DirStore]: one bbolt commit of the
// active segment file, two fsyncs, whatever the batch holds; with
// DirOptions.Journal, one record written to the commit journal and one
// fdatasync, the segments taking the journal's writes in the background).
// The protocol
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
//   - replog.db ([DataFileName]): the active segment, the only file
//     written: a bbolt file with buckets "entries" (8-byte big-endian
//     offset → entry record with its CRC), "epochs" (epoch → start
//     offset), "voters" (offset of a voters entry → its voter set, the
//     rows VoterSets returns), "quorum" (the vote), "meta" (format, log
//     start, HW checkpoint, identity, the segment's base offset) and
//     "segments" (the sealed segments' ranges).
//   - replog-<base>.seg: the sealed segments, entries from offset base (20
//     digits), rolled at DirOptions.SegmentBytes, read-only, opened when
//     a read first needs them, unlinked whole by retention.
//   - replog.db.next, the next active file: made ahead of a roll once the
//     active one is half full, and during it (removed at Close, or at open
//     after a crash).
//   - replog.identity.tmp, only briefly (or after a crash, then ignored).
//   - replog.format ([FormatFileName]): the directory's storage format
//     (1: the files above; 2: with the journal; 3: on a shared journal),
//     replaced atomically. A
//     directory without it (written before formats were recorded) is
//     format 1 and is stamped at its first read-write open; a format
//     newer than [MaxStorageFormat] is refused with [ErrNewerFormat].
//   - replog.journal ([JournalFileName], format 2 only): the commit
//     journal, a preallocated ring of checksummed records, each one
//     Apply; checkpoints move its writes into the segments, then cut it.
//     Open replays what the segments do not hold yet; a torn last record
//     is cut, a damaged one before it is ErrCorrupt naming the file and
//     the offset.
//   - replog.journal-ref ([JournalRefFileName], format 3 only): which
//     shared journal ([OpenJournal], outside the directory, written by
//     several stores with one fdatasync per round) holds the directory's
//     latest writes, and its log ID there; the directory opens only with
//     it (DirOptions.SharedJournal), else [ErrSharedJournal].
//
// A store holds a lock on the directory for as long as it is open: a
// second OpenDir, or OpenDirReadOnly, fails with ErrLocked.
//
// Damage never takes the process down: [OpenDir] verifies each segment
// file's structure before bbolt touches it (a sealed segment when first
// read; the active segment's pages that opening reads at open, and the
// rest in a goroutine the store runs from Open until the walk ends or
// Close, while writes and reads wait for the pages they need:
// [DirStore.WaitVerified]), and returns an error wrapping
// [ErrCorrupt] naming the file and what is wrong (damage found after Open
// fails every later Apply, and the reads of the damaged entries); every
// entry read verifies the entry's CRC.
//
// # Who may use it
//
// storage imports protocol (entries, epoch rows, quorum state, writes) and
// bbolt, nothing else of replog's. The node's shell (the root replog
// package) is its one production user: it opens the directory with
// OpenDir, its writer is the only caller of Apply, and its readers call
// Entries. The protocol core does not import it: it reads through its own
// read-only interface (replica.LogReader, which every Store satisfies) and
// says what to write as protocol.Writes, which the shell hands to Apply
// exactly, in order. The simulation and the tests use Memory; storagetest
// is the contract suite every Store must pass.
//
// # Concurrency and ownership
//
// DirStore and Memory are safe for concurrent use. Memory starts no
// goroutine; a read-write DirStore runs one from Open to Close
// for the file work its appends must not wait for (the next active file
// made ahead of a roll, a prefix deletion's files closed and unlinked
// after its Apply), and one that verifies the active file after Open
// until it ends, and with the journal a checkpointer; Close stops them
// (the checkpointer after a last checkpoint).
// Apply calls are serialized (a second waits for the first); on DirStore
// one returns once its transaction is durable (a deferred Memory makes it
// durable only at the next Sync). Readers run alongside and see each
// Apply wholly or not at all. LEO, LogStart, LastEpoch, EpochMap,
// EndOffsetForEpoch, VoterSets, QuorumState and HWCheckpoint answer from
// memory; Entries runs a short read transaction and never waits for Apply.
// Every slice a store returns, and the Data of every returned entry, is a copy
// the caller owns. Apply does not keep the slices it is given, but the
// caller must not modify them while Apply runs. Close waits for the Apply
// in progress and releases the files and the directory's lock; OpenDir
// blocks up to DirOptions.Timeout for that lock.
//
// # Errors
//
// Errors wrap the sentinels of this package, with the offset, file, write
// index or field they concern: test them with errors.Is. ErrInvalidAppend,
// ErrOutOfRange and ErrInvalidWrite refuse an Apply whole (nothing is
// written); a failed commit latches, and every later Apply returns it
// until the store is reopened. ErrCorrupt names damaged data (an entry
// whose CRC fails, a damaged or missing file), ErrIdentityMismatch a
// directory of another cluster or node, ErrLocked a directory another store
// holds, ErrInvalidOptions a bad DirOptions field, ErrClosed a closed
// store. Each method's documentation (see Store) lists its own.
//
// See docs/storage.md (the bbolt layout, writes and reads; section 9: the
// directory's identity and damaged files; section 10: storage formats and
// the commit journal) and docs/architecture.md
// section 3 (the writer's group commit).
package storage
