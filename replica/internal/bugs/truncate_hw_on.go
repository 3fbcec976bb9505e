//go:build replog_bug_truncate_hw

package bugs

// TruncateToHW is on: see doc.go. Never build a binary with replog_bug_truncate_hw.
const TruncateToHW = true
