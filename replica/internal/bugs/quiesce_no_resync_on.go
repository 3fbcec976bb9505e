//go:build replog_bug_quiesce_no_resync

package bugs

// QuiesceNoResync is on: see doc.go.
const QuiesceNoResync = true
