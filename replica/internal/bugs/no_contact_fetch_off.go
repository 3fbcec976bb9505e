//go:build !replog_bug_no_contact_fetch

package bugs

// NoContactFetch is off, as in every normal build: see doc.go.
const NoContactFetch = false
