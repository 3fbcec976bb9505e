package testwait

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeTB records a Fatalf and ends the goroutine, as testing.T does.
type fakeTB struct {
	testing.TB
	fatal string
}

func (f *fakeTB) Helper() {}

func (f *fakeTB) Fatalf(format string, args ...any) {
	f.fatal = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// waitForOn runs WaitFor on a fake TB in a goroutine of its own (Fatalf
// ends it) and returns the failure message, "" if none.
func waitForOn(what string, timeout time.Duration, cond func() bool) string {
	tb := &fakeTB{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		WaitFor(tb, what, timeout, cond)
	}()
	<-done
	return tb.fatal
}

// A condition that comes true after a few polls ends the wait without a
// failure, and is not called again after it held.
func TestWaitForReturnsOnceTheConditionHolds(t *testing.T) {
	var calls atomic.Int32
	msg := waitForOn("the third call", time.Minute, func() bool { return calls.Add(1) == 3 })
	if msg != "" {
		t.Fatalf("WaitFor failed: %s", msg)
	}
	if n := calls.Load(); n != 3 {
		t.Errorf("cond called %d times, want 3 (polled until true, then not again)", n)
	}
}

// A condition that never holds fails the test with a message naming what
// was awaited and the timeout.
func TestWaitForFailsNamingWhatAndHowLong(t *testing.T) {
	var calls atomic.Int32
	msg := waitForOn("the moon to turn blue", 30*time.Millisecond, func() bool { calls.Add(1); return false })
	for _, want := range []string{"the moon to turn blue", "30ms"} {
		if !strings.Contains(msg, want) {
			t.Errorf("failure message %q does not name %q", msg, want)
		}
	}
	if calls.Load() < 2 {
		t.Errorf("cond called %d times before giving up, want it polled", calls.Load())
	}
}

// With a zero timeout the condition is still asked once: a condition that
// already holds passes.
func TestWaitForAsksAtLeastOnce(t *testing.T) {
	if msg := waitForOn("something already true", 0, func() bool { return true }); msg != "" {
		t.Errorf("WaitFor failed on a condition that held: %s", msg)
	}
}

// Concurrent writers and readers (run with -race): every write lands
// whole.
func TestBufferConcurrentWrites(t *testing.T) {
	var b Buffer
	const writers, lines = 8, 200
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range lines {
				fmt.Fprintf(&b, "writer %d line %d\n", w, i)
				_ = b.String() // a reader while others write
			}
		})
	}
	wg.Wait()
	got := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(got) != writers*lines {
		t.Fatalf("%d lines, want %d", len(got), writers*lines)
	}
	seen := map[string]bool{}
	for _, l := range got {
		seen[l] = true
	}
	for w := range writers {
		for i := range lines {
			if l := fmt.Sprintf("writer %d line %d", w, i); !seen[l] {
				t.Fatalf("line %q missing or torn", l)
			}
		}
	}
}
