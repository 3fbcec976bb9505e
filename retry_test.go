package replog

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestRetryUntilKnown: once a try's outcome was unknown, the append may be
// in the log whatever later tries see, so the end of ctx (or Close) reports
// ErrUnknownOutcome, never the last try's NotLeaderError ("not appended"):
// a forwarded append was committed, its node was then cut off and saw no
// leader, and Append said it was not appended (fault run
// TestAddRemoveVoterFaults seed 422844). Positive control: tries that all
// saw no leader end with the NotLeaderError. A later error of another kind
// after an unknown outcome is reported as unknown too.
func TestRetryUntilKnown(t *testing.T) {
	run := func(errs ...error) error {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		i := 0
		_, err := retryUntilKnown(ctx, make(chan struct{}), func() (uint64, error) {
			e := errs[min(i, len(errs)-1)]
			i++
			return 0, e
		}, func() bool { return true }, func() {})
		return err
	}
	var nl *NotLeaderError
	if err := run(ErrUnknownOutcome, &NotLeaderError{}); !errors.Is(err, ErrUnknownOutcome) || !errors.Is(err, context.DeadlineExceeded) || errors.As(err, &nl) {
		t.Fatalf("unknown, then no leader until ctx ends: %v; want ErrUnknownOutcome wrapping the deadline, no NotLeaderError", err)
	}
	if err := run(&NotLeaderError{}); !errors.As(err, &nl) || errors.Is(err, ErrUnknownOutcome) {
		t.Fatalf("no leader on every try: %v; want the NotLeaderError (positive control)", err)
	}
	if err := run(ErrUnknownOutcome, ErrTooLarge); !errors.Is(err, ErrUnknownOutcome) || !errors.Is(err, ErrTooLarge) {
		t.Fatalf("unknown, then another error: %v; want ErrUnknownOutcome wrapping it", err)
	}
	closing := make(chan struct{})
	close(closing)
	_, err := retryUntilKnown(context.Background(), closing, func() (uint64, error) { return 0, ErrUnknownOutcome },
		func() bool { return true }, func() {})
	if !errors.Is(err, ErrUnknownOutcome) || !errors.Is(err, ErrClosed) {
		t.Fatalf("unknown, then Close: %v; want ErrUnknownOutcome wrapping ErrClosed", err)
	}
}
