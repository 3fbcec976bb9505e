//go:build replog_bug_kv_update_no_revision

package kvstate

// bugUpdateNoRevision is on: see doc.go. Never build a binary with
// replog_bug_kv_update_no_revision.
const bugUpdateNoRevision = true
