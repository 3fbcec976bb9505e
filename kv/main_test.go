package kv_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/replog-io/replog"
	"github.com/replog-io/replog/kv"
)

// TestMain fails the package if a test leaves a goroutine behind: Close
// (and the Log's closing) must end the KV's apply loop.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testCtx is a context for one test's operations, ended with it.
func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// quiet is the KV's logger in tests.
var quiet = slog.New(slog.DiscardHandler)

// openLog opens a single-node log in dir, ready for writes.
func openLog(t *testing.T, dir string, retain bool) *replog.Log {
	t.Helper()
	l, err := replog.Open(replog.Options{Dir: dir, NoSync: true, RetainUntilSnapshot: retain})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.WaitReady(testCtx(t)); err != nil {
		l.Close()
		t.Fatal(err)
	}
	return l
}

// openKV opens a KV on l and closes it at the test's end.
func openKV(t *testing.T, l *replog.Log, o kv.Options) *kv.KV {
	t.Helper()
	if o.Logger == nil {
		o.Logger = quiet
	}
	s, err := kv.Open(testCtx(t), l, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// single is a KV on a fresh single-node log, both closed at the end.
func single(t *testing.T, o kv.Options) (*replog.Log, *kv.KV) {
	t.Helper()
	l := openLog(t, t.TempDir(), false)
	t.Cleanup(func() { l.Close() })
	return l, openKV(t, l, o)
}
