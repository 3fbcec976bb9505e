package replica

import (
	"bytes"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/replica/internal/bugs"
)

// The catalog of named logs (docs/protocol.md R80–R82): which logs a node
// of the cluster hosts, keyed state of its default log exactly as cursors
// are. A log change is a keyed EntryState proposal of one StateLog record
// (a create carries the log's spec, a delete none); every replica applies
// it to its key table, undoes it on truncation, and retention copies a
// live log's record above the log start (R81). The spec is opaque here:
// the root encodes it (options, replicas, an incarnation token).

// unknownCompleteness is keyTable.completeFrom before the table is known
// to cover every live log (R82).
const unknownCompleteness = math.MaxUint64

// LogRecord is one named log of the catalog (R80).
type LogRecord struct {
	Name string
	// Spec is the log's spec as its creator proposed it. The caller must
	// not modify it.
	Spec []byte
	// Offset is the offset of the entry that created the log: its
	// incarnation (a log deleted and created again under the same name
	// has another).
	Offset uint64
}

// logState is a named log in the key table: its spec, the offset of the
// entry that created it, and the offset of its newest record (the create
// or a copy, R81).
type logState struct {
	spec    []byte
	created uint64
	at      uint64
}

// ProposeLogChange asks to create log name with spec (non-empty) or to
// delete it (spec empty): a keyed proposal (key must carry a producer, so
// that a retried change never lands after a newer one) of one EntryState
// entry, forwarded by a follower as cursor commits are (R80). The leader
// decides it against its newest key table, uncommitted entries included:
// a create of a name the catalog holds fails with an error wrapping
// ErrLogExists, a delete of a name it does not hold with ErrUnknownLog
// (nothing appended either way); a producer's retry is answered with the
// original's offset first (R63). Below feature level 9 (R68) it fails
// with ErrFeatureLevelTooLow; a name that protocol.ValidLogName refuses, a
// spec above protocol.MaxLogSpecLength or a key without a producer with
// ErrTooLarge. The Ack carries the entry's offset once committed.
func (r *Replica) ProposeLogChange(id uint64, key protocol.Key, name string, spec []byte) {
	if r.err == nil {
		if err := logChangeInvalid(key, name, spec); err != nil {
			r.acks = append(r.acks, Ack{ID: id, Err: err})
			return
		}
		if r.level < protocol.FeatureLevelNamedLogs {
			r.acks = append(r.acks, Ack{ID: id, Err: r.levelTooLow()})
			return
		}
	}
	rec := protocol.EncodeStateRecords(nil, protocol.StateRecord{Kind: protocol.StateLog, Name: name, Data: spec})
	r.proposeKeyed(id, protocol.EntryState, key, [][]byte{rec})
}

func (r *Replica) levelTooLow() error {
	return fmt.Errorf("%w: a log change needs level %d, the cluster runs at %d", ErrFeatureLevelTooLow, protocol.FeatureLevelNamedLogs, r.level)
}

// logChangeInvalid checks what a log change carries, on its own.
func logChangeInvalid(key protocol.Key, name string, spec []byte) error {
	if err := protocol.ValidLogName(name); err != nil {
		return fmt.Errorf("%w: %w", ErrTooLarge, err)
	}
	if len(spec) > protocol.MaxLogSpecLength {
		return fmt.Errorf("%w: a log spec is at most %d bytes, not %d", ErrTooLarge, protocol.MaxLogSpecLength, len(spec))
	}
	if key.Producer == 0 {
		return fmt.Errorf("%w: a log change needs a producer key", ErrTooLarge)
	}
	return nil
}

// logChangeRecord returns the one StateLog record of a log change's
// records, if that is what they are.
func logChangeRecord(typ protocol.EntryType, records [][]byte) (protocol.StateRecord, bool) {
	if typ != protocol.EntryState || len(records) != 1 || len(records[0]) == 0 || protocol.StateKind(records[0][0]) != protocol.StateLog {
		return protocol.StateRecord{}, false
	}
	rs, err := protocol.DecodeStateRecords(records[0])
	if err != nil || len(rs) != 1 {
		return protocol.StateRecord{}, false
	}
	return rs[0], true
}

// refuseLogChange is the leader's part of R80 for a keyed proposal that
// is a log change, after R63's and R64's checks: it reports whether the
// change was refused (answered, nothing appended). The newest table
// decides: a leader never truncates its own log while it leads, so what
// it appended and has not committed yet will commit or this leadership
// ends first (and the proposal with it, answered unknown).
func (r *Replica) refuseLogChange(p proposal, typ protocol.EntryType, records [][]byte) bool {
	rec, ok := logChangeRecord(typ, records)
	if !ok {
		return false
	}
	var err error
	var code protocol.AppendError
	_, held := r.keys.logs[rec.Name]
	if bugs.CatalogCommittedOnly {
		held = r.committedLog(rec.Name)
	}
	switch {
	case r.level < protocol.FeatureLevelNamedLogs:
		err, code = r.levelTooLow(), protocol.AppendFeatureLevelTooLow
	case len(rec.Data) > 0 && held:
		err, code = fmt.Errorf("%w: %q", ErrLogExists, rec.Name), protocol.AppendLogExists
	case len(rec.Data) == 0 && !held:
		err, code = fmt.Errorf("%w: %q", ErrUnknownLog, rec.Name), protocol.AppendUnknownLog
	default:
		return false
	}
	if p.local {
		r.acks = append(r.acks, Ack{ID: p.id, Err: err})
		return true
	}
	r.memo.set(doneKey{p.from, p.requestID}, forwardMemo{state: forwardDeclined, code: code})
	r.send(p.from, &protocol.AppendResponse{RequestID: p.requestID, Error: code, LeaderID: r.id})
	return true
}

// committedLog reports whether the catalog as of the HW holds name (the
// undo records of the entries above it hold what was there before).
func (r *Replica) committedLog(name string) bool {
	l := r.keys.logs[name]
	for i := len(r.keys.undo) - 1; i >= 0; i-- {
		u := &r.keys.undo[i]
		if u.off < r.hw {
			break
		}
		if u.kind == protocol.StateLog && u.name == name {
			l = u.prevLog
		}
	}
	return l != nil
}

// applyLog applies a StateLog record of the entry at off (keyed: a
// proposal, whose entry creates the log; else a leader's copy, whose
// record names the creating offset).
func (t *keyTable) applyLog(off uint64, rec protocol.StateRecord, keyed bool) {
	t.pushUndo(keyUndo{off: off, kind: protocol.StateLog, name: rec.Name, prevLog: t.logs[rec.Name]})
	if len(rec.Data) == 0 {
		delete(t.logs, rec.Name)
		return
	}
	created := off
	if !keyed {
		created = rec.First
	}
	t.logs[rec.Name] = &logState{spec: bytes.Clone(rec.Data), created: created, at: off}
}

// Logs returns the catalog as of this replica's readable HW (what is
// committed and durable here), sorted by name, or nil while it is not
// known (LogsVersion 0). A change publishes a new slice and a published
// one is never written again: the caller may keep it and hand it to
// another goroutine, but must not modify it or its specs.
func (r *Replica) Logs() []LogRecord { return r.catalog }

// LogsVersion changes whenever the catalog Logs returns changes (a
// counter); it is 0 while the catalog is not known: after New until the
// key table has read the log up to the readable HW and covers every live
// log there (R82).
func (r *Replica) LogsVersion() uint64 { return r.catalogVersion }

// LogsAsOf returns the readable HW as of which Logs holds: the catalog is
// the one the log below it makes (ok false while it is not known). It
// lags the readable HW while the key table cannot tell (after a reset,
// R53, until R82 holds again).
func (r *Replica) LogsAsOf() (hw uint64, ok bool) { return r.catalogAt, r.catalogVersion != 0 }

// publishCatalog is R82: with the table applied up to floor (the readable
// HW), holding the undo records of every change at or above it (a table
// restored from a checkpoint lacks those below the readable HW it was made
// at, which a restart's HW checkpoint may lag) and covering every live log
// there, the catalog as of floor becomes what Logs returns. It is
// recomputed only when a StateLog change reached the floor or the table
// is new.
func (r *Replica) publishCatalog(floor uint64) {
	t := &r.keys
	if t.applied < floor || t.completeFrom > floor || t.undoFloor > floor {
		return
	}
	if !t.logsDirty {
		r.catalogAt = floor
		return
	}
	t.logsDirty = false
	asOf := maps.Clone(t.logs)
	for i := len(t.undo) - 1; i >= 0; i-- {
		u := &t.undo[i]
		if u.kind != protocol.StateLog {
			continue
		}
		if u.prevLog == nil {
			delete(asOf, u.name)
		} else {
			asOf[u.name] = u.prevLog
		}
	}
	cat := make([]LogRecord, 0, len(asOf))
	for _, name := range slices.Sorted(maps.Keys(asOf)) {
		l := asOf[name]
		cat = append(cat, LogRecord{Name: name, Spec: l.spec, Offset: l.created})
	}
	r.catalogAt = floor
	if r.catalogVersion != 0 && slices.EqualFunc(cat, r.catalog, func(a, b LogRecord) bool {
		return a.Name == b.Name && a.Offset == b.Offset && bytes.Equal(a.Spec, b.Spec)
	}) {
		return
	}
	r.catalog = cat
	r.catalogVersion++
}

// noteLeaderHW is R82's part of a fetch answer from the leader: once the
// leader's HW covers an entry of its own epoch that this log holds, that
// HW is at or above every entry committed before this epoch and every
// copy this leader committed before a deletion (its HW never moves back),
// so a table rebuilt from a later log start holds every live log below
// it.
func (r *Replica) noteLeaderHW(hw uint64) {
	t := &r.keys
	if t.completeFrom != unknownCompleteness || hw <= r.log.logStart || hw > r.log.LEO() || r.log.epochAt(hw-1) != r.epoch {
		return
	}
	t.completeFrom = hw
}

// catalogBarrier is the barrier a follower sends for R82's bound: the
// leader and epoch it went to and when; and the leader and epoch of the
// last answer that found this follower caught up with nothing of the
// leader's epoch to wait for (noteCatalogIdle).
type catalogBarrier struct {
	leader     string
	epoch      uint64
	sentAt     time.Time
	idleLeader string
	idleEpoch  uint64
}

// noteCatalogIdle records, on an answer from the leader, whether this
// follower waits for R82's bound in vain: the answer brought nothing, this
// log ends at the leader's HW, and its last entry is of an earlier epoch,
// so no HW of the leader covers an entry of its epoch until one is
// appended. An answer that finds an entry of the epoch on its way (or
// behind the HW) needs no barrier: its commit gives the bound.
func (r *Replica) noteCatalogIdle(from string, entries int, hw uint64) {
	b := &r.catalogBarrier
	leo := r.log.LEO()
	if from == r.leaderID && entries == 0 && hw == leo && (leo <= r.log.logStart || r.log.epochAt(leo-1) != r.epoch) {
		b.idleLeader, b.idleEpoch = from, r.epoch
	} else {
		b.idleLeader, b.idleEpoch = "", 0
	}
}

// catalogBarrierWanted reports whether this replica needs R82's bound and
// has a leader that could give it but will not unless something is
// appended: a follower (or observer) whose table does not yet cover every
// live log, and whose last answer from that leader found it idle. At every level: below the level of
// named logs the catalog is empty, but this replica cannot tell that from
// the level it has finalized (a level row may be above its HW), and the
// catalog stays unknown without the bound all the same.
func (r *Replica) catalogBarrierWanted() bool {
	return !bugs.CatalogNoBarrier && r.err == nil && (r.role == RoleFollower || r.role == RoleObserver) &&
		r.leaderID != "" && r.keys.completeFrom == unknownCompleteness &&
		r.catalogBarrier.idleLeader == r.leaderID && r.catalogBarrier.idleEpoch == r.epoch
}

// catalogBarrierRetry is how long a catalog barrier may take before the
// follower sends another: as long as a forwarded proposal waits for its
// answer, then the fetch that brings the HW past it.
func (r *Replica) catalogBarrierRetry() time.Duration {
	return 2*r.cfg.FetchTimeout + r.fetchRetryTimeout()
}

// maybeCatalogBarrier is the liveness half of R82: R82's bound needs the
// leader's HW to cover an entry of its own epoch, and a leader elected on
// a fully committed log appends nothing of its epoch until someone writes,
// which an idle (quiescent, R99) log may never do. So a follower that
// needs the bound forwards one barrier (R50) to its leader, once per
// leader and epoch, again after catalogBarrierRetry if the bound still is
// not reached (lost, refused, or the leader's HW not yet past it). It is
// no caller's proposal: it is not in r.forwarded, so its answer matches
// nothing and no Ack is made; a barrier is invisible to readers.
func (r *Replica) maybeCatalogBarrier() {
	if !r.catalogBarrierWanted() {
		return
	}
	b := &r.catalogBarrier
	if b.leader == r.leaderID && b.epoch == r.epoch && r.now.Sub(b.sentAt) < r.catalogBarrierRetry() {
		return
	}
	b.leader, b.epoch, b.sentAt = r.leaderID, r.epoch, r.now
	reqID := r.nextRequestID
	r.nextRequestID++
	r.send(r.leaderID, &protocol.AppendRequest{RequestID: reqID, Epoch: r.epoch, Type: protocol.EntryControl, Records: [][]byte{nil}})
}
