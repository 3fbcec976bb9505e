//go:build !replog_bug_drop_owed

package replica

const bugDropOwed = false
