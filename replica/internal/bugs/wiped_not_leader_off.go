//go:build !replog_bug_wiped_not_leader

package bugs

// WipedNotLeader is off, as in every normal build: see doc.go.
const WipedNotLeader = false
