//go:build !replog_bug_ack_leader_write

package bugs

// AckLeaderWrite is off, as in every normal build: see doc.go.
const AckLeaderWrite = false
