//go:build !replog_bug_truncate_hw

package replica

// bugTruncateToHW is off: see bugs.go.
const bugTruncateToHW = false
