//go:build replog_bug_deadline_ignores_key_catchup

package bugs

// DeadlineIgnoresKeyCatchUp is on: see doc.go. Never build a binary with replog_bug_deadline_ignores_key_catchup.
const DeadlineIgnoresKeyCatchUp = true
