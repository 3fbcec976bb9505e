//go:build replog_bug_snapshot_reset_first

package bugs

// SnapshotResetFirst is on: see doc.go. Never build a binary with replog_bug_snapshot_reset_first.
const SnapshotResetFirst = true
