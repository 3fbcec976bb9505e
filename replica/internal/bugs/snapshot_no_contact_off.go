//go:build !replog_bug_snapshot_no_contact

package bugs

// SnapshotNoContact is off, as in every normal build: see doc.go.
const SnapshotNoContact = false
