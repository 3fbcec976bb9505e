//go:build !replog_bug_vote_no_logcheck

package bugs

// VoteNoLogCheck is off, as in every normal build: see doc.go.
const VoteNoLogCheck = false
