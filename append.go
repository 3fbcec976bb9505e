package replog

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Append appends data as one entry and returns its offset once it is
// committed: stored durably on a majority of voters and below the high
// watermark, so every reader on every node will see it at that offset.
// It works on any node; followers forward to the leader.
//
// While no leader is known (an election is under way) Append retries until
// ctx ends. Errors:
//   - ErrTooLarge: data is larger than Options.MaxRecordSize; nothing
//     appended.
//   - *NotLeaderError (ErrNotLeader): ctx ended while no leader would take
//     the entry; nothing appended. The error also wraps ctx.Err().
//   - ErrUnknownOutcome: the entry reached a leader but ctx ended, the
//     leader lost its leadership, or the Log closed before it committed; it
//     may or may not be in the log.
//   - ctx.Err(): ctx ended before the entry was handed to the protocol;
//     nothing appended.
//   - ErrClosed: the Log is closed; nothing appended.
//   - a storage error if the disk failed.
func (l *Log) Append(ctx context.Context, data []byte) (uint64, error) {
	return l.AppendBatch(ctx, [][]byte{data})
}

// AppendBatch appends records as consecutive entries in one write and
// returns the offset of the first once all are committed. The batch is
// atomic: all records commit together or none does. Errors are those of
// Append; an empty batch returns an error. The records are copied: the
// caller may reuse them once AppendBatch returns.
func (l *Log) AppendBatch(ctx context.Context, records [][]byte) (uint64, error) {
	if len(records) == 0 {
		return 0, errors.New("replog: AppendBatch: no records")
	}
	var total int
	for i, r := range records {
		if len(r) > l.opts.MaxRecordSize {
			return 0, fmt.Errorf("%w: record %d is %d bytes (MaxRecordSize %d)", ErrTooLarge, i, len(r), l.opts.MaxRecordSize)
		}
		total += len(r)
	}
	// One copy for the whole batch: the core keeps the records until they
	// are durable, and the caller may reuse its buffers after we return.
	buf := make([]byte, 0, total)
	own := make([][]byte, len(records))
	for i, r := range records {
		start := len(buf)
		buf = append(buf, r...)
		own[i] = buf[start:len(buf):len(buf)]
	}

	backoff := 5 * time.Millisecond
	for {
		offset, err := l.propose(ctx, own)
		var nl *NotLeaderError
		if err == nil || !errors.As(err, &nl) {
			return offset, err
		}
		// Nothing was appended: wait for an election or a leader to become
		// known, then try again.
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, fmt.Errorf("%w (%w)", err, ctx.Err())
		case <-l.closing:
			t.Stop()
			return 0, ErrClosed
		case <-t.C:
		}
		backoff = min(2*backoff, 100*time.Millisecond)
	}
}

// propose hands one batch to the loop and waits for its outcome.
func (l *Log) propose(ctx context.Context, records [][]byte) (uint64, error) {
	if err := l.failed(); err != nil {
		return 0, err
	}
	p := &proposal{records: records, result: make(chan proposalResult, 1)}
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
