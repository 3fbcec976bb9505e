//go:build !replog_bug_kv_update_no_revision

package kvstate

// bugUpdateNoRevision is off: see doc.go.
const bugUpdateNoRevision = false
