//go:build !replog_bug_vouch_request_epoch

package replica

const bugVouchRequestEpoch = false
