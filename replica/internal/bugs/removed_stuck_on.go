//go:build replog_bug_removed_stuck

package bugs

// NoRemovedRestand is on: see doc.go. Never build a binary with replog_bug_removed_stuck.
const NoRemovedRestand = true
