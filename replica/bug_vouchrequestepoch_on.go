//go:build replog_bug_vouch_request_epoch

package replica

// bugVouchRequestEpoch is on: a deliberate bug for tests only (see bugs.go).
const bugVouchRequestEpoch = true
