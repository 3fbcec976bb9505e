//go:build replog_bug_deadline_ignores_parked

package bugs

// DeadlineIgnoresParked is on: see doc.go. Never build a binary with replog_bug_deadline_ignores_parked.
const DeadlineIgnoresParked = true
