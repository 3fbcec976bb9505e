//go:build replog_bug_hw_no_epoch_start

package bugs

// HWNoEpochStart is on: see doc.go. Never build a binary with replog_bug_hw_no_epoch_start.
const HWNoEpochStart = true
