//go:build !replog_bug_key_ckpt_no_epoch

package bugs

// KeyCheckpointNoEpoch is off, as in every normal build: see doc.go.
const KeyCheckpointNoEpoch = false
