//go:build !replog_bug_reset_no_epoch

package bugs

// ResetNoEpoch is off, as in every normal build: see doc.go.
const ResetNoEpoch = false
