//go:build replog_bug_drop_owed

package replica

// bugDropOwed is on: a deliberate bug for tests only (see bugs.go).
const bugDropOwed = true
