package kv

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"

	"github.com/replog-io/replog"
	"github.com/replog-io/replog/internal/kvstate"
)

// Entry is a key's value as this node holds it.
type Entry struct {
	Key   string
	Value []byte
	// Revision is the offset of the log entry that set the value.
	Revision uint64
}

// Change is one change to a key: a value set (Put, a Create or Update
// that succeeded) or a deletion.
type Change struct {
	Key string
	// Value is the value set; nil for a deletion.
	Value []byte
	// Revision is the offset of the log entry that made the change.
	Revision uint64
	// Deleted says the change deleted the key.
	Deleted bool
}

// outcome is what applying a conditional operation decided.
type outcome struct {
	offset uint64 // the entry's
	err    error  // nil, ErrExists or a *RevisionMismatchError
}

// Stats counts what a KV has done since Open.
type Stats struct {
	// Next is the offset the KV's state is of: it has applied every entry
	// below it.
	Next uint64
	// Keys is how many keys have a value.
	Keys int
	// Applied counts the KV operations applied (failed conditionals too).
	Applied uint64
	// Failed counts the Creates and Updates that failed when applied.
	Failed uint64
	// Skipped counts the log entries that are not KV operations (another
	// writer's, or of a version this package does not read).
	Skipped uint64
	// Snapshots counts the snapshots saved; SnapshotErrors the ones that
	// failed (each logged at Warn).
	Snapshots, SnapshotErrors uint64
	// Restored is the offset of the snapshot Open restored the state
	// from; 0 when it started from an empty state.
	Restored uint64
}

// KV is a key-value view on a replog.Log: see the package doc. Its
// methods may be called from any goroutine.
type KV struct {
	log    *replog.Log
	opts   Options
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once

	// mu guards what follows. Only the apply loop changes the state, so it
	// reads it without the lock (while streaming a snapshot, say), and
	// takes it to write.
	mu      sync.RWMutex
	state   kvstate.State
	next    uint64
	applied chan struct{} // closed and replaced whenever next moves or the loop ends
	err     error         // why the loop ended; nil while it runs
	pending map[uint64]bool
	results map[uint64]outcome // by request, for pending ones
	ring    []Change           // the latest changes, for watchers
	changes uint64             // changes ever recorded; ring holds the last len(ring)
	stats   Stats

	// The loop's own: what it applied since its last snapshot.
	sinceEntries int
	sinceBytes   int64
	lastSnap     uint64
}

// Open restores the KV's state from the Log's newest snapshot, if any
// (OpenSnapshot), and starts applying the committed entries from the
// snapshot's offset on, in a goroutine that Close ends, and the Log's
// closing too. It returns once the snapshot is loaded, before the
// entries after it are applied: Barrier waits for those.
//
// The KV owns the Log's snapshots (it saves them every
// Options.SnapshotEvery*): a service should not save its own on the same
// Log, or its snapshot may be restored as the KV's state.
//
// Errors: an error wrapping ErrInvalidOptions; one wrapping
// *replog.OutOfRangeError (replog.ErrOutOfRange) when the log no longer
// holds the entries after the state (retention deleted them, and
// Options.RetainUntilSnapshot was not set); the snapshot's errors
// (replog.ErrCorrupt, replog.ErrClosed, replog.ErrStorageFailed, the
// file system's, or one saying the snapshot is not a KV's).
func Open(ctx context.Context, log *replog.Log, opts Options) (*KV, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	k := &KV{
		log:     log,
		opts:    opts.withDefaults(),
		done:    make(chan struct{}),
		state:   kvstate.State{},
		applied: make(chan struct{}),
		pending: map[uint64]bool{},
		results: map[uint64]outcome{},
	}
	k.ring = make([]Change, 0, k.opts.WatchBuffer)
	if err := k.restore(); err != nil {
		return nil, err
	}
	if ls := log.Status().LogStart; k.next < ls {
		return nil, fmt.Errorf("replog: kv: the state is of offset %d, and the log's entries after it are gone: %w", k.next, &replog.OutOfRangeError{Offset: k.next, LogStart: ls})
	}
	k.lastSnap = k.next
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	k.cancel = cancel
	go k.run(runCtx)
	return k, nil
}

// Close stops the KV's goroutine and waits for it; calls waiting for
// their operation to apply return ErrClosed. It does not close the Log.
// It always returns nil.
func (k *KV) Close() error {
	k.once.Do(k.cancel)
	<-k.done
	return nil
}

// run applies the log from k.next on until ctx ends or the read fails.
func (k *KV) run(ctx context.Context) {
	defer close(k.done)
	for e, err := range k.log.Read(ctx, k.next) {
		if err != nil {
			k.stop(ctx, err)
			return
		}
		k.apply(e)
		k.maybeSnapshot(ctx)
	}
}

// stop records why the loop ended and wakes every waiter.
func (k *KV) stop(ctx context.Context, err error) {
	switch {
	case ctx.Err() != nil:
		err = ErrClosed
	case errors.Is(err, replog.ErrClosed):
		err = fmt.Errorf("%w: %w", ErrClosed, err)
	default:
		err = fmt.Errorf("%w: %w", ErrStopped, err)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.err = err
	close(k.applied)
	k.applied = make(chan struct{})
}

// apply applies one committed entry through kvstate.State.Apply, the
// one definition of what an entry does (R90): every node applies the same
// entries in the same order from the same state, so every node decides
// each conditional operation alike.
func (k *KV) apply(e replog.Entry) {
	k.sinceEntries++
	k.sinceBytes += int64(len(e.Data))
	k.mu.Lock()
	defer func() {
		k.next = e.Offset + 1
		close(k.applied)
		k.applied = make(chan struct{})
		k.mu.Unlock()
	}()
	o := k.state.Apply(e.Offset, e.Key, e.Data)
	if o.Skipped != nil {
		k.stats.Skipped++
		k.opts.Logger.Debug("kv: entry skipped", "offset", e.Offset, "error", o.Skipped)
		return
	}
	k.stats.Applied++
	if o.Changed {
		k.record(Change{Key: o.Key, Value: o.Value, Revision: e.Offset, Deleted: o.Deleted})
	}
	if o.Failed != nil {
		k.stats.Failed++
	}
	if o.Request != 0 && k.pending[o.Request] {
		k.results[o.Request] = outcome{offset: e.Offset, err: o.Failed}
	}
}

// record keeps c for watchers, dropping the oldest beyond WatchBuffer.
// k.mu is held.
func (k *KV) record(c Change) {
	if len(k.ring) < cap(k.ring) {
		k.ring = append(k.ring, c)
	} else if len(k.ring) > 0 {
		k.ring[k.changes%uint64(len(k.ring))] = c
	}
	k.changes++
}

// write appends o and waits until this node has applied it; it returns
// its revision and, for a conditional operation, what applying it
// decided.
func (k *KV) write(ctx context.Context, o kvstate.Operation) (uint64, error) {
	if err := checkKey(o.Key); err != nil {
		return 0, err
	}
	if err := k.stopped(); err != nil {
		return 0, err
	}
	conditional := o.Op.Conditional()
	if conditional {
		o.Request = k.register()
		defer k.unregister(o.Request)
	}
	data, opts := k.entry(o)
	off, err := k.log.Append(ctx, data, opts...)
	if err != nil {
		return 0, err
	}
	if err := k.waitApplied(ctx, off); err != nil {
		return off, err
	}
	if !conditional {
		return off, nil
	}
	k.mu.Lock()
	res, ok := k.results[o.Request]
	k.mu.Unlock()
	if !ok || res.offset != off {
		// Unreachable while the entry at off is ours: applying it records
		// its outcome.
		return off, fmt.Errorf("replog: kv: no outcome recorded for the %v at offset %d", o.Op, off)
	}
	return off, res.err
}

// entry returns the data and append options of o's entry (R105): from
// feature level 10 on, a Put carries its key's entry key and a Delete is
// a tombstone (the entry key and no data), so that a compacted log keeps
// the newest of each key; a Create or an Update carries none, so that it
// is never compacted: its outcome depends on the key's state before it,
// which compaction changes.
func (k *KV) entry(o kvstate.Operation) ([]byte, []replog.AppendOption) {
	ek := kvstate.EntryKey(o.Key)
	if ek == "" || o.Op != kvstate.OpPut && o.Op != kvstate.OpDelete || k.log.Status().FeatureLevel < replog.FeatureLevelKeys {
		return kvstate.Encode(o), nil
	}
	if o.Op == kvstate.OpDelete {
		return nil, []replog.AppendOption{replog.WithKey(ek)}
	}
	return kvstate.Encode(o), []replog.AppendOption{replog.WithKey(ek)}
}

// register reserves a request number for a conditional operation, unique
// among this KV's pending ones.
func (k *KV) register() uint64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	for {
		// Random, so that the KVs sharing a log (on other nodes, or
		// earlier on this one) do not reuse each other's numbers; 0 is
		// "no request".
		if r := rand.Uint64(); r != 0 && !k.pending[r] {
			k.pending[r] = true
			return r
		}
	}
}

func (k *KV) unregister(r uint64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.pending, r)
	delete(k.results, r)
}

// stopped is the loop's error once it has ended.
func (k *KV) stopped() error {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return k.err
}

// waitApplied waits until the KV has applied the entry at off.
func (k *KV) waitApplied(ctx context.Context, off uint64) error {
	for {
		k.mu.RLock()
		n, ch, err := k.next, k.applied, k.err
		k.mu.RUnlock()
		if n > off {
			return nil
		}
		if err != nil {
			return err
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Put sets key to value and returns its revision once the entry is
// committed and applied on this node (so that a Get here sees it).
//
// Errors: ErrInvalidKey; the Log's Append errors (replog.ErrTooLarge,
// replog.ErrNoLeader, replog.ErrUnknownOutcome, ctx.Err(), ...); ErrClosed
// or ErrStopped when the KV ended (the Put may have committed); ctx.Err()
// while waiting to apply it (it committed, at the revision returned).
func (k *KV) Put(ctx context.Context, key string, value []byte) (uint64, error) {
	return k.write(ctx, kvstate.Operation{Op: kvstate.OpPut, Key: key, Value: slices.Clone(value)})
}

// Delete deletes key and returns the deletion's revision once it is
// committed and applied on this node. Deleting a key without a value
// changes nothing (no Change is watched), but still costs a log entry.
// Errors: those of Put.
func (k *KV) Delete(ctx context.Context, key string) (uint64, error) {
	return k.write(ctx, kvstate.Operation{Op: kvstate.OpDelete, Key: key})
}

// Create sets key to value only if the key has no value when the entry is
// applied, and returns its revision. The check is made where the entry is
// applied, on every node alike (see the package doc), so of two Creates
// of one key exactly one succeeds. A Create that fails still took a log
// entry.
//
// Errors: those of Put; an error wrapping ErrExists when the key had a
// value.
func (k *KV) Create(ctx context.Context, key string, value []byte) (uint64, error) {
	return k.write(ctx, kvstate.Operation{Op: kvstate.OpCreate, Key: key, Value: slices.Clone(value)})
}

// Update sets key to value only if, when the entry is applied, the key's
// revision is expected (0: the key has no value), and returns the new
// revision. Of two Updates naming the same revision, exactly one
// succeeds, on every node alike. A failed Update still took a log entry.
//
// Errors: those of Put; a *RevisionMismatchError (ErrRevisionMismatch)
// carrying the key's revision when it was applied.
func (k *KV) Update(ctx context.Context, key string, value []byte, expected uint64) (uint64, error) {
	return k.write(ctx, kvstate.Operation{Op: kvstate.OpUpdate, Key: key, Value: slices.Clone(value), Expected: expected})
}

// Get returns key's value as this node has applied it: committed, but
// possibly stale (a follower learns of commits a fetch round after the
// leader, a node cut off from its leader keeps what it had, and the KV
// applies a moment after that). A Get after this KV's own Put sees it.
// For a linearizable read use GetLinearizable.
//
// Errors: ErrNotFound; ErrInvalidKey; ErrClosed or ErrStopped once the
// KV ended.
func (k *KV) Get(key string) (Entry, error) {
	if err := checkKey(key); err != nil {
		return Entry{}, err
	}
	k.mu.RLock()
	defer k.mu.RUnlock()
	if k.err != nil {
		return Entry{}, k.err
	}
	r := k.state[key]
	if !r.Live() {
		return Entry{}, fmt.Errorf("%w: %q", ErrNotFound, key)
	}
	return Entry{Key: key, Value: slices.Clone(r.Value), Revision: r.Rev}, nil
}

// GetLinearizable is Barrier, then Get: it sees every write acknowledged,
// on any node, before it was called. It costs a log entry (the barrier's)
// and a round to the leader. Errors: those of Barrier and of Get.
func (k *KV) GetLinearizable(ctx context.Context, key string) (Entry, error) {
	if err := checkKey(key); err != nil {
		return Entry{}, err
	}
	if err := k.Barrier(ctx); err != nil {
		return Entry{}, err
	}
	return k.Get(key)
}

// Barrier returns once this KV has applied every write acknowledged, on
// any node, before Barrier was called (replog.Log.Barrier, then the wait
// for this KV to apply up to it): a Get, Keys or History after it is
// linearizable with those writes.
//
// Errors: those of replog.Log.Barrier; an *replog.OutOfRangeError if the
// log start passed the KV; ErrClosed or ErrStopped once the KV ended;
// ctx.Err().
func (k *KV) Barrier(ctx context.Context) error {
	if err := k.stopped(); err != nil {
		return err
	}
	if err := k.log.Barrier(ctx); err != nil {
		return err
	}
	hw := k.log.Status().ReadableHW
	for {
		k.mu.RLock()
		n := k.next
		k.mu.RUnlock()
		if n >= hw {
			return nil
		}
		// The offsets below hw may hold only control entries (the
		// barrier's own, at least), which the KV never sees: then its
		// state is already that of hw. Otherwise wait for it to apply
		// the first entry there, and look again.
		var first *replog.Entry
		for e, err := range k.log.ReadRange(ctx, n, hw) {
			if err != nil {
				return err
			}
			first = &e
			break
		}
		if first == nil {
			return nil
		}
		if err := k.waitApplied(ctx, first.Offset); err != nil {
			return err
		}
	}
}

// Keys returns the keys with a value on this node that begin with
// prefix, sorted (as Get, possibly stale: Barrier first for a
// linearizable list). It looks at every key.
func (k *KV) Keys(prefix string) []string {
	k.mu.RLock()
	var out []string
	for key, r := range k.state {
		if r.Live() && strings.HasPrefix(key, prefix) {
			out = append(out, key)
		}
	}
	k.mu.RUnlock()
	slices.Sort(out)
	return out
}

// History returns the changes to key that this node still holds, oldest
// first, newest last: those whose entries are at or above the log start,
// read back from the log, and always the key's current value (or
// deletion), even when retention deleted its entry. As Get, it may be
// stale.
//
// Errors: ErrInvalidKey; ErrNotFound when the KV knows no change of key;
// the Log's read errors; ctx.Err().
func (k *KV) History(ctx context.Context, key string) ([]Change, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	k.mu.RLock()
	r := k.state[key]
	var cur Change
	var revs []uint64
	if r != nil {
		cur = Change{Key: key, Value: slices.Clone(r.Value), Revision: r.Rev, Deleted: r.Deleted}
		revs = slices.Clone(r.Revs)
	}
	k.mu.RUnlock()
	if r == nil {
		return nil, fmt.Errorf("%w: %q", ErrNotFound, key)
	}
	var out []Change
	for _, rev := range revs {
		if rev == cur.Revision {
			out = append(out, cur)
			continue
		}
		c, ok, err := k.readChange(ctx, rev)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, c)
		}
	}
	return out, nil
}

// readChange reads the change at rev back from the log; false if the
// entry is gone (below the log start).
func (k *KV) readChange(ctx context.Context, rev uint64) (Change, bool, error) {
	for e, err := range k.log.ReadRange(ctx, rev, rev+1) {
		if errors.Is(err, replog.ErrOutOfRange) {
			return Change{}, false, nil
		}
		if err != nil {
			return Change{}, false, err
		}
		o, err := kvstate.DecodeEntry(e.Key, e.Data)
		if err != nil {
			return Change{}, false, fmt.Errorf("replog: kv: the entry at revision %d: %w", rev, err)
		}
		if o.Op == kvstate.OpDelete {
			return Change{Key: o.Key, Revision: rev, Deleted: true}, true, nil
		}
		return Change{Key: o.Key, Value: o.Value, Revision: rev}, true, nil
	}
	return Change{}, false, nil
}

// Stats returns the KV's counters.
func (k *KV) Stats() Stats {
	k.mu.RLock()
	defer k.mu.RUnlock()
	s := k.stats
	s.Next = k.next
	for _, r := range k.state {
		if r.Live() {
			s.Keys++
		}
	}
	return s
}
