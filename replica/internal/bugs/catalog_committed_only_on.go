//go:build replog_bug_catalog_committed_only

package bugs

// CatalogCommittedOnly is on: see doc.go. Never build a binary with replog_bug_catalog_committed_only.
const CatalogCommittedOnly = true
