//go:build !replog_bug_fresh_bootstrap

package replica

const bugFreshBootstrap = false
