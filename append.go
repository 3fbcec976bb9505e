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

// Append appends data as one entry and returns its offset once it is
// committed: stored durably on a majority of voters and below the high
// watermark, so every reader on every node will see it at that offset.
// It works on any node; followers forward to the leader.
//
// While no leader is known (an election is under way) Append retries until
// ctx ends. Test errors in this order:
//   - ErrUnknownOutcome: the entry reached a leader but ctx ended, the
//     leader lost its leadership, the Log closed (then ErrClosed too) or
//     the disk failed (then ErrStorageFailed too) before it committed. It
//     may or may not be in the log; retrying may store it twice.
//   - ErrTooLarge: data is larger than Options.MaxRecordSize; nothing
//     appended.
//   - *NotLeaderError (ErrNotLeader): ctx ended while no leader would take
//     the entry; nothing appended. The error also wraps ctx.Err().
//   - ctx.Err() alone: ctx ended before the entry was handed to the
//     protocol; nothing appended.
//   - ErrClosed alone: the Log is closed; nothing appended.
//   - ErrStorageFailed alone: this node's disk failed earlier; nothing
//     appended. Close the Log and open it again.
func (l *Log) Append(ctx context.Context, data []byte) (uint64, error) {
	return l.AppendBatch(ctx, [][]byte{data})
}

// AppendBatch appends records as consecutive entries in one write and
// returns the offset of the first once all are committed. On success every
// record is committed, at consecutive offsets. The batch is not atomic
// across failures: when it ends with ErrUnknownOutcome, any prefix of it
// (none, some or all of the records) may be committed, because replication
// may cut a batch in two when the leader fails. Errors are those of
// Append; an empty batch, or one whose records plus protocol.EntryOverhead
// each exceed transport.DefaultMaxPayload in total (what one transport
// frame carries: 16 MiB less transport.FrameOverhead), returns ErrTooLarge
// or an error before anything is appended. The records
// are copied: the caller may reuse them once AppendBatch returns.
func (l *Log) AppendBatch(ctx context.Context, records [][]byte) (uint64, error) {
	own, err := l.ownRecords(records)
	if err != nil {
		return 0, err
	}
	backoff := retryFirst
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
		backoff = min(2*backoff, retryMax)
	}
}

// ownRecords checks a batch against the size limits and returns a copy of
// it: the core keeps the records until they are durable, and the caller
// may reuse its buffers once the append call returns.
func (l *Log) ownRecords(records [][]byte) ([][]byte, error) {
	if len(records) == 0 {
		return nil, errors.New("replog: AppendBatch: no records")
	}
	var total int
	for i, r := range records {
		if len(r) > l.opts.MaxRecordSize {
			return nil, fmt.Errorf("%w: record %d is %d bytes (MaxRecordSize %d)", ErrTooLarge, i, len(r), l.opts.MaxRecordSize)
		}
		total += len(r)
		if total+(i+1)*protocol.EntryOverhead > maxBatchBytes {
			return nil, fmt.Errorf("%w: the batch exceeds %d bytes at record %d", ErrTooLarge, maxBatchBytes, i)
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

// propose hands one batch to the loop and waits for its outcome.
func (l *Log) propose(ctx context.Context, records [][]byte) (uint64, error) {
	return l.submit(ctx, &proposal{records: records})
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
