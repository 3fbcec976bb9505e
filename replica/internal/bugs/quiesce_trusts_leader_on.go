//go:build replog_bug_quiesce_trusts_leader

package bugs

// QuiesceTrustsLeader is on: see doc.go.
const QuiesceTrustsLeader = true
