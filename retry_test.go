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
// leader, and Append must not say it was not appended (R67). Positive
// control: tries that all saw no leader end with the NotLeaderError. A
// later error of another kind after an unknown outcome is reported as
// unknown too. The policy is the one Append uses (appendPolicy), on a
// producer's append.
func TestRetryUntilKnown(t *testing.T) {
	l := &Log{}
	retryWith := func(ctx context.Context, closing chan struct{}, errs ...error) error {
		r := &request{prod: newProducer()}
		pol := l.appendPolicy(ctx, r)
		i := 0
		_, err := retry(ctx, closing, &pol, func() (uint64, error) {
			e := errs[min(i, len(errs)-1)]
			i++
			return 0, e
		})
		return err
	}
	run := func(errs ...error) error {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		return retryWith(ctx, make(chan struct{}), errs...)
	}
	var nl *NotLeaderError
	if err := run(ErrUnknownOutcome, &NotLeaderError{}); !errors.Is(err, ErrUnknownOutcome) || !errors.Is(err, context.DeadlineExceeded) || errors.As(err, &nl) {
		t.Fatalf("unknown, then no leader until ctx ends: %v; want ErrUnknownOutcome wrapping the deadline, no NotLeaderError", err)
	}
	if err := run(&NotLeaderError{}); !errors.As(err, &nl) || errors.Is(err, ErrUnknownOutcome) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("no leader on every try: %v; want the NotLeaderError wrapping the deadline (positive control)", err)
	}
	if err := run(ErrUnknownOutcome, ErrTooLarge); !errors.Is(err, ErrUnknownOutcome) || !errors.Is(err, ErrTooLarge) {
		t.Fatalf("unknown, then another error: %v; want ErrUnknownOutcome wrapping it", err)
	}
	if err := run(ErrUnknownOutcome, ErrDuplicate); !errors.Is(err, ErrDuplicate) || errors.Is(err, ErrUnknownOutcome) {
		t.Fatalf("unknown, then a duplicate ID: %v; want ErrDuplicate alone (a known outcome)", err)
	}
	closing := make(chan struct{})
	close(closing)
	if err := retryWith(context.Background(), closing, ErrUnknownOutcome); !errors.Is(err, ErrUnknownOutcome) || !errors.Is(err, ErrClosed) {
		t.Fatalf("unknown, then Close: %v; want ErrUnknownOutcome wrapping ErrClosed", err)
	}
	if err := retryWith(context.Background(), closing, &NotLeaderError{}); err != ErrClosed {
		t.Fatalf("no leader, then Close: %v; want ErrClosed alone (positive control)", err)
	}
}

// TestRetryBackoff: the wait between tries doubles from retryFirst up to
// the policy's cap (retryMax unless it sets one), the same for every call.
func TestRetryBackoff(t *testing.T) {
	for _, maxWait := range []time.Duration{0, voterChangeRetry} {
		var tr tries
		var got []time.Duration
		for range 8 {
			if end, _, _ := tr.after(again, 0, &NotLeaderError{}, maxWait); end {
				t.Fatal("again ended the call")
			}
			got = append(got, tr.backoff)
		}
		limit := maxWait
		if limit == 0 {
			limit = retryMax
		}
		want := retryFirst
		for i, d := range got {
			if d != want {
				t.Fatalf("cap %v: wait %d is %v, want %v (all: %v)", limit, i, d, want, got)
			}
			want = min(2*want, limit)
		}
		if got[len(got)-1] != limit {
			t.Fatalf("cap %v: waits %v never reach it", limit, got)
		}
	}
}

// TestAsyncTriesFollowR67: AppendAsync's retries in the loop keep the same
// state as Append's: after an unknown try, a later "not the leader" and
// then the end of ctx or a Close report ErrUnknownOutcome.
func TestAsyncTriesFollowR67(t *testing.T) {
	var tr tries
	tr.after(againUnknown, 0, ErrUnknownOutcome, 0)
	tr.after(again, 0, &NotLeaderError{}, 0)
	var nl *NotLeaderError
	if err := tr.ctxEnded(&asyncPolicy, context.Canceled); !errors.Is(err, ErrUnknownOutcome) || errors.As(err, &nl) {
		t.Fatalf("ctx end after unknown, then no leader: %v; want ErrUnknownOutcome, no NotLeaderError", err)
	}
	if err := tr.stopped(&asyncPolicy, ErrClosed); !errors.Is(err, ErrUnknownOutcome) || !errors.Is(err, ErrClosed) {
		t.Fatalf("Close after unknown: %v; want ErrUnknownOutcome wrapping ErrClosed", err)
	}
	var fresh tries
	fresh.after(again, 0, &NotLeaderError{}, 0)
	if err := fresh.ctxEnded(&asyncPolicy, context.Canceled); !errors.As(err, &nl) || errors.Is(err, ErrUnknownOutcome) {
		t.Fatalf("ctx end after no leader only: %v; want the NotLeaderError (positive control)", err)
	}
}
