//go:build !replog_bug_wiped_not_leader

package replica

const bugWipedNotLeader = false
