//go:build replog_bug_retention_above_hw

package replica

// bugRetentionAboveHW is on: a deliberate bug for tests only (see bugs.go).
const bugRetentionAboveHW = true
