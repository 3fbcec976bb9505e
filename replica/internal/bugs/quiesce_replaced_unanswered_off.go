//go:build !replog_bug_quiesce_replaced_unanswered

package bugs

// QuiesceReplacedUnanswered is off, as in every normal build: see doc.go.
const QuiesceReplacedUnanswered = false
