//go:build !replog_bug_removed_stuck

package replica

const bugNoRemovedRestand = false
