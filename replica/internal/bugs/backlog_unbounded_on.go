//go:build replog_bug_backlog_unbounded

package bugs

// BacklogUnbounded is on: see doc.go. Never build a binary with replog_bug_backlog_unbounded.
const BacklogUnbounded = true
