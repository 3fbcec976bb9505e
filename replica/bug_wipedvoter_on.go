//go:build replog_bug_wiped_voter

package replica

// bugIgnoreDirs is on: a deliberate bug for tests only (see bugs.go).
const bugIgnoreDirs = true
