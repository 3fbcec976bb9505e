//go:build !replog_bug_reset_no_set

package replica

const bugResetNoSet = false
