//go:build replog_bug_reset_no_epoch

package replica

// bugResetNoEpoch is on: a deliberate bug for tests only (see bugs.go).
const bugResetNoEpoch = true
