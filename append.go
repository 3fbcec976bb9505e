package replog

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/replog-io/replog/protocol"
)

// The wait between tries while no leader is known (Append, Barrier,
// AppendAsync's retries in the loop): it doubles from retryFirst up to
// retryMax, so an election is noticed within a few ms and a long one costs
// at most ten tries a second.
const (
	retryFirst = 5 * time.Millisecond
	retryMax   = 100 * time.Millisecond
)

// maxBatchBytes bounds one AppendBatch (records plus per-entry overhead) so
// that a batch forwarded by a follower fits one transport frame.
const maxBatchBytes = maxConfiguredSize

// AppendOption is an option of one Append, AppendBatch or AppendAsync
// call.
type AppendOption func(*appendOptions)

type appendOptions struct {
	id    string
	idSet bool
}

// WithID gives the append a caller-supplied ID (1 to MaxIDLength bytes),
// for retries that cross processes: a client retrying an HTTP request, a
// consumer re-processing an input after a restart. If an entry with the
// same ID was appended within Options.DedupWindow (by the leader's clock),
// nothing is appended: the call returns the original's first offset, once
// it is committed, with an error wrapping ErrDuplicate (docs/protocol.md
// R64). A batch carries one ID for the whole batch.
func WithID(id string) AppendOption {
	return func(o *appendOptions) { o.id, o.idSet = id, true }
}

// MaxIDLength bounds a WithID ID and a cursor name, in bytes.
const MaxIDLength = protocol.MaxKeyLength

// keyHeadroom is what a keyed append adds to a forwarded batch (its key
// header as one more record) and to an entry (the key prefix): batches and
// records are bounded that much lower, so that they still fit a frame.
const keyHeadroom = MaxIDLength + 64 + protocol.EntryOverhead

// Append appends data as one entry and returns its offset once it is
// committed: stored durably on a majority of voters and below the high
// watermark, so every reader on every node will see it at that offset.
// It works on any node; followers forward to the leader.
//
// Appends are idempotent (unless Options.DisableIdempotence): each carries
// this Log's producer ID and a sequence number, and Append tries again on
// its own, with the same sequence number, while no leader is known, when
// the leader changes, and when an answer is lost, until ctx ends or the
// Log closes; a leader that already holds the entry answers with its
// offset instead of appending it again (docs/protocol.md R63). So an entry
// is appended at most once per call, and the outcome is unknown only if
// the caller stops waiting. Test errors in this order:
//   - ErrDuplicate (with the original's offset): WithID's ID was appended
//     within Options.DedupWindow; nothing appended.
//   - ErrUnknownOutcome: ctx ended (the error wraps ctx.Err()) or the Log
//     closed (ErrClosed too) after the entry may have reached a leader, or
//     the disk failed (ErrStorageFailed too) before it committed. It may
//     or may not be in the log. With Options.DisableIdempotence also when
//     the leader lost its leadership first; retrying may then store it
//     twice (unless it carries an ID).
//   - ErrTooLarge: data is larger than Options.MaxRecordSize, or an ID is
//     longer than MaxIDLength; nothing appended.
//   - *NotLeaderError (ErrNotLeader): ctx ended while no leader would take
//     the entry; nothing appended. The error also wraps ctx.Err().
//   - ctx.Err() alone: ctx ended before the entry was handed to the
//     protocol; nothing appended.
//   - ErrClosed alone: the Log is closed; nothing appended.
//   - ErrStorageFailed alone: this node's disk failed earlier; nothing
//     appended. Close the Log and open it again.
func (l *Log) Append(ctx context.Context, data []byte, opts ...AppendOption) (uint64, error) {
	return l.AppendBatch(ctx, [][]byte{data}, opts...)
}

// AppendBatch appends records as consecutive entries in one write and
// returns the offset of the first once all are committed. On success every
// record is committed, at consecutive offsets. An idempotent batch (the
// default) is in the log whole or not at all (R61). With
// Options.DisableIdempotence the batch is not atomic across failures:
// when it ends with ErrUnknownOutcome, any prefix of it may be committed,
// because replication may cut a batch in two when the leader fails.
// Errors are those of Append; an empty batch, or one whose records plus
// protocol.EntryOverhead each exceed transport.DefaultMaxPayload in total
// (what one transport frame carries: 16 MiB less transport.FrameOverhead;
// a little less for an idempotent batch or one with an ID), returns
// ErrTooLarge or an error before anything is appended. The records are
// copied: the caller may reuse them once AppendBatch returns.
func (l *Log) AppendBatch(ctx context.Context, records [][]byte, opts ...AppendOption) (uint64, error) {
	var ao appendOptions
	for _, o := range opts {
		o(&ao)
	}
	p, err := l.newAppend(records, ao)
	if err != nil {
		return 0, err
	}
	if p.prod != nil {
		defer p.prod.end(p.seq)
	}
	return l.proposeUntilKnown(ctx, p)
}

// newAppend checks and copies a batch and makes its proposal, keyed with
// a new sequence number of this Log's producer (unless idempotence is off)
// and the caller's ID.
func (l *Log) newAppend(records [][]byte, ao appendOptions) (*proposal, error) {
	if ao.idSet && (ao.id == "" || len(ao.id) > MaxIDLength) {
		return nil, fmt.Errorf("%w: an append ID is 1 to %d bytes", ErrTooLarge, MaxIDLength)
	}
	keyed := !l.opts.DisableIdempotence || ao.id != ""
	own, err := l.ownRecords(records, keyed)
	if err != nil {
		return nil, err
	}
	p := &proposal{records: own, id: ao.id}
	if !l.opts.DisableIdempotence {
		p.prod = l.prod
		p.seq, p.key = l.prod.begin(ao.id)
	} else {
		p.refreshKey()
	}
	return p, nil
}

// refreshKey sets the key of p's next try: Low as the producer has it now.
func (p *proposal) refreshKey() {
	switch {
	case p.prod != nil:
		p.key = p.prod.key(p.seq, p.id)
	case p.id != "":
		p.key = protocol.Key{ID: p.id}
	}
}

// proposeUntilKnown hands p to the loop until its outcome is known: it
// tries again while no leader is known, and, for a producer's append
// (R63), after an unknown outcome that was not the caller's (ctx, Close)
// or the disk's.
func (l *Log) proposeUntilKnown(ctx context.Context, p *proposal) (uint64, error) {
	return retryUntilKnown(ctx, l.closing, func() (uint64, error) { return l.submit(ctx, p) },
		func() bool { return p.prod != nil && l.failed() == nil }, p.refreshKey)
}

// retryUntilKnown is proposeUntilKnown's loop: try submits one try;
// mayRetryUnknown says whether an unknown outcome may be tried again (the
// same key, R63); next prepares the next try. Once a try's outcome was
// unknown, the append may be in the log whatever later tries see (a
// forwarded append committed, then its node was cut off and saw no
// leader): an end by ctx or Close then reports ErrUnknownOutcome, never
// the last try's "not the leader", which means "not appended" (fault run
// TestAddRemoveVoterFaults seed 422844).
func retryUntilKnown(ctx context.Context, closing <-chan struct{}, try func() (uint64, error), mayRetryUnknown func() bool, next func()) (uint64, error) {
	backoff := retryFirst
	unknown := false // some try's outcome was unknown
	for {
		offset, err := try()
		var nl *NotLeaderError
		switch {
		case err == nil:
			return offset, nil
		case errors.Is(err, ErrDuplicate):
			return offset, fmt.Errorf("%w: appended at offset %d", ErrDuplicate, offset)
		case errors.As(err, &nl):
			// Nothing was appended by this try: wait for an election or
			// a leader to become known, then try again.
		case errors.Is(err, ErrUnknownOutcome) && ctx.Err() == nil && !errors.Is(err, ErrClosed) && mayRetryUnknown():
			// The leader changed or the answer was lost: the same
			// sequence number again; a leader that holds it answers with
			// its offset.
			unknown = true
		case unknown && !errors.Is(err, ErrUnknownOutcome):
			return 0, fmt.Errorf("%w: %w", ErrUnknownOutcome, err)
		default:
			return offset, err
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			if nl != nil && !unknown {
				return 0, fmt.Errorf("%w (%w)", err, ctx.Err())
			}
			return 0, fmt.Errorf("%w: %w", ErrUnknownOutcome, ctx.Err())
		case <-closing:
			t.Stop()
			if nl != nil && !unknown {
				return 0, ErrClosed
			}
			return 0, fmt.Errorf("%w: %w", ErrUnknownOutcome, ErrClosed)
		case <-t.C:
		}
		backoff = min(2*backoff, retryMax)
		next()
	}
}

// ownRecords checks a batch against the size limits and returns a copy of
// it: the core keeps the records until they are durable, and the caller
// may reuse its buffers once the append call returns.
func (l *Log) ownRecords(records [][]byte, keyed bool) ([][]byte, error) {
	if len(records) == 0 {
		return nil, errors.New("replog: AppendBatch: no records")
	}
	maxRecord, maxBatch, perRecord := l.opts.MaxRecordSize, maxBatchBytes, protocol.EntryOverhead
	if keyed {
		// Room for the key: its header record when forwarded, its prefix
		// on each entry (R61).
		maxRecord, maxBatch, perRecord = min(maxRecord, maxRecordSize-keyHeadroom), maxBatch-keyHeadroom, perRecord+1
	}
	var total int
	for i, r := range records {
		if len(r) > maxRecord {
			return nil, fmt.Errorf("%w: record %d is %d bytes (MaxRecordSize %d)", ErrTooLarge, i, len(r), maxRecord)
		}
		total += len(r)
		if total+(i+1)*perRecord > maxBatch {
			return nil, fmt.Errorf("%w: the batch exceeds %d bytes at record %d", ErrTooLarge, maxBatch, i)
		}
	}
	// One copy for the whole batch.
	buf := make([]byte, 0, total)
	own := make([][]byte, len(records))
	for i, r := range records {
		start := len(buf)
		buf = append(buf, r...)
		own[i] = buf[start:len(buf):len(buf)]
	}
	return own, nil
}

// submit hands p to the loop and waits for its outcome.
func (l *Log) submit(ctx context.Context, p *proposal) (uint64, error) {
	if err := l.failed(); err != nil {
		return 0, err
	}
	p.result = make(chan proposalResult, 1)
	select {
	case <-l.closing:
		return 0, ErrClosed
	case <-ctx.Done():
		return 0, ctx.Err()
	case l.proposals <- p:
	}
	select {
	case r := <-p.result:
		return r.offset, r.err
	case <-ctx.Done():
		return 0, fmt.Errorf("%w: %w", ErrUnknownOutcome, ctx.Err())
	case <-l.loopDone:
		// The loop answers every proposal it took before it ends; one
		// still unanswered never reached the protocol.
		select {
		case r := <-p.result:
			return r.offset, r.err
		default:
			return 0, ErrClosed
		}
	}
}
