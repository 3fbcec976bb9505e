//go:build replog_bug_quiesce_ignores_contact

package bugs

// QuiesceIgnoresContact is on: see doc.go.
const QuiesceIgnoresContact = true
