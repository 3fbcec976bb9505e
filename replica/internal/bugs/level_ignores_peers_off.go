//go:build !replog_bug_level_ignores_peers

package bugs

// LevelIgnoresPeers is off, as in every normal build: see doc.go.
const LevelIgnoresPeers = false
