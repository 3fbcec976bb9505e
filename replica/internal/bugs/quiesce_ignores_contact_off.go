//go:build !replog_bug_quiesce_ignores_contact

package bugs

// QuiesceIgnoresContact is off, as in every normal build: see doc.go.
const QuiesceIgnoresContact = false
