//go:build !replog_bug_no_outgoing

package bugs

// NoOutgoing is off, as in every normal build: see doc.go.
const NoOutgoing = false
