//go:build !replog_bug_compact_drop_newest

package bugs

// CompactDropNewest is off, as in every normal build: see doc.go.
const CompactDropNewest = false
