//go:build replog_bug_snapshot_any_offset

package bugs

// SnapshotAnyOffset is on: see doc.go. Never build a binary with replog_bug_snapshot_any_offset.
const SnapshotAnyOffset = true
