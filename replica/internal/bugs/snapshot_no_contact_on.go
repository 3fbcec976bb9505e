//go:build replog_bug_snapshot_no_contact

package bugs

// SnapshotNoContact is on: see doc.go. Never build a binary with replog_bug_snapshot_no_contact.
const SnapshotNoContact = true
