//go:build replog_bug_ack_leader_write

package replica

// bugAckLeaderWrite is on: a deliberate bug for tests only (see bugs.go).
const bugAckLeaderWrite = true
