//go:build !replog_bug_vouch_request_epoch

package bugs

// VouchRequestEpoch is off, as in every normal build: see doc.go.
const VouchRequestEpoch = false
