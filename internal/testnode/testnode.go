// Package testnode holds what every in-process test node of replog
// shares: the protocol timings of test clusters (fast, with room for a
// loaded machine running -race) and the logger that REPLOG_TEST_LOG turns
// on. The root package's cluster tests, internal/hostile's and replogtest
// read them here, so that one change of a timing reaches them all.
//
// It imports nothing of replog's, so that the root package's internal
// tests can use it without an import cycle.
package testnode

import (
	"os"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Protocol timings of test nodes (replog.Options' fields of these names).
// FetchTimeout keeps the ratio Options.Validate asks for:
// 2*(FetchMaxWait+ElectionTimeout) = 600ms <= 1s.
const (
	FetchMaxWait    = 100 * time.Millisecond
	FetchTimeout    = time.Second
	ElectionTimeout = 200 * time.Millisecond
)

// LogEnv is the environment variable that turns test nodes' logs on: a
// level name (e.g. debug); tests are quiet without it.
const LogEnv = "REPLOG_TEST_LOG"

// Logger returns a logger to stderr at the level LogEnv names, or nil
// (replog's null logger) when it is unset.
func Logger() hclog.Logger {
	lvl := os.Getenv(LogEnv)
	if lvl == "" {
		return nil
	}
	return hclog.New(&hclog.LoggerOptions{Level: hclog.LevelFromString(lvl), Output: os.Stderr})
}
