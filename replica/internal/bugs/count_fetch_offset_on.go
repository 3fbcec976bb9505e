//go:build replog_bug_count_fetch_offset

package bugs

// CountFetchOffset is on: see doc.go. Never build a binary with replog_bug_count_fetch_offset.
const CountFetchOffset = true
