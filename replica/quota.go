package replica

import (
	"math/bits"
	"slices"
	"time"

	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/replica/internal/bugs"
)

// The replication quota (docs/protocol.md R73; Kafka's
// leader.replication.throttled.rate). A fetcher catching up from far behind
// (an empty observer, a wiped voter's new incarnation, a voter back after
// a long absence) asks for full FetchMaxBytes responses as fast as it can
// write them, and the leader reads every one from its store: left alone it
// takes the leader's disk and CPU from the appends. So fetches below the
// leader's HW, from fetchers that do not keep up (Kafka's ISR test: not
// caught up within FetchTimeout, fetchPace) and that the HW does not
// need, share a token bucket on the core's
// clock: CatchUpBytesPerSecond, with room for a tenth of a second's worth
// (at least one full response). A fetch is served while the bucket holds
// any token and costs the bytes it is sent (the bucket may go below zero:
// a response is never cut to fit, so the first entry is always whole, R9);
// with none it waits, in arrival order, until tokens come back, or until
// its MaxWait, when it is answered without entries (the fetcher keeps its
// leader contact). Never throttled: a fetch at or above the HW, a fetcher
// in step (a follower under load is always a little behind: the commit
// path), and a voter's fetch when fewer than a majority of voters would
// be in step without it (the HW needs it, so starving it would stop
// commits).

// catchUpQuota is a leader's bucket and the fetches waiting on it. It
// lives in leaderState: a new leadership starts with a full bucket.
type catchUpQuota struct {
	started bool
	// tokens are the bytes that may be served now; below zero after a
	// response larger than what was left.
	tokens int64
	at     time.Time // the last refill
	// waiting are the fetches over the quota, in arrival order, each with
	// the time it is answered without entries. One per replica.
	waiting []throttledFetch
	// lag is each fetcher's progress in this leadership (notePace).
	lag map[string]*fetchPace
}

// fetchPace is what the leader knows of one fetcher's pace, Kafka's way
// (Replica.updateFetchState): caughtUp is the last time the fetcher was
// caught up: its fetch asked for the leader's LEO, or for at least the
// LEO the leader had at its previous fetch (then it was caught up as of
// that one). A follower that keeps up with a loaded leader is always
// behind the LEO by what arrived since its fetch, never by more than one
// fetch round; one catching up from far behind (responses cut at
// FetchMaxBytes) never reaches the LEO of its previous fetch.
type fetchPace struct {
	dir        string // the incarnation it is for (R56)
	caughtUp   time.Time
	prevAt     time.Time
	prevLEO    uint64
	caughtOnce bool
}

type throttledFetch struct {
	parkedFetch
	since time.Time
}

// QuotaStats are the replication quota's counters (R73), summed over this
// replica's leaderships.
type QuotaStats struct {
	// Throttled counts the fetches that waited for the quota; Time is
	// the total time they waited.
	Throttled uint64
	Time      time.Duration
	// Bytes counts the entry bytes (len(Data)+protocol.EntryOverhead
	// each) served to fetches under the quota.
	Bytes uint64
}

// quotaBurst is how many tokens the bucket holds at most: a tenth of a
// second's worth, and at least one full response (else a fetch could
// never be served without debt).
func (r *Replica) quotaBurst() int64 {
	return max(int64(r.cfg.CatchUpBytesPerSecond)/10, int64(r.cfg.FetchMaxBytes))
}

// refillQuota adds the tokens earned since the last refill, up to the
// burst.
func (r *Replica) refillQuota() {
	q := &r.leader.quota
	burst := r.quotaBurst()
	if !q.started {
		q.started, q.tokens, q.at = true, burst, r.now
		return
	}
	elapsed := r.now.Sub(q.at)
	if elapsed <= 0 {
		return
	}
	q.at = r.now
	if elapsed >= 10*time.Second { // the bucket is full by then whatever the rate
		q.tokens = burst
		return
	}
	hi, lo := bits.Mul64(uint64(elapsed), uint64(r.cfg.CatchUpBytesPerSecond))
	earned, _ := bits.Div64(hi, lo, uint64(time.Second))
	q.tokens = min(q.tokens+int64(earned), burst)
}

// notePace records valid fetch req from from in the fetcher's pace (on
// every fetch past R5, before it is answered).
func (r *Replica) notePace(from string, req *protocol.FetchRequest) {
	q := &r.leader.quota
	if q.lag == nil {
		q.lag = make(map[string]*fetchPace)
	}
	p := q.lag[from]
	if p == nil || p.dir != req.ReplicaDirID {
		p = &fetchPace{dir: req.ReplicaDirID} // a new incarnation starts behind
		q.lag[from] = p
	}
	leo := r.log.LEO()
	switch {
	case req.FetchOffset >= leo:
		p.caughtUp, p.caughtOnce = r.now, true
	case !p.prevAt.IsZero() && req.FetchOffset >= p.prevLEO:
		p.caughtUp, p.caughtOnce = p.prevAt, true
	}
	p.prevAt, p.prevLEO = r.now, leo
}

// inStep reports whether fetcher id keeps up (at directory dir, or, with
// dir "", at the directory it fetched from last): it fetched within
// FetchTimeout, and was caught up (fetchPace) within FetchTimeout.
func (r *Replica) inStep(id, dir string) bool {
	p := r.leader.quota.lag[id]
	return p != nil && (dir == "" || p.dir == dir) && p.caughtOnce &&
		r.now.Sub(p.prevAt) < r.cfg.FetchTimeout && r.now.Sub(p.caughtUp) < r.cfg.FetchTimeout
}

// throttles reports whether req, a valid fetch from from, falls under the
// quota: a quota is set, the fetch is below the HW, the fetcher does not
// keep up (inStep), and the HW does not need it.
func (r *Replica) throttles(from string, req *protocol.FetchRequest) bool {
	if r.cfg.CatchUpBytesPerSecond < 0 || req.FetchOffset >= r.hw || r.inStep(from, req.ReplicaDirID) {
		return false
	}
	return !r.isVoterDir(from, req.ReplicaDirID) || !r.neededForHW(from) || bugs.ThrottleNeededVoter
}

// neededForHW reports whether voter from is needed for the HW to move:
// fewer than a majority of the voters in force are in step without it
// (the leader itself, if a voter, and the other voters that keep up at
// the directory the set records: inStep).
func (r *Replica) neededForHW(from string) bool {
	n := 0
	for _, v := range r.voters {
		switch {
		case v == from:
		case v == r.id:
			if r.voter {
				n++
			}
		default:
			if p := r.leader.quota.lag[v]; p != nil && r.isVoterDir(v, p.dir) && r.inStep(v, "") {
				n++
			}
		}
	}
	return n < r.majority
}

// quotaWaits reports whether a fetch under the quota must wait: the bucket
// holds no token. It parks req (from from, its wait starting now) if so.
func (r *Replica) quotaWaits(from string, req *protocol.FetchRequest) bool {
	r.refillQuota()
	if r.leader.quota.tokens > 0 {
		return false
	}
	wait := time.Duration(req.MaxWaitMs) * time.Millisecond
	if wait <= 0 {
		// A fetch asking not to wait still waits for the quota, as long
		// as this leader parks its own fetches: answered at once without
		// entries, it would come back at once, with no pause.
		wait = r.cfg.FetchMaxWait
	}
	q := &r.leader.quota
	q.waiting = slices.DeleteFunc(q.waiting, func(t throttledFetch) bool { return t.from == from })
	q.waiting = append(q.waiting, throttledFetch{parkedFetch{from: from, req: req, deadline: r.now.Add(wait)}, r.now})
	return true
}

// chargeQuota takes the bytes of entries, sent to a fetch under the quota,
// from the bucket.
func (r *Replica) chargeQuota(entries []protocol.Entry) {
	var n int64
	for _, e := range entries {
		n += int64(len(e.Data) + protocol.EntryOverhead)
	}
	r.leader.quota.tokens -= n
	r.quotaStats.Bytes += uint64(n)
}

// serveThrottled answers, in arrival order, the fetches waiting for the
// quota while it has tokens (and any no longer under it), and without
// entries those whose MaxWait has passed (on Tick and in Ready).
func (r *Replica) serveThrottled() {
	q := &r.leader.quota
	if len(q.waiting) == 0 {
		return
	}
	r.refillQuota()
	waiting := q.waiting
	q.waiting = nil
	var kept []throttledFetch
	for _, t := range waiting {
		switch {
		case q.tokens > 0 || !r.throttles(t.from, t.req):
			// Tokens came back, or the fetch is no longer under the quota
			// (a voter the HW now needs).
			r.quotaStats.Throttled++
			r.quotaStats.Time += r.now.Sub(t.since)
			r.respondFetch(t.from, t.req)
		case !r.now.Before(t.deadline):
			r.quotaStats.Throttled++
			r.quotaStats.Time += r.now.Sub(t.since)
			r.sendFetchOK(t.from, t.req, nil)
		default:
			kept = append(kept, t)
		}
	}
	// respondFetch parks nothing while tokens last; anything parked
	// meanwhile came after the kept ones.
	q.waiting = append(kept, q.waiting...)
}

// throttledCopy handles a new valid fetch from from while a fetch of its is
// waiting for the quota, as R8 does a parked one: a delayed copy of an
// earlier fetch is answered at once, without entries, and leaves the
// waiting one alone (it reports true: done); any other fetch replaces the
// waiting one, which is dropped unanswered.
func (r *Replica) throttledCopy(from string, req *protocol.FetchRequest) bool {
	q := &r.leader.quota
	i := slices.IndexFunc(q.waiting, func(t throttledFetch) bool { return t.from == from })
	if i < 0 {
		return false
	}
	if earlierFetchID(req.FetchID, q.waiting[i].req.FetchID) {
		r.sendFetchOK(from, req, nil)
		return true
	}
	q.waiting = slices.Delete(q.waiting, i, i+1)
	return false
}

// QuotaStats returns the replication quota's counters (R73).
func (r *Replica) QuotaStats() QuotaStats { return r.quotaStats }
