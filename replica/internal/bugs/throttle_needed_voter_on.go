//go:build replog_bug_throttle_needed_voter

package bugs

// ThrottleNeededVoter is on: see doc.go. Never build a binary with replog_bug_throttle_needed_voter.
const ThrottleNeededVoter = true
