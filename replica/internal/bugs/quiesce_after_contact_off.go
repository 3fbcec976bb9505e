//go:build !replog_bug_quiesce_after_contact

package bugs

// QuiesceAfterContact is off, as in every normal build: see doc.go.
const QuiesceAfterContact = false
