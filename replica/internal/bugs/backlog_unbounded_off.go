//go:build !replog_bug_backlog_unbounded

package bugs

// BacklogUnbounded is off, as in every normal build: see doc.go.
const BacklogUnbounded = false
