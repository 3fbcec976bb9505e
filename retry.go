package replog

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// The wait between tries of a call the leader could not take yet (no
// leader known, a leader change, a voter change refused for now): it
// doubles from retryFirst up to retryMax (docs/protocol.md R39), so an
// election is noticed within a few ms and a long one costs at most ten
// tries a second.
const (
	retryFirst = 5 * time.Millisecond
	retryMax   = 100 * time.Millisecond
)

// verdict is what a retry policy makes of one try that failed.
type verdict uint8

const (
	// fail: the call ends with this try's error. If an earlier try's
	// outcome was unknown, the call's outcome is unknown too: it may have
	// taken effect whatever this try saw (R67).
	fail verdict = iota + 1
	// settle: the call ends with this try's answer, which is known
	// whatever earlier tries did (a duplicate ID, a removal already done).
	settle
	// again: this try did nothing (no leader took it, or the leader
	// refused it for now): try again after the backoff.
	again
	// againUnknown: this try may have taken effect (its outcome is
	// unknown): try again after the backoff, with the same key where the
	// request has one (R63). From now on the call's end is unknown unless
	// a try settles it.
	againUnknown
)

// retryPolicy is what one kind of call makes of its tries (see retry). The
// backoff, the ends by ctx and by Close, and the unknown-outcome rule
// (R67) are retry's and tries', the same for every call.
type retryPolicy struct {
	// judge classifies a try that failed with err (offset off): the
	// verdict, and the offset and error to end with (fail, settle) or to
	// remember as the last refusal (again, againUnknown). unknown says
	// whether an earlier try's outcome was unknown.
	judge func(off uint64, err error, unknown bool) (verdict, uint64, error)
	// ended is the call's error when ctx ends between tries while no try's
	// outcome was unknown; last is the last try's error (nil: none yet).
	ended func(last, ctxErr error) error
	// settled, if set, says whether a call whose outcome was unknown is
	// known to have taken effect after all when ctx ends (then it ends
	// with nil).
	settled func() bool
	// unknown, if set, is the call's error when it ends by cause (ctx.Err()
	// or ErrClosed) after a try of unknown outcome, for a call that names
	// itself in its errors; it must wrap ErrUnknownOutcome and cause. Nil:
	// unknownEnd.
	unknown func(cause error) error
	// maxWait caps the backoff (0: retryMax).
	maxWait time.Duration
	// prepare readies the next try (nil: nothing to do).
	prepare func()
}

// tries is one call's state across its tries: the wait before the next
// one, whether some try's outcome was unknown, and the last refusal.
// AppendAsync keeps one per handle, for the loop's retries (async.go).
type tries struct {
	backoff time.Duration
	unknown bool
	last    error
}

// after records one try's verdict and reports whether the call ends, with
// what; if it does not, t.backoff is the wait before the next try.
func (t *tries) after(v verdict, off uint64, err error, maxWait time.Duration) (bool, uint64, error) {
	switch v {
	case settle:
		return true, off, err
	case fail:
		if t.unknown && err != nil && !errors.Is(err, ErrUnknownOutcome) {
			return true, 0, fmt.Errorf("%w: %w", ErrUnknownOutcome, err)
		}
		return true, off, err
	case againUnknown:
		t.unknown = true
	}
	t.last = err
	if maxWait <= 0 {
		maxWait = retryMax
	}
	if t.backoff == 0 {
		t.backoff = retryFirst
	} else {
		t.backoff = min(2*t.backoff, maxWait)
	}
	return false, 0, nil
}

// ctxEnded is the call's error when its ctx ends between tries.
func (t *tries) ctxEnded(pol *retryPolicy, ctxErr error) error {
	if !t.unknown {
		return pol.ended(t.last, ctxErr)
	}
	if pol.settled != nil && pol.settled() {
		return nil
	}
	return t.unknownEnd(pol, ctxErr)
}

// stopped is the call's error when the Log closes (cause ErrClosed) or
// stops serving (its failure) between tries.
func (t *tries) stopped(pol *retryPolicy, cause error) error {
	if t.unknown {
		return t.unknownEnd(pol, cause)
	}
	return cause
}

// unknownEnd is the end, by cause, of a call some try of which had an
// unknown outcome: the outcome stays unknown (R67), never the last try's
// "not the leader", which means "not appended" (a forwarded append that
// committed, whose node was then cut off and saw no leader, must not be
// reported as not appended).
func (t *tries) unknownEnd(pol *retryPolicy, cause error) error {
	if pol.unknown != nil {
		return pol.unknown(cause)
	}
	return fmt.Errorf("%w: %w", ErrUnknownOutcome, cause)
}

// retry runs try until pol's verdict ends the call, ctx ends or closing is
// closed, waiting the backoff between tries: the one retry loop of Append,
// AppendBatch, CommitCursor, Cursor, Barrier, AddVoter, RemoveVoter and
// TransferLeadership (AppendAsync's retries run in the event loop with the
// same tries and verdicts). A nil error ends it at once.
func retry(ctx context.Context, closing <-chan struct{}, pol *retryPolicy, try func() (uint64, error)) (uint64, error) {
	var t tries
	for {
		off, err := try()
		if err == nil {
			return off, nil
		}
		v, off, err := pol.judge(off, err, t.unknown)
		if end, off, err := t.after(v, off, err, pol.maxWait); end {
			return off, err
		}
		if ctx.Err() == nil {
			timer := time.NewTimer(t.backoff)
			select {
			case <-ctx.Done():
			case <-closing:
				timer.Stop()
				return 0, t.stopped(pol, ErrClosed)
			case <-timer.C:
			}
			timer.Stop()
		}
		if err := ctx.Err(); err != nil {
			return 0, t.ctxEnded(pol, err)
		}
		if pol.prepare != nil {
			pol.prepare()
		}
	}
}

// once is the policy of a call that is tried once: every error ends it as
// judge makes it (TransferLeadership, a cursor read).
func once(judge func(err error) error) *retryPolicy {
	return &retryPolicy{judge: func(off uint64, err error, _ bool) (verdict, uint64, error) {
		return fail, off, judge(err)
	}}
}
