//go:build replog_bug_peer_down_prevote

package bugs

// PeerDownSkipsPreVote is on: see doc.go. Never build a binary with replog_bug_peer_down_prevote.
const PeerDownSkipsPreVote = true
