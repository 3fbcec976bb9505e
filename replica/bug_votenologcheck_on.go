//go:build replog_bug_vote_no_logcheck

package replica

// bugVoteNoLogCheck is on: a deliberate bug for tests only (see bugs.go).
const bugVoteNoLogCheck = true
