//go:build replog_bug_reset_no_set

package bugs

// ResetNoSet is on: see doc.go. Never build a binary with replog_bug_reset_no_set.
const ResetNoSet = true
