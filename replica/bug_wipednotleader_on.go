//go:build replog_bug_wiped_not_leader

package replica

// bugWipedNotLeader is on: a deliberate bug for tests only (see bugs.go).
const bugWipedNotLeader = true
