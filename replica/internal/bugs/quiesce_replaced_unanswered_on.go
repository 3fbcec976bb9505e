//go:build replog_bug_quiesce_replaced_unanswered

package bugs

// QuiesceReplacedUnanswered is on: see doc.go. Never build a binary with replog_bug_quiesce_replaced_unanswered.
const QuiesceReplacedUnanswered = true
