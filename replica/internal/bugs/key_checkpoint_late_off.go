//go:build !replog_bug_key_checkpoint_late

package bugs

// KeyCheckpointLate is off, as in every normal build: see doc.go.
const KeyCheckpointLate = false
