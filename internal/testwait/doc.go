// Package testwait holds what replog's tests use to wait for work done by
// other goroutines or processes: WaitFor, which polls a condition until it
// holds or a deadline passes, and Buffer, a goroutine-safe sink for logs
// and child-process output that a test reads while writers are still
// running.
//
// It imports nothing of replog's, so that every package's tests, including
// the root package's internal ones, can use it without an import cycle.
package testwait
