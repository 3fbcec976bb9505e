//go:build !replog_bug_count_fetch_offset

package bugs

// CountFetchOffset is off, as in every normal build: see doc.go.
const CountFetchOffset = false
