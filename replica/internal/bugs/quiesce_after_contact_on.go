//go:build replog_bug_quiesce_after_contact

package bugs

// QuiesceAfterContact is on: see doc.go. Never build a binary with replog_bug_quiesce_after_contact.
const QuiesceAfterContact = true
