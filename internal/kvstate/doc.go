// Package kvstate holds the key-value view's state machine: the encoding
// of its operations on the log and the one definition of what applying a
// committed entry does to the state (docs/architecture.md R90, R91,
// R105). It is pure: no I/O, clock, goroutine or lock; the kv package's
// apply loop calls State.Apply for every committed entry, and so does the
// simulation's service, so that what the simulation checks (every node
// decides every conditional write alike; an Update succeeds only against
// the revision it names; a replay of a compacted log reaches the same
// state) is what the KV runs.
//
// A deliberate bug for tests: built with -tags
// replog_bug_kv_update_no_revision, Update sets the key whatever its
// revision (R90 broken: two writers naming one revision both win). kv's
// TestConditionalWrites and the simulation's KV checks (TestSimulation)
// must fail with it.
package kvstate
