//go:build !replog_bug_throttle_needed_voter

package bugs

// ThrottleNeededVoter is off, as in every normal build: see doc.go.
const ThrottleNeededVoter = false
