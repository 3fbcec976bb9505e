//go:build !replog_bug_wiped_voter

package replica

const bugIgnoreDirs = false
