//go:build !replog_bug_vote_no_logcheck

package replica

// bugVoteNoLogCheck is off: see bugs.go.
const bugVoteNoLogCheck = false
