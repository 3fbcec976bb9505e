//go:build replog_bug_ack_leader_write

package bugs

// AckLeaderWrite is on: see doc.go. Never build a binary with replog_bug_ack_leader_write.
const AckLeaderWrite = true
