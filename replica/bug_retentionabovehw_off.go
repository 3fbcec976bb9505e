//go:build !replog_bug_retention_above_hw

package replica

// bugRetentionAboveHW is off: see bugs.go.
const bugRetentionAboveHW = false
