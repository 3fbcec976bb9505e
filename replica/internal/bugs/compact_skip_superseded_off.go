//go:build !replog_bug_compact_skip_superseded

package bugs

// CompactSkipSuperseded is off, as in every normal build: see doc.go.
const CompactSkipSuperseded = false
