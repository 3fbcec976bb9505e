//go:build replog_bug_key_ckpt_no_epoch

package bugs

// KeyCheckpointNoEpoch is on: see doc.go. Never build a binary with replog_bug_key_ckpt_no_epoch.
const KeyCheckpointNoEpoch = true
