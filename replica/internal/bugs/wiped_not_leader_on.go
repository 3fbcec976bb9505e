//go:build replog_bug_wiped_not_leader

package bugs

// WipedNotLeader is on: see doc.go. Never build a binary with replog_bug_wiped_not_leader.
const WipedNotLeader = true
