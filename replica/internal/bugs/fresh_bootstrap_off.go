//go:build !replog_bug_fresh_bootstrap

package bugs

// FreshBootstrap is off, as in every normal build: see doc.go.
const FreshBootstrap = false
