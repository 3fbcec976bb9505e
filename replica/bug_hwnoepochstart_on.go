//go:build replog_bug_hw_no_epoch_start

package replica

// bugHWNoEpochStart is on: a deliberate bug for tests only (see bugs.go).
const bugHWNoEpochStart = true
