package replog

import (
	"context"
	"errors"
	"fmt"

	"github.com/replog-io/replog/internal/shell"
	"github.com/replog-io/replog/protocol"
)

// maxBatchBytes bounds one AppendBatch (records plus per-entry overhead) so
// that a batch forwarded by a follower fits one transport frame.
const maxBatchBytes = maxConfiguredSize

// AppendOption is an option of one Append, AppendBatch or AppendAsync
// call.
type AppendOption func(*appendOptions)

type appendOptions struct {
	id     string
	idSet  bool
	key    string
	keySet bool
}

// WithID gives the append a caller-supplied ID (1 to MaxIDLength bytes;
// the append returns ErrInvalidArgument otherwise), for retries that
// cross processes: a client retrying an HTTP request, a consumer
// re-processing an input after a restart. If an entry with the
// same ID was appended within Options.DedupWindow (by the leader's clock),
// nothing is appended: the call returns the original's first offset, once
// it is committed, with an error wrapping ErrDuplicate (docs/protocol.md
// R64). A batch carries one ID for the whole batch.
func WithID(id string) AppendOption {
	return func(o *appendOptions) { o.id, o.idSet = id, true }
}

// MaxIDLength bounds a WithID ID and a cursor name, in bytes.
const MaxIDLength = protocol.MaxKeyLength

// WithKey gives every entry of the append the key key (1 to MaxKeyLength
// bytes; the append returns ErrInvalidArgument otherwise): readers see it
// as Entry.Key, and a compacted log (Options.Compaction) keeps, below its
// lag, only the newest entry of each key, and an entry with a key and no
// data (a tombstone) only for its retention (docs/protocol.md R102,
// R103). It combines with WithID: the ID deduplicates, the key names what
// the entry is the newest value of. A batch carries one key for all its
// records. Keys need cluster feature level 10 (protocol.FeatureLevelKeys):
// below it the append returns an error wrapping ErrFeatureLevelTooLow,
// nothing appended.
func WithKey(key string) AppendOption {
	return func(o *appendOptions) { o.key, o.keySet = key, true }
}

// MaxKeyLength bounds a WithKey key, in bytes.
const MaxKeyLength = protocol.MaxKeyLength

// FeatureLevelKeys is the cluster feature level (Status.FeatureLevel)
// from which WithKey is accepted: protocol.FeatureLevelKeys.
const FeatureLevelKeys = protocol.FeatureLevelKeys

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
//   - ErrTooLarge: data is larger than Options.MaxRecordSize (the message
//     says both sizes); nothing appended.
//   - ErrInvalidArgument: WithID's ID is empty or longer than
//     MaxIDLength; nothing appended.
//   - *NotLeaderError (ErrNotLeader): ctx ended while no leader would take
//     the entry (on a follower, also while the leader's backlog was full);
//     nothing appended. The error also wraps ctx.Err().
//   - ErrBacklogFull: ctx ended while this node led and its uncommitted
//     backlog had no room for the entry (Options.MaxUncommittedBytes,
//     R74); nothing appended. The error also wraps ctx.Err().
//   - ctx.Err() alone: ctx ended before the entry was handed to the
//     protocol; nothing appended.
//   - ErrClosed alone: the Log is closed; nothing appended.
//   - ErrStorageFailed alone: this node's disk failed earlier; nothing
//     appended. Close the Log and open it again.
func (l *Log) Append(ctx context.Context, data []byte, opts ...AppendOption) (uint64, error) {
	return l.appendBatch(ctx, [][]byte{data}, true, opts)
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
// ErrTooLarge or an error before anything is appended; a record over
// Options.MaxRecordSize returns ErrTooLarge naming its index. The records
// are copied: the caller may reuse them once AppendBatch returns.
func (l *Log) AppendBatch(ctx context.Context, records [][]byte, opts ...AppendOption) (uint64, error) {
	return l.appendBatch(ctx, records, false, opts)
}

// appendBatch is Append (single: one record, named so in errors) and
// AppendBatch.
func (l *Log) appendBatch(ctx context.Context, records [][]byte, single bool, opts []AppendOption) (uint64, error) {
	r := new(request)
	if err := l.newAppend(r, records, single, opts); err != nil {
		return 0, err
	}
	if r.prod != nil {
		defer r.prod.end(r.seq)
	}
	return l.appendUntilKnown(ctx, r)
}

// newAppend checks and copies a batch and makes r its request, keyed with
// a new sequence number of this Log's producer (unless idempotence is off)
// and the caller's ID.
func (l *Log) newAppend(r *request, records [][]byte, single bool, opts []AppendOption) error {
	var ao appendOptions
	for _, o := range opts {
		o(&ao)
	}
	if ao.idSet {
		if err := checkName("an append ID", ao.id); err != nil {
			return err
		}
	}
	if ao.keySet {
		if err := checkName("an entry key", ao.key); err != nil {
			return err
		}
	}
	keyed := !l.opts.DisableIdempotence || ao.id != "" || ao.key != ""
	own, err := l.ownRecords(records, keyed, len(ao.key), single)
	if err != nil {
		return err
	}
	r.ev = shell.Propose(0, own)
	r.id, r.entryKey = ao.id, ao.key
	switch {
	case !l.opts.DisableIdempotence:
		r.prod = l.prod
		r.seq, r.ev.Key = l.prod.begin(ao.id)
	case ao.id != "":
		r.ev.Key = protocol.Key{ID: ao.id}
	}
	r.ev.Key.EntryKey = ao.key
	return nil
}

// checkName checks a WithID ID or a cursor name (what names it): 1 to
// MaxIDLength bytes, else an error wrapping ErrInvalidArgument.
func checkName(what, name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: %s is empty (it is 1 to %d bytes)", ErrInvalidArgument, what, MaxIDLength)
	case len(name) > MaxIDLength:
		return fmt.Errorf("%w: %s is %d bytes, over MaxIDLength (%d)", ErrInvalidArgument, what, len(name), MaxIDLength)
	}
	return nil
}

// refreshKey sets the key of r's next try: Low as the producer has it now.
func (r *request) refreshKey() {
	if r.prod != nil {
		r.ev.Key = r.prod.key(r.seq, r.id)
		r.ev.Key.EntryKey = r.entryKey
	}
}

// appendUntilKnown hands r, an append or a cursor commit, to the loop until
// its outcome is known (see judgeAppend).
func (l *Log) appendUntilKnown(ctx context.Context, r *request) (uint64, error) {
	pol := l.appendPolicy(ctx, r)
	return retry(ctx, l.closing, &pol, func() (uint64, error) { return l.submit(ctx, r) })
}

// appendPolicy is the retry policy of append r under ctx.
func (l *Log) appendPolicy(ctx context.Context, r *request) retryPolicy {
	return retryPolicy{
		judge: func(off uint64, err error, _ bool) (verdict, uint64, error) {
			return l.judgeAppend(r, ctx.Err(), off, err)
		},
		ended:   notLeaderEnded,
		prepare: r.refreshKey,
	}
}

// judgeAppend is the retry policy of an append or a cursor commit r (R63,
// R67), for Append, AppendBatch, CommitCursor and AppendAsync's retries in
// the loop; ctxErr is its context's error now. It tries again while no
// leader takes r, and, for a producer's append, after an unknown outcome
// that was not the caller's (ctx, Close) or the disk's: the same sequence
// number again, which a leader that holds it answers with its offset.
func (l *Log) judgeAppend(r *request, ctxErr error, off uint64, err error) (verdict, uint64, error) {
	var nl *NotLeaderError
	switch {
	case errors.Is(err, ErrDuplicate):
		return settle, off, fmt.Errorf("%w: appended at offset %d", ErrDuplicate, off)
	case errors.As(err, &nl), errors.Is(err, ErrBacklogFull):
		// Nothing appended: no leader took it, or the leader's backlog
		// had no room for it yet (R74).
		return again, 0, err
	case errors.Is(err, ErrUnknownOutcome) && ctxErr == nil && !errors.Is(err, ErrClosed) && r.prod != nil && l.failed() == nil:
		return againUnknown, 0, err
	}
	return fail, off, err
}

// notLeaderEnded is an append's error when ctx ends while no leader would
// take it (last is that refusal): nothing was appended.
func notLeaderEnded(last, ctxErr error) error {
	if last == nil {
		return ctxErr
	}
	return fmt.Errorf("%w (%w)", last, ctxErr)
}

// ownRecords checks a batch against the size limits and returns a copy of
// it: the core keeps the records until they are durable, and the caller
// may reuse its buffers once the append call returns.
// single names the record as an Append's (not a batch's) in errors.
func (l *Log) ownRecords(records [][]byte, keyed bool, entryKeyLen int, single bool) ([][]byte, error) {
	if len(records) == 0 {
		return nil, errors.New("replog: AppendBatch: no records")
	}
	maxRecord, maxBatch, perRecord := l.opts.MaxRecordSize, maxBatchBytes, protocol.EntryOverhead
	if keyed {
		// Room for the key: its header record when forwarded, its prefix
		// on each entry (R61).
		maxRecord, maxBatch, perRecord = min(maxRecord, maxRecordSize-keyHeadroom), maxBatch-keyHeadroom, perRecord+1
	}
	if entryKeyLen > 0 {
		// Every entry carries the entry key in its prefix (R102).
		k := protocol.MaxEntryKeyOverhead(entryKeyLen)
		maxRecord, maxBatch, perRecord = min(maxRecord, maxRecordSize-keyHeadroom-k), maxBatch-k, perRecord+k
	}
	var total int
	for i, r := range records {
		if len(r) > maxRecord {
			return nil, l.recordTooLarge(i, len(r), maxRecord, single)
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

// recordTooLarge is the error of record i (of size n) over its limit
// limit, which is Options.MaxRecordSize or, for a keyed record, what is left of
// the largest record size once the key has its room.
func (l *Log) recordTooLarge(i, n, limit int, single bool) error {
	which := "record"
	if !single {
		which = fmt.Sprintf("record %d of the batch", i)
	}
	if limit < l.opts.MaxRecordSize {
		return fmt.Errorf("%w: %s is %d bytes, over the %d a keyed record holds (the largest record size less the key's %d bytes)", ErrTooLarge, which, n, limit, keyHeadroom)
	}
	return fmt.Errorf("%w: %s is %d bytes, over Options.MaxRecordSize (%d)", ErrTooLarge, which, n, limit)
}

// submit hands r to the loop and waits for its outcome: one try.
func (l *Log) submit(ctx context.Context, r *request) (uint64, error) {
	if err := l.failed(); err != nil {
		return 0, err
	}
	r.result = make(chan outcome, 1)
	select {
	case <-l.closing:
		return 0, ErrClosed
	case <-ctx.Done():
		return 0, ctx.Err()
	case l.requests <- r:
	}
	select {
	case r := <-r.result:
		return r.offset, r.err
	case <-ctx.Done():
		return 0, fmt.Errorf("%w: %w", ErrUnknownOutcome, ctx.Err())
	case <-l.loopDone:
		// The loop answers every proposal it took before it ends; one
		// still unanswered never reached the protocol.
		select {
		case r := <-r.result:
			return r.offset, r.err
		default:
			return 0, ErrClosed
		}
	}
}
