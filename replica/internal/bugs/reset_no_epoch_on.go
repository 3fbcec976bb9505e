//go:build replog_bug_reset_no_epoch

package bugs

// ResetNoEpoch is on: see doc.go. Never build a binary with replog_bug_reset_no_epoch.
const ResetNoEpoch = true
