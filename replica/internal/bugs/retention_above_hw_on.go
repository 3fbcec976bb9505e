//go:build replog_bug_retention_above_hw

package bugs

// RetentionAboveHW is on: see doc.go. Never build a binary with replog_bug_retention_above_hw.
const RetentionAboveHW = true
