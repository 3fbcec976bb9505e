//go:build replog_bug_catalog_no_barrier

package bugs

// CatalogNoBarrier is on: see doc.go. Never build a binary with replog_bug_catalog_no_barrier.
const CatalogNoBarrier = true
