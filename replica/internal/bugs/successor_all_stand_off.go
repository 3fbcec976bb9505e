//go:build !replog_bug_successor_all_stand

package bugs

// SuccessorAllStand is off, as in every normal build: see doc.go.
const SuccessorAllStand = false
