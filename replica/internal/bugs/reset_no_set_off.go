//go:build !replog_bug_reset_no_set

package bugs

// ResetNoSet is off, as in every normal build: see doc.go.
const ResetNoSet = false
