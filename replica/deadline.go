package replica

import (
	"math/bits"
	"time"

	"github.com/replog-io/replog/replica/internal/bugs"
)

// NextDeadline returns the earliest instant (core time) at which a Tick,
// and the Ready after it, could change anything: the zero time when
// nothing timed is pending. It is the contract of docs/protocol.md R96: a
// round with no events (Tick, then Ready) at any time before
// NextDeadline() sends no message, issues no write, resolves no proposal
// and changes no Status. A shell ticks its core only at this instant and
// when an event arrives (R97).
//
// It is meant to be read after a Ready, as of the state that Ready left.
// A deadline at or before the core's clock means something is due now.
// Some terms are earlier than the event they guard (the instant a
// condition starts to be checked, not the instant it acts): a Tick at the
// deadline may do nothing, and the next deadline is later. It allocates
// nothing and costs O(voters + peers that fetched + parked fetches).
func (r *Replica) NextDeadline() time.Time {
	if r.err != nil {
		return time.Time{}
	}
	var d deadline
	now := r.now
	// Tick's own checks: a term at or before now is due (what set it
	// came after the Tick of the round).
	d.tick(r.checkpointDue())
	if len(r.forwarded) > 0 {
		d.tick(r.forwarded[0].deadline) // appended in deadline order
	}
	switch r.role {
	case RoleLeader:
		r.leaderDeadlines(&d)
	case RoleFollower, RoleObserver:
		if r.quiesced() {
			// R99: nothing is timed while the quiescent fetch is out;
			// the node wakes the log when the leader's node falls
			// silent (PeerSilent) or a quiescent message may be lost
			// (Resync).
			break
		}
		d.tick(r.electionDeadline)
		if r.fetch.Outstanding() {
			d.tick(r.fetch.SentAt().Add(r.fetchRetryTimeout()))
		}
		r.fetchDeadlines(&d)
	case RoleProspective, RoleCandidate:
		d.tick(r.electionDeadline)
		if r.bootstrap {
			d.tick(r.resendAt)
		}
	}
	// Ready's checks ran at now, after the round's events: a term at or
	// before now was checked already and waits for an event, not time.
	if r.catalogBarrierWanted() {
		d.ready(r.catalogBarrier.sentAt.Add(r.catalogBarrierRetry()), now) // R82's retry, quiesced or not
	}
	if t := &r.keys; len(t.producers)+len(t.ids) > 0 {
		d.ready(t.nextSweep, now)
	}
	if r.keys.budgeted && r.keys.applied < r.log.LEO() {
		// The key table's catch-up stopped at its budget: the next
		// round goes on with it (what waits for the table waits for
		// that, not for an event).
		d.tick(now)
	}
	return d.at
}

// deadline collects the earliest of a NextDeadline's terms.
type deadline struct{ at time.Time }

// tick adds t, a term that Tick checks; the zero time is no term.
func (d *deadline) tick(t time.Time) {
	if !t.IsZero() && (d.at.IsZero() || t.Before(d.at)) {
		d.at = t
	}
}

// ready adds t, a term that Ready checks, if it is after now.
func (d *deadline) ready(t, now time.Time) {
	if t.After(now) {
		d.tick(t)
	}
}

// checkpointDue is when maybeCheckpoint would write the HW checkpoint
// (zero: it has nothing to write).
func (r *Replica) checkpointDue() time.Time {
	if r.checkpointed && min(r.hw, r.log.durableEnd) == r.lastCheckpointHW {
		return time.Time{}
	}
	return r.lastCheckpointAt.Add(hwCheckpointInterval)
}

// leaderDeadlines adds a leader's terms: parked fetches' MaxWait, the
// fetches waiting for the quota, check-quorum, the transfer's deadline,
// the first FetchTimeout of the leadership (R68), and the instant each
// peer's last fetch stops counting (check-quorum, Status.CaughtUp and
// Observers, R68's reports).
func (r *Replica) leaderDeadlines(d *deadline) {
	ls := r.leader
	now := r.now
	if !bugs.DeadlineIgnoresParked {
		for i := range ls.parked {
			d.tick(ls.parked[i].deadline)
		}
	}
	r.quotaDeadlines(d)
	ft := r.cfg.FetchTimeout
	for _, v := range r.voters {
		// A voter whose quiescent fetch is parked is heard from until
		// PeerSilent says otherwise (heardAt): no term of its own, so a
		// quiesced log keeps no deadline (R99).
		if v != r.id && !r.parksQuiescent(v) {
			d.ready(ls.lastFetch[v].Add(ft), now)
		}
	}
	for id, t := range ls.anyFetch {
		if !r.parksQuiescent(id) {
			d.ready(t.Add(ft), now)
		}
	}
	if ls.transfer != nil {
		d.ready(ls.transfer.deadline, now)
	}
	d.ready(ls.since.Add(ft), now)
}

// quotaDeadlines adds the terms of the fetches waiting for the quota
// (R73): each one's MaxWait, the instant the bucket holds a token again,
// and the instants fetchers stop being in step (a voter the HW then
// needs is served at once).
func (r *Replica) quotaDeadlines(d *deadline) {
	q := &r.leader.quota
	if len(q.waiting) == 0 {
		return
	}
	for i := range q.waiting {
		d.tick(q.waiting[i].deadline)
	}
	if rate := r.cfg.CatchUpBytesPerSecond; rate > 0 && q.tokens <= 0 {
		// refillQuota earns floor(elapsed*rate/1s) tokens: one more than
		// the debt takes ceil((1-tokens)*1s/rate).
		hi, lo := bits.Mul64(uint64(1-q.tokens), uint64(time.Second))
		lo, c := bits.Add64(lo, uint64(rate-1), 0)
		hi += c
		if hi < uint64(rate) {
			n, _ := bits.Div64(hi, lo, uint64(rate))
			if n < uint64(10*time.Second) {
				d.tick(q.at.Add(time.Duration(n)))
			}
		}
		d.tick(q.at.Add(10 * time.Second)) // refillQuota fills it by then
	}
	ft := r.cfg.FetchTimeout
	for _, p := range q.lag {
		d.ready(p.prevAt.Add(ft), r.now)
		d.ready(p.caughtUp.Add(ft), r.now)
	}
}

// fetchDeadlines adds a follower's or observer's fetch terms that Ready
// checks: the snapshot request's retry and the contact fetch while
// pulling, the backoff after finding no leader, and R77's contact fetch.
func (r *Replica) fetchDeadlines(d *deadline) {
	now := r.now
	if r.snapshotFetching() {
		if sf := &r.snap; sf.waiting {
			d.ready(sf.sentAt.Add(r.fetchRetryTimeout()), now)
		}
		if !bugs.SnapshotNoContact && !bugs.NoContactFetch && r.leaderID != "" && r.persistedSeq >= r.barrierSeq {
			d.ready(r.fetch.SentAt().Add(r.cfg.FetchMaxWait), now) // snapshotContact
		}
		return
	}
	d.ready(r.fetchBackoff, now)
	if !bugs.NoContactFetch && r.leaderID != "" && !r.fetchReady() &&
		(!r.fetch.Outstanding() || r.fetch.Contact()) && r.persistedSeq >= r.barrierSeq {
		d.ready(r.fetch.SentAt().Add(r.cfg.FetchMaxWait), now)
	}
}
