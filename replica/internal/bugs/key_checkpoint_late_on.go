//go:build replog_bug_key_checkpoint_late

package bugs

// KeyCheckpointLate is on: see doc.go. Never build a binary with replog_bug_key_checkpoint_late.
const KeyCheckpointLate = true
