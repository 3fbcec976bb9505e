//go:build replog_bug_fresh_bootstrap

package replica

// bugFreshBootstrap is on: a deliberate bug for tests only (see bugs.go).
const bugFreshBootstrap = true
