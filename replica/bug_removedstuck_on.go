//go:build replog_bug_removed_stuck

package replica

// bugNoRemovedRestand is on: a deliberate bug for tests only (see bugs.go).
const bugNoRemovedRestand = true
