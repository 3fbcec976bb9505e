//go:build replog_bug_no_contact_fetch

package bugs

// NoContactFetch is on: see doc.go. Never build a binary with replog_bug_no_contact_fetch.
const NoContactFetch = true
