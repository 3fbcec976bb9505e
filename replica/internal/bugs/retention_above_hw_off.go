//go:build !replog_bug_retention_above_hw

package bugs

// RetentionAboveHW is off, as in every normal build: see doc.go.
const RetentionAboveHW = false
