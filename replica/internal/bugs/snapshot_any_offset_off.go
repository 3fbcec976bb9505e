//go:build !replog_bug_snapshot_any_offset

package bugs

// SnapshotAnyOffset is off, as in every normal build: see doc.go.
const SnapshotAnyOffset = false
