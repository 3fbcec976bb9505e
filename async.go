package replog

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// AppendResult is the outcome of an AppendAsync: it arrives later, when
// Done is closed. Its methods are safe for concurrent use.
type AppendResult struct {
	done   chan struct{}
	offset uint64 // set before done is closed
	err    error  // set before done is closed

	req request // what the loop works on (req.async points back here)

	mu    sync.Mutex
	state asyncState
	ctx   context.Context
	stop  func() bool // unregisters the context.AfterFunc
	// tries is the retry state of the loop's tries (retry.go): the same
	// backoff and verdicts as Append's.
	tries tries
}

type asyncState uint8

const (
	asyncSubmitted asyncState = iota // handed to the loop, or in the core
	asyncRetry                       // refused for want of a leader: waiting in the loop's retry list
	asyncDone
)

// Done returns a channel that is closed once the outcome is known.
func (r *AppendResult) Done() <-chan struct{} { return r.done }

// Wait returns the append's offset and error once they are known: what
// Append would have returned (see AppendAsync). If ctx ends first it
// returns ctx.Err() and the append goes on (call Wait again, or watch
// Done). Once Done is closed it returns at once, whatever ctx.
func (r *AppendResult) Wait(ctx context.Context) (uint64, error) {
	select {
	case <-r.done:
		return r.offset, r.err
	default:
	}
	select {
	case <-r.done:
		return r.offset, r.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// finishLocked sets the outcome, unless it is set already. r.mu is held.
func (r *AppendResult) finishLocked(offset uint64, err error) {
	if r.state == asyncDone {
		return
	}
	r.state = asyncDone
	r.offset, r.err = offset, err
	if r.req.prod != nil {
		r.req.prod.end(r.req.seq) // never tried again
	}
	if r.stop != nil {
		r.stop()
	}
	r.ctx, r.tries.last = nil, nil
	close(r.done)
}

func (r *AppendResult) finish(offset uint64, err error) {
	r.mu.Lock()
	r.finishLocked(offset, err)
	r.mu.Unlock()
}

// ctxDone runs (context.AfterFunc) when the append's context ends before
// its outcome is known: Append would return then.
func (r *AppendResult) ctxDone() {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch r.state {
	case asyncRetry:
		// Waiting to be handed to the core again: as Append's ctx ending
		// between tries.
		r.finishLocked(0, r.tries.ctxEnded(&asyncPolicy, r.ctx.Err()))
	case asyncSubmitted:
		r.finishLocked(0, fmt.Errorf("%w: %w", ErrUnknownOutcome, r.ctx.Err()))
	}
}

// AppendAsync appends data as one entry, as Append does (with the same
// options: WithID), without waiting
// for the outcome: it returns a handle whose Done channel is closed once
// the entry is committed or has failed, and whose Wait returns what Append
// would have returned (the offset, or the same errors: see Append). The
// guarantees are Append's: an offset means committed on a majority, and
// while no leader is known, or (idempotent, the default) after the leader
// changed or an answer was lost, the append is retried with the same
// sequence number until ctx ends. data is copied: the caller may reuse it
// at once.
//
// One goroutine can keep thousands of appends in flight: the node's event
// loop completes the handles, with no goroutine per call, and commits
// what is in flight together (one write, one fsync, one fetch round for
// many appends). AppendAsync returns at once unless the node's queue of
// proposals (1,024) is full: then it waits for room, which is the
// backpressure a fast producer needs (the handle fails with ctx.Err() if
// ctx ends first, nothing appended). Bound the number in flight yourself
// (keep a window of handles), as with any asynchronous producer.
//
// ctx covers the whole append, as Append's does: if it ends before the
// outcome is known, the handle completes at once with Append's error for
// that moment (ErrUnknownOutcome wrapping ctx.Err() once the entry may
// have reached a leader; a *NotLeaderError, or ErrBacklogFull, wrapping
// ctx.Err() while no leader would take it, R74). When a context ends, one short goroutine per
// append still waiting on it completes its handle (context.AfterFunc).
//
// Appends made in sequence are usually committed in that order, but not
// always: a retry after ErrNotLeader, or a leader change between two
// forwarded appends, can reorder them. Use the offsets the handles give.
func (l *Log) AppendAsync(ctx context.Context, data []byte, opts ...AppendOption) *AppendResult {
	r := &AppendResult{done: make(chan struct{})}
	if err := l.failed(); err != nil {
		r.finish(0, err)
		return r
	}
	if err := ctx.Err(); err != nil {
		r.finish(0, err)
		return r
	}
	if err := l.newAppend(&r.req, [][]byte{data}, true, opts); err != nil {
		r.finish(0, err)
		return r
	}
	r.req.async = r
	r.ctx = ctx
	select {
	case l.requests <- &r.req:
	case <-l.closing:
		r.finish(0, ErrClosed)
		return r
	case <-ctx.Done():
		r.finish(0, ctx.Err())
		return r
	}
	r.mu.Lock()
	if r.state != asyncDone {
		r.stop = context.AfterFunc(ctx, r.ctxDone)
	}
	r.mu.Unlock()
	select {
	case <-l.loopDone:
		// The loop ended, perhaps without taking it.
		l.failStranded()
	default:
	}
	return r
}

// asyncPolicy is the part of an append's retry policy that AppendAsync's
// handles use outside the loop's verdicts (judgeAppend): the end by ctx.
var asyncPolicy = retryPolicy{ended: notLeaderEnded}

// asyncRetryItem is an asynchronous append waiting in the loop to be
// proposed again.
type asyncRetryItem struct {
	at  time.Time
	req *request
}

// deliver hands a request its outcome (the loop calls it). A synchronous
// caller gets it on its channel; an asynchronous append has its handle
// completed, or, if judgeAppend says to try again, is proposed again later
// by the loop (retryDue), as Append would retry.
func (l *Log) deliver(r *request, res outcome) {
	a := r.async
	if a == nil {
		r.result <- res
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.state == asyncDone {
		return
	}
	off, err := res.offset, res.err
	if err != nil {
		var end bool
		v, o, e := l.judgeAppend(r, a.ctx.Err(), off, err)
		if end, off, err = a.tries.after(v, o, e, retryMax); !end {
			a.state = asyncRetry
			l.retries = append(l.retries, asyncRetryItem{at: time.Now().Add(a.tries.backoff), req: r})
			return
		}
	}
	a.finishLocked(off, err)
}

// retryDue proposes again (into p's round) the asynchronous appends whose
// wait is over. The loop calls it before each round.
func (l *Log) retryDue(p *pump) {
	if len(l.retries) == 0 {
		return
	}
	now := time.Now()
	kept := l.retries[:0]
	for _, it := range l.retries {
		if now.Before(it.at) {
			kept = append(kept, it)
			continue
		}
		a := it.req.async
		a.mu.Lock()
		again := a.state == asyncRetry // else its context ended meanwhile
		if again {
			a.state = asyncSubmitted
		}
		a.mu.Unlock()
		if again {
			it.req.refreshKey()
			p.add(it.req)
		}
	}
	clear(l.retries[len(kept):])
	l.retries = kept
}

// failRetries ends the appends waiting for a retry with err (ErrClosed, or
// the node's failure), as Append's tries end when the Log stops between
// them: the loop is stopping.
func (l *Log) failRetries(err error) {
	for _, it := range l.retries {
		a := it.req.async
		a.mu.Lock()
		a.finishLocked(0, a.tries.stopped(&asyncPolicy, err))
		a.mu.Unlock()
	}
	clear(l.retries)
	l.retries = l.retries[:0]
}

// failStranded answers the requests left in the queue once the loop has
// ended: they never reached the core. Anyone may call it then.
func (l *Log) failStranded() {
	for {
		select {
		case r := <-l.requests:
			if r.async != nil {
				r.async.finish(0, ErrClosed)
			} else {
				r.result <- outcome{err: ErrClosed}
			}
		default:
			return
		}
	}
}
