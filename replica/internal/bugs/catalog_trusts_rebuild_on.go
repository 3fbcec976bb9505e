//go:build replog_bug_catalog_trusts_rebuild

package bugs

// CatalogTrustsRebuild is on: see doc.go. Never build a binary with replog_bug_catalog_trusts_rebuild.
const CatalogTrustsRebuild = true
