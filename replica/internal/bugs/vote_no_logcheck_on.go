//go:build replog_bug_vote_no_logcheck

package bugs

// VoteNoLogCheck is on: see doc.go. Never build a binary with replog_bug_vote_no_logcheck.
const VoteNoLogCheck = true
