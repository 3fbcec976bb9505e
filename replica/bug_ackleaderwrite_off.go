//go:build !replog_bug_ack_leader_write

package replica

// bugAckLeaderWrite is off: see bugs.go.
const bugAckLeaderWrite = false
