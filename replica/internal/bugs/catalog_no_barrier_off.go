//go:build !replog_bug_catalog_no_barrier

package bugs

// CatalogNoBarrier is off, as in every normal build: see doc.go.
const CatalogNoBarrier = false
