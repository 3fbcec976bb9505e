//go:build !replog_bug_quiesce_trusts_leader

package bugs

// QuiesceTrustsLeader is off, as in every normal build: see doc.go.
const QuiesceTrustsLeader = false
