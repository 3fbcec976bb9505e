package fetcher

import (
	"time"

	"github.com/replog-io/replog/protocol"
)

// Log is the follower's view of its own log (written plus being written).
type Log interface {
	// LEO is the log end offset.
	LEO() uint64
	// LastEntryEpoch is the epoch of the entry at LEO()-1 (0 if none).
	LastEntryEpoch() uint64
	// EndOffsetForEpoch is Store.EndOffsetForEpoch on the view: the largest
	// epoch e ≤ epoch in the epoch map and the first offset after its
	// entries; (0, log start) when epoch is below every row.
	EndOffsetForEpoch(epoch uint64) (e uint64, end uint64)
}

// Action is what the follower must do with a fetch response.
type Action uint8

// Actions.
const (
	// Drop: ignore the response (stale, from the wrong node, inconsistent).
	Drop Action = iota
	// Append: append Entries (possibly none) and learn HighWatermark and
	// LogStart from the leader; then fetch again.
	Append
	// Truncate: truncate the log to TruncateTo (KIP-279: may repeat), then
	// fetch again.
	Truncate
	// NewEpoch: the responder names a higher epoch (Epoch) and its leader
	// (LeaderID, possibly ""): adopt it durably, then fetch again.
	NewEpoch
	// NewLeader: the leader of the current epoch is LeaderID (learned from a
	// not-leader answer or from a leader answering a round-robin fetch).
	NewLeader
	// LeaderGone: the node taken for the leader of the current epoch says it
	// is not the leader: forget it and look for the leader.
	LeaderGone
	// Retry: the responder knows no leader: fetch from another node after a
	// back-off.
	Retry
	// OutOfRange: the fetch offset is below the leader's log start
	// (LogStart).
	OutOfRange
	// Contact: the leader's OK answer to the fetch a late answer already
	// stood in for (the late-answer rule): nothing to apply, but it proves
	// the leader alive after that fetch was sent, so it counts as leader
	// contact. A fetch is outstanding still (the one built after). Also
	// the leader's answer to a contact fetch (BuildContact), which
	// consumes it: its entries are not applied (they start at the
	// durable end, not the LEO), only HighWatermark, which is at most
	// that fetch's offset.
	Contact
)

// String names the action.
func (a Action) String() string {
	switch a {
	case Drop:
		return "drop"
	case Contact:
		return "contact"
	case Append:
		return "append"
	case Truncate:
		return "truncate"
	case NewEpoch:
		return "new-epoch"
	case NewLeader:
		return "new-leader"
	case LeaderGone:
		return "leader-gone"
	case Retry:
		return "retry"
	case OutOfRange:
		return "out-of-range"
	}
	return "action(?)"
}

// Decision is the outcome of Handle.
type Decision struct {
	Action Action
	// Entries to append (Append). They start at the log's LEO.
	Entries []protocol.Entry
	// HighWatermark and LogStart are the leader's (Append, OutOfRange).
	HighWatermark uint64
	LogStart      uint64
	// TruncateTo is the truncation point (Truncate); always below the LEO.
	TruncateTo uint64
	// Epoch and LeaderID name the epoch/leader to adopt (NewEpoch,
	// NewLeader).
	Epoch    uint64
	LeaderID string
	// Reason says why a response was dropped (for logs).
	Reason string
}

// Fetcher tracks one follower's outstanding fetch. At most one fetch is
// outstanding: a response is accepted only if it carries that fetch's ID and
// comes from the node it was sent to.
type Fetcher struct {
	replicaID string
	maxBytes  uint32
	maxWaitMs uint32

	nextID      uint64
	outstanding uint64 // 0: none
	// expired: the outstanding fetch is due for a retry (TimeOut). Its
	// answer is still taken until the replacement is built: the shell may
	// step that answer in the same round as the tick that timed it out,
	// before Ready builds the replacement.
	expired     bool
	target      string
	epoch       uint64
	fetchOffset uint64
	sentAt      time.Time
	rr          int
	// prev is the fetch the outstanding one replaced (after a retry or a
	// redirect by a hint). Its late OK answer is taken for the outstanding
	// fetch (the late-answer rule in Handle).
	prev sentFetch
	// cancelled: the last fetch was cancelled, so the next Build records
	// no prev.
	cancelled bool
	// consumed is the fetch the late-answer rule last answered with its
	// predecessor's answer: its own OK answer, when it comes, is leader
	// contact (Contact) and nothing more.
	consumed sentFetch
	// contact: the outstanding (or last) fetch is a contact fetch
	// (BuildContact). noWait: the next Build asks not to be parked.
	contact, noWait bool
	// quiescent: the outstanding (or last) fetch is marked quiescent
	// (MarkQuiescent).
	quiescent bool
}

// sentFetch is what identifies a fetch's question.
type sentFetch struct {
	id          uint64
	target      string
	epoch       uint64
	fetchOffset uint64
	contact     bool
}

// New returns a Fetcher for replicaID. firstID seeds the fetch IDs (pick it
// at random so that a restarted replica does not reuse IDs of its previous
// life); maxBytes and maxWait go into every request.
func New(replicaID string, maxBytes uint32, maxWait time.Duration, firstID uint64) *Fetcher {
	if firstID == 0 {
		firstID = 1
	}
	return &Fetcher{
		replicaID: replicaID,
		maxBytes:  maxBytes,
		maxWaitMs: uint32(maxWait / time.Millisecond),
		nextID:    firstID,
	}
}

// Build returns a fetch for target at epoch from the log's end and makes it
// the outstanding one (replacing any other). The caller must only build a
// fetch when its log is durable up to log.LEO() (the leader counts the
// fetch offset as this replica's LEO), or else set the request's
// HasDurableOffset and DurableOffset to its durable end (R70): a fetch
// that repeats the outstanding one's offset with a higher durable offset
// replaces it like any other Build, and an answer to the replaced one is
// taken for it (the late-answer rule).
func (f *Fetcher) Build(target string, epoch uint64, log Log, now time.Time) *protocol.FetchRequest {
	req := f.build(target, epoch, log.LEO(), log.LastEntryEpoch(), now, false)
	if f.noWait {
		// The contact answer before this fetch took the HW only up to its
		// own offset, and the leader now takes us for having seen its
		// HW: a parked fetch would leave ours behind for FetchMaxWait.
		req.MaxWaitMs, f.noWait = 0, false
	}
	return req
}

// BuildContact returns a contact fetch (docs/protocol.md R77) for target
// at epoch and makes it the outstanding one, like Build: a fetch from
// offset, the end of what the caller's log holds durably, and lastEpoch,
// the epoch of its entry at offset-1, for a follower whose next fetch
// waits for its writer. It asks for one entry and not to be parked, and
// its answer is only contact (Handle's Contact, with the HW at most
// offset): the follower already holds what follows offset, in its
// writer. The caller sets the request's durable offset to offset too.
func (f *Fetcher) BuildContact(target string, epoch, offset, lastEpoch uint64, now time.Time) *protocol.FetchRequest {
	req := f.build(target, epoch, offset, lastEpoch, now, true)
	req.MaxBytes, req.MaxWaitMs = 1, 0
	f.noWait = true
	return req
}

// Contact reports whether the outstanding (or last) fetch is a contact
// fetch.
func (f *Fetcher) Contact() bool { return f.contact }

// MarkQuiescent records that req, the fetch Build just returned, goes out
// marked quiescent (docs/protocol.md R99), and marks it so.
func (f *Fetcher) MarkQuiescent(req *protocol.FetchRequest) {
	req.Quiescent, f.quiescent = true, true
}

// Quiescent reports whether a quiescent fetch is outstanding (not due for
// a retry): while it is, the leader parks it without a deadline and the
// follower's liveness of its leader comes from the node's contact.
func (f *Fetcher) Quiescent() bool { return f.quiescent && f.Outstanding() }

func (f *Fetcher) build(target string, epoch, offset, lastEpoch uint64, now time.Time, contact bool) *protocol.FetchRequest {
	id := f.nextID
	f.nextID++
	if f.nextID == 0 {
		f.nextID = 1
	}
	f.prev = sentFetch{}
	if last := id - 1; last != 0 && f.sentAt != (time.Time{}) && !f.cancelled {
		f.prev = sentFetch{id: last, target: f.target, epoch: f.epoch, fetchOffset: f.fetchOffset, contact: f.contact}
	}
	f.cancelled = false
	f.outstanding = id
	f.expired = false
	f.target = target
	f.epoch = epoch
	f.fetchOffset = offset
	f.contact = contact
	f.quiescent = false
	f.sentAt = now
	return &protocol.FetchRequest{
		FetchID:          id,
		ReplicaID:        f.replicaID,
		CurrentEpoch:     epoch,
		FetchOffset:      offset,
		LastFetchedEpoch: lastEpoch,
		MaxBytes:         f.maxBytes,
		MaxWaitMs:        f.maxWaitMs,
	}
}

// Outstanding reports whether a fetch awaits its response and is not due
// for a retry: when it reports false, the caller builds the next fetch.
func (f *Fetcher) Outstanding() bool { return f.outstanding != 0 && !f.expired }

// TimeOut marks the outstanding fetch as due for a retry (or to be
// redirected): Outstanding reports false, but an answer to it is still
// taken until Build replaces it, and afterwards an OK answer through the
// late-answer rule (see Handle), if the replacement is in the same epoch.
// Cancel, unlike TimeOut, forgets the fetch.
func (f *Fetcher) TimeOut() {
	if f.outstanding != 0 {
		f.expired = true
	}
}

// Target is the node the outstanding (or last) fetch went to.
func (f *Fetcher) Target() string { return f.target }

// SentAt is when the outstanding (or last) fetch was built.
func (f *Fetcher) SentAt() time.Time { return f.sentAt }

// Cancel forgets the outstanding fetch: its response will be dropped, even
// after the next Build (no late-answer rule for it).
func (f *Fetcher) Cancel() { f.outstanding, f.expired, f.cancelled = 0, false, true }

// RoundRobin picks the next voter other than self, for a follower that
// knows no leader. It returns "" if there is none.
func (f *Fetcher) RoundRobin(voters []string, self string) string {
	for range voters {
		v := voters[f.rr%len(voters)]
		f.rr++
		if v != self {
			return v
		}
	}
	return ""
}

// Handle turns a fetch response from node from into a decision. epoch and
// leader are the follower's current epoch and known leader ("" if none);
// log is its log view. A response that does not answer the outstanding fetch
// is dropped; any other response consumes the outstanding fetch, so the
// caller fetches again once it has carried out the decision.
func (f *Fetcher) Handle(from string, resp *protocol.FetchResponse, epoch uint64, leader string, log Log) Decision {
	id := resp.FetchID
	target, fetchOffset := f.target, f.fetchOffset
	// The late-answer rule: an OK answer to the fetch the outstanding one
	// replaced, from the node that fetch went to, in the same epoch, is
	// taken for the outstanding fetch. A leader whose parked answers always
	// land just after the retry fires gets through, and a fetch redirected
	// by a leader hint (which may be false) loses nothing if the replaced
	// fetch had gone to the real leader. Only OK answers: an error (say
	// "not leader" from a node that was still campaigning when it answered)
	// may be older than what this replica has learned since, and taking it
	// would undo that (a follower forgot the leader it had just learned and
	// dropped that leader's answer to the retry). An OK answer is checked
	// against the replaced fetch's own offset. A contact fetch's answer
	// stands in for nothing: it carries no entries from the LEO.
	contact := f.contact
	if f.outstanding != 0 && id == f.prev.id && id != f.outstanding && resp.Error == protocol.FetchOK &&
		from == f.prev.target && f.prev.epoch == f.epoch && !f.prev.contact {
		f.consumed = sentFetch{id: f.outstanding, target: f.target, epoch: f.epoch}
		id, target, fetchOffset, contact = f.outstanding, f.prev.target, f.prev.fetchOffset, false
	} else if c := f.consumed; id == c.id && id != 0 && from == c.target && c.epoch == epoch &&
		resp.Error == protocol.FetchOK && resp.Epoch == epoch && resp.LeaderID == from && leader == from {
		// The consumed fetch's own answer, from the leader we follow in
		// our epoch: the leader is alive (the liveness rule the simulation
		// checks counts exactly this answer), its data came already.
		f.consumed = sentFetch{}
		return Decision{Action: Contact}
	}
	if f.outstanding == 0 || id != f.outstanding || from != target {
		return Decision{Action: Drop, Reason: "not the outstanding fetch"}
	}
	f.outstanding, f.expired = 0, false
	if resp.Epoch > epoch {
		lid := resp.LeaderID
		if lid == f.replicaID {
			lid = ""
		}
		return Decision{Action: NewEpoch, Epoch: resp.Epoch, LeaderID: lid}
	}
	if f.epoch != epoch {
		return Decision{Action: Drop, Reason: "fetch sent in another epoch"}
	}
	if resp.Epoch < epoch {
		if resp.Error == protocol.FetchNotLeader {
			// A lagging node: it cannot name our leader.
			return Decision{Action: Retry, Reason: "responder in an older epoch"}
		}
		return Decision{Action: Drop, Reason: "stale epoch"}
	}
	switch resp.Error {
	case protocol.FetchNotLeader:
		switch {
		case from == leader:
			return Decision{Action: LeaderGone, Reason: "leader says it is not the leader"}
		case resp.LeaderID != "" && resp.LeaderID != f.replicaID && leader == "":
			return Decision{Action: NewLeader, Epoch: epoch, LeaderID: resp.LeaderID}
		default:
			return Decision{Action: Retry, Reason: "responder knows no other leader"}
		}
	case protocol.FetchFencedEpoch:
		// Fenced with an epoch not above ours: inconsistent.
		return Decision{Action: Drop, Reason: "fenced at our own epoch"}
	}
	// The remaining outcomes come only from a leader of our epoch.
	if resp.LeaderID != from {
		return Decision{Action: Drop, Reason: "leader answer from a non-leader"}
	}
	if leader == "" {
		return Decision{Action: NewLeader, Epoch: epoch, LeaderID: from}
	}
	if leader != from {
		return Decision{Action: Drop, Reason: "not from the leader of our epoch"}
	}
	if contact {
		switch resp.Error {
		case protocol.FetchOK:
			// The leader checked our log up to the fetch offset only, so
			// the HW it tells counts only up to there.
			return Decision{Action: Contact, HighWatermark: min(resp.HighWatermark, fetchOffset)}
		case protocol.FetchDivergingEpoch, protocol.FetchOffsetOutOfRange:
			return Decision{Action: Contact} // the next fetch from the LEO finds it again
		}
	}
	switch resp.Error {
	case protocol.FetchOK:
		return handleOK(resp, log, fetchOffset)
	case protocol.FetchDivergingEpoch:
		return handleDiverging(resp, log)
	case protocol.FetchOffsetOutOfRange:
		return Decision{Action: OutOfRange, LogStart: resp.LogStartOffset}
	}
	return Decision{Action: Drop, Reason: "unknown fetch error"}
}

// handleOK checks an OK answer to a fetch from fetchOffset against the log.
func handleOK(resp *protocol.FetchResponse, log Log, fetchOffset uint64) Decision {
	leo := log.LEO()
	if leo != fetchOffset {
		return Decision{Action: Drop, Reason: "log changed since the fetch"}
	}
	last := log.LastEntryEpoch()
	for i, e := range resp.Entries {
		if e.Offset != leo+uint64(i) {
			return Decision{Action: Drop, Reason: "entries not contiguous with the LEO"}
		}
		if e.Epoch < last || e.Epoch == 0 {
			return Decision{Action: Drop, Reason: "entry epochs go backwards"}
		}
		if e.Epoch > resp.Epoch {
			// No leader holds entries of an epoch after its own.
			return Decision{Action: Drop, Reason: "entry of a later epoch than the leader's"}
		}
		if !e.Type.Known() {
			return Decision{Action: Drop, Reason: "unknown entry type"}
		}
		if e.Type == protocol.EntryVoters {
			// A voter set the core could not read would halt it when
			// stored: never store one.
			if _, err := protocol.DecodeVoters(e.Data); err != nil {
				return Decision{Action: Drop, Reason: "malformed voter set"}
			}
		}
		last = e.Epoch
	}
	return Decision{
		Action:        Append,
		Entries:       resp.Entries,
		HighWatermark: resp.HighWatermark,
		LogStart:      resp.LogStartOffset,
	}
}

// handleDiverging applies KIP-279: truncate to the smaller of the leader's
// end offset for the diverging epoch and our own end offset for it. Each
// round only ever moves the LEO down, so repeated rounds terminate.
func handleDiverging(resp *protocol.FetchResponse, log Log) Decision {
	_, ownEnd := log.EndOffsetForEpoch(resp.DivergingEpoch)
	to := min(resp.DivergingEndOffset, ownEnd)
	if to >= log.LEO() {
		return Decision{Action: Drop, Reason: "diverging answer would not truncate"}
	}
	return Decision{Action: Truncate, TruncateTo: to, Epoch: resp.DivergingEpoch, LogStart: resp.LogStartOffset}
}
