//go:build !replog_bug_catalog_trusts_rebuild

package bugs

// CatalogTrustsRebuild is off, as in every normal build: see doc.go.
const CatalogTrustsRebuild = false
