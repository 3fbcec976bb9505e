//go:build replog_bug_no_outgoing

package bugs

// NoOutgoing is on: see doc.go. Never build a binary with replog_bug_no_outgoing.
const NoOutgoing = true
