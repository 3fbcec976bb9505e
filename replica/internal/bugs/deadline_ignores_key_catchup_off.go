//go:build !replog_bug_deadline_ignores_key_catchup

package bugs

// DeadlineIgnoresKeyCatchUp is off, as in every normal build: see doc.go.
const DeadlineIgnoresKeyCatchUp = false
