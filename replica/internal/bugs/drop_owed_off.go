//go:build !replog_bug_drop_owed

package bugs

// DropOwed is off, as in every normal build: see doc.go.
const DropOwed = false
