//go:build !replog_bug_peer_down_prevote

package bugs

// PeerDownSkipsPreVote is off, as in every normal build: see doc.go.
const PeerDownSkipsPreVote = false
