//go:build !replog_bug_reset_no_epoch

package replica

const bugResetNoEpoch = false
