//go:build replog_bug_fresh_bootstrap

package bugs

// FreshBootstrap is on: see doc.go. Never build a binary with replog_bug_fresh_bootstrap.
const FreshBootstrap = true
