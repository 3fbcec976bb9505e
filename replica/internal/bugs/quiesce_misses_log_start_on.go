//go:build replog_bug_quiesce_misses_log_start

package bugs

// QuiesceMissesLogStart is on: see doc.go. Never build a binary with replog_bug_quiesce_misses_log_start.
const QuiesceMissesLogStart = true
