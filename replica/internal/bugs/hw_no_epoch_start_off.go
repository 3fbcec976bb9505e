//go:build !replog_bug_hw_no_epoch_start

package bugs

// HWNoEpochStart is off, as in every normal build: see doc.go.
const HWNoEpochStart = false
