//go:build !replog_bug_wiped_voter

package bugs

// IgnoreDirs is off, as in every normal build: see doc.go.
const IgnoreDirs = false
