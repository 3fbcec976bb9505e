//go:build replog_bug_compact_skip_superseded

package bugs

// CompactSkipSuperseded is on: see doc.go. Never build a binary with
// replog_bug_compact_skip_superseded.
const CompactSkipSuperseded = true
