//go:build replog_bug_successor_all_stand

package bugs

// SuccessorAllStand is on: see doc.go. Never build a binary with replog_bug_successor_all_stand.
const SuccessorAllStand = true
