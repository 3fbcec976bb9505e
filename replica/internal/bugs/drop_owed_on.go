//go:build replog_bug_drop_owed

package bugs

// DropOwed is on: see doc.go. Never build a binary with replog_bug_drop_owed.
const DropOwed = true
