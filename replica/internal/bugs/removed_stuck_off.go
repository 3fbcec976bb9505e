//go:build !replog_bug_removed_stuck

package bugs

// NoRemovedRestand is off, as in every normal build: see doc.go.
const NoRemovedRestand = false
