//go:build !replog_bug_no_outgoing

package replica

const bugNoOutgoing = false
