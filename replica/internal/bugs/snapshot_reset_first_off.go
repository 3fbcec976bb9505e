//go:build !replog_bug_snapshot_reset_first

package bugs

// SnapshotResetFirst is off, as in every normal build: see doc.go.
const SnapshotResetFirst = false
