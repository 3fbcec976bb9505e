//go:build replog_bug_no_outgoing

package replica

// bugNoOutgoing is on: a deliberate bug for tests only (see bugs.go).
const bugNoOutgoing = true
