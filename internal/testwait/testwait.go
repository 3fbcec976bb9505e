package testwait

import (
	"bytes"
	"sync"
	"testing"
	"time"
)

// PollInterval is how long WaitFor sleeps between two calls of its
// condition: short, so that a wait ends soon after the condition holds.
const PollInterval = 10 * time.Millisecond

// WaitFor calls cond every PollInterval until it returns true. If it has
// not by timeout, WaitFor fails t with t.Fatalf, naming what was awaited
// and for how long. cond is called at least once, even with a zero
// timeout. WaitFor must be called from the test's goroutine (it may call
// Fatalf).
func WaitFor(t testing.TB, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(PollInterval)
	}
}

// Buffer is a bytes.Buffer that several goroutines may write and read at
// once (a logger's output, a child process's stderr). The zero value is
// an empty buffer ready to use.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p; it never fails.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
