//go:build !replog_bug_catalog_committed_only

package bugs

// CatalogCommittedOnly is off, as in every normal build: see doc.go.
const CatalogCommittedOnly = false
