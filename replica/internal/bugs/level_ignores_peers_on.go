//go:build replog_bug_level_ignores_peers

package bugs

// LevelIgnoresPeers is on: see doc.go. Never build a binary with
// replog_bug_level_ignores_peers.
const LevelIgnoresPeers = true
