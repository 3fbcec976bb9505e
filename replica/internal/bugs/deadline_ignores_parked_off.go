//go:build !replog_bug_deadline_ignores_parked

package bugs

// DeadlineIgnoresParked is off, as in every normal build: see doc.go.
const DeadlineIgnoresParked = false
