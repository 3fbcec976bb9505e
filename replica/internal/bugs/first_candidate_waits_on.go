//go:build replog_bug_first_candidate_waits

package bugs

// FirstCandidateWaits is on: see doc.go. Never build a binary with replog_bug_first_candidate_waits.
const FirstCandidateWaits = true
