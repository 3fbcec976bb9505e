//go:build !replog_bug_contact_fetch_leo

package bugs

// ContactFetchLEO is off, as in every normal build: see doc.go.
const ContactFetchLEO = false
