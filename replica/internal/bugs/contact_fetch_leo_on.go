//go:build replog_bug_contact_fetch_leo

package bugs

// ContactFetchLEO is on: see doc.go. Never build a binary with replog_bug_contact_fetch_leo.
const ContactFetchLEO = true
