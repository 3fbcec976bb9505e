//go:build !replog_bug_quiesce_no_resync

package bugs

// QuiesceNoResync is off, as in every normal build: see doc.go.
const QuiesceNoResync = false
