//go:build !replog_bug_quiesce_misses_log_start

package bugs

// QuiesceMissesLogStart is off, as in every normal build: see doc.go.
const QuiesceMissesLogStart = false
