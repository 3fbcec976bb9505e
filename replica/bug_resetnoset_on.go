//go:build replog_bug_reset_no_set

package replica

// bugResetNoSet is on: a deliberate bug for tests only (see bugs.go).
const bugResetNoSet = true
