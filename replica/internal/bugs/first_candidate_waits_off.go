//go:build !replog_bug_first_candidate_waits

package bugs

// FirstCandidateWaits is off, as in every normal build: see doc.go.
const FirstCandidateWaits = false
