//go:build replog_bug_truncate_hw

package replica

// bugTruncateToHW is on: a deliberate bug for tests only (see bugs.go).
const bugTruncateToHW = true
