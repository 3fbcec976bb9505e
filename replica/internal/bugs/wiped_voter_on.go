//go:build replog_bug_wiped_voter

package bugs

// IgnoreDirs is on: see doc.go. Never build a binary with replog_bug_wiped_voter.
const IgnoreDirs = true
