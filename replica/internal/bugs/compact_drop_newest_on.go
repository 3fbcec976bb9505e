//go:build replog_bug_compact_drop_newest

package bugs

// CompactDropNewest is on: see doc.go. Never build a binary with
// replog_bug_compact_drop_newest.
const CompactDropNewest = true
