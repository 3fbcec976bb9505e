//go:build !replog_bug_hw_no_epoch_start

package replica

// bugHWNoEpochStart is off: see bugs.go.
const bugHWNoEpochStart = false
