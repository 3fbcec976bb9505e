//go:build !replog_bug_truncate_hw

package bugs

// TruncateToHW is off, as in every normal build: see doc.go.
const TruncateToHW = false
