//go:build replog_bug_vouch_request_epoch

package bugs

// VouchRequestEpoch is on: see doc.go. Never build a binary with replog_bug_vouch_request_epoch.
const VouchRequestEpoch = true
