package replica

import (
	"time"

	"github.com/replog-io/replog/fetcher"
	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/replica/internal/bugs"
)

// fetchRetryBackoff is how long a follower that found no leader waits
// before its next round-robin fetch.
func (r *Replica) fetchRetryBackoff() time.Duration {
	return max(r.cfg.ElectionTimeout/4, time.Millisecond)
}

// fetchRetryTimeout is how long a follower waits for a fetch's answer
// before it sends another: the leader may park the fetch for FetchMaxWait,
// and ElectionTimeout covers the network both ways.
func (r *Replica) fetchRetryTimeout() time.Duration {
	return r.cfg.FetchMaxWait + r.cfg.ElectionTimeout
}

// tickFollower fires a voter's election timer and resends a fetch whose
// response did not come (messages get lost).
func (r *Replica) tickFollower() {
	if r.quiesced() {
		return // R99: the node's contact with the leader stands in for its answers, until PeerSilent
	}
	if !r.now.Before(r.electionDeadline) {
		r.becomeProspective()
		return
	}
	r.retryFetch()
}

// tickObserver is tickFollower for a non-voter. An observer never
// campaigns: when its timer fires it forgets a leader it cannot reach and
// looks for the current one among the voters.
func (r *Replica) tickObserver() {
	if !r.now.Before(r.electionDeadline) {
		if r.leaderID != "" {
			r.logger.Debug("observer lost its leader", "leader", r.leaderID)
			r.becomeFollower(r.epoch, "")
		}
		r.resetElectionTimer()
	}
	r.retryFetch()
}

// retryFetch times out a fetch whose response did not come in
// fetchRetryTimeout.
func (r *Replica) retryFetch() {
	if r.fetch.Outstanding() && r.now.Sub(r.fetch.SentAt()) >= r.fetchRetryTimeout() {
		// Due for a retry, but not forgotten: its answer may be stepped in
		// this very round, before Ready builds the replacement.
		r.fetch.TimeOut()
		// A hint naming the node that did not answer has been tried; one
		// that came while the fetch was out has not.
		if r.leaderID == "" && r.fetch.Target() == r.fetchHint {
			r.fetchHint = ""
		}
	}
}

// maybeFetch sends the next fetch when none is outstanding and the
// writes it depends on are persisted: the epoch we fetch in must be
// durable, and, below FeatureLevelPipelinedFetch, every entry too (a
// leader of the previous release counts the fetch offset as our durable
// LEO). At that level only entry appends may still be in flight: the
// fetch says how far the log is durable, and the leader counts that
// (R70, R71).
func (r *Replica) maybeFetch() {
	if r.now.Before(r.fetchBackoff) {
		return
	}
	if r.fetch.Outstanding() && (!r.fetch.Contact() || !r.fetchReady()) {
		r.maybeSupersedeFetch()
		return
	}
	// (A contact fetch never holds up the fetch it stood in for: R77.)
	if !r.fetchReady() {
		r.maybeContactFetch()
		return
	}
	// A hint is tried once; then the known leader, or the voters in turn.
	target, restand := r.fetchHint, r.restand
	r.fetchHint, r.restand = "", false
	if target == "" {
		target, restand = r.leaderID, false
	}
	if target == "" {
		target = r.fetch.RoundRobin(r.voters, r.id)
	}
	if target == "" {
		return
	}
	r.sendFetch(target, restand)
}

// pipelining reports whether this follower may fetch with entry writes in
// flight (R71): only once the cluster runs at FeatureLevelPipelinedFetch,
// where every node reads the durable offset.
func (r *Replica) pipelining() bool {
	return r.level >= protocol.FeatureLevelPipelinedFetch
}

// fetchReady reports whether the writes a fetch depends on are persisted.
// A pipelining follower fetches with one answer's entries in its writer,
// not two: the next batch is fetched while the previous one syncs, so it
// fetches about once per sync, as without pipelining, not once per round
// trip with ever smaller answers.
func (r *Replica) fetchReady() bool {
	if r.pipelining() {
		return r.persistedSeq >= r.barrierSeq && len(r.log.marks) <= 1
	}
	return r.persistedSeq >= r.stateSeq
}

// maybeContactFetch is R77: a follower whose next fetch waits for its
// writer's entry appends still fetches, from its durable end, at least
// every FetchMaxWait, so that its leader keeps hearing from it (R4, R27)
// and it from the leader (R22) while its disk is slow: the leader hears
// from a follower whose fetch it parks at least that often, and R49's
// FetchTimeout covers one lost message on top. The fetch offset is
// durable, so a leader of any release counts nothing that is not (R70,
// and the fetch offset of a fetch without a durable offset). Only entries
// may be in flight: an epoch, a truncation or a reset not yet durable
// holds it as it holds every fetch (R71).
func (r *Replica) maybeContactFetch() {
	if bugs.NoContactFetch || r.leaderID == "" || r.persistedSeq < r.barrierSeq ||
		r.now.Sub(r.fetch.SentAt()) < r.cfg.FetchMaxWait {
		return
	}
	off := r.log.durableEnd
	if bugs.ContactFetchLEO {
		off = r.log.LEO()
	}
	var last uint64
	if off > 0 {
		last = r.log.epochAt(off - 1)
	}
	req := r.fetch.BuildContact(r.leaderID, r.epoch, off, last, r.now)
	r.fillFetch(req, false)
	if bugs.ContactFetchLEO {
		req.DurableOffset = off
	}
	r.send(r.leaderID, req)
}

// maybeSupersedeFetch is R71's second fetch: the outstanding fetch to our
// leader said a durable offset below its fetch offset, and everything up
// to the fetch offset is durable now. The leader may have parked that
// fetch, and parked, it would not tell the leader what became durable for
// up to FetchMaxWait: a fresh fetch of the same offset says so, and
// replaces the parked one (the leader keeps one parked fetch per replica).
// One per outstanding fetch at most, and none at idle (nothing is in
// flight then): an answer already on its way to the earlier fetch is
// taken for this one (the fetcher's late-answer rule).
func (r *Replica) maybeSupersedeFetch() {
	leo := r.log.LEO()
	if !r.pipelining() || r.sentDurable >= leo || r.log.durableEnd < leo || r.leaderID == "" ||
		r.fetch.Target() != r.leaderID || !r.fetchReady() {
		return
	}
	r.sendFetch(r.leaderID, false)
}

// sendFetch builds a fetch to target and sends it.
func (r *Replica) sendFetch(target string, restand bool) {
	req := r.fetch.Build(target, r.epoch, &r.log, r.now)
	r.fillFetch(req, restand)
	if r.quiesceNext && target == r.leaderID && !restand && r.quiescence() {
		r.fetch.MarkQuiescent(req) // R99
		r.quiesceStats.Sent++
	}
	r.quiesceNext = false
	r.send(target, req)
}

// fillFetch sets what every fetch of this replica says besides its
// position.
func (r *Replica) fillFetch(req *protocol.FetchRequest, restand bool) {
	req.ReplicaDirID = r.dirID
	req.Restand = restand
	if l := r.cfg.SupportedFeatureLevel; l > protocol.BaseFeatureLevel {
		req.FeatureLevel = uint8(l) // R68; absent means the base level
	}
	// R70: the leader counts no more than this. Below the pipelined level
	// it is the fetch offset (every entry is durable).
	req.HasDurableOffset, req.DurableOffset = true, r.log.durableEnd
	r.sentDurable = r.log.durableEnd
}

// handleFetchResponse is docs/protocol.md §3.3 (follower side): the fetcher decides,
// the replica carries it out.
//
// Only an answer to a fetch this replica is waiting for counts for
// anything, its epoch included: a leader or candidate has no fetch
// outstanding, and an answer the fetcher drops is dropped whole (else any
// one message with a wrong FetchID and a higher epoch would depose the
// leader).
func (r *Replica) handleFetchResponse(from string, resp *protocol.FetchResponse) {
	r.applyFetchDecision(from, resp, r.fetch.Handle(from, resp, r.epoch, r.leaderID, &r.log))
}

// prospectiveFetchResponse takes the answer to a fetch sent before this
// replica turned prospective.
func (r *Replica) prospectiveFetchResponse(from string, resp *protocol.FetchResponse) {
	d := r.fetch.Handle(from, resp, r.epoch, r.leaderID, &r.log)
	switch d.Action {
	case fetcher.Append, fetcher.Truncate, fetcher.OutOfRange, fetcher.Contact:
		// Our leader answered a fetch sent before we turned
		// prospective: it is alive, follow it again.
		r.becomeFollower(r.epoch, r.leaderID)
	case fetcher.Drop, fetcher.Retry, fetcher.LeaderGone:
		return
	}
	r.applyFetchDecision(from, resp, d)
}

// dropFetchResponse drops a fetch response reaching a leader or candidate.
func (r *Replica) dropFetchResponse(from string, resp *protocol.FetchResponse) {
	r.logger.Trace("dropping a fetch response: no fetch outstanding", "from", from, "resp", resp)
}

// applyFetchDecision carries out the fetcher's decision d on resp.
func (r *Replica) applyFetchDecision(from string, resp *protocol.FetchResponse, d fetcher.Decision) {
	switch d.Action {
	case fetcher.Drop:
		r.logger.Trace("dropping fetch response", "from", from, "reason", d.Reason, "resp", resp)
	case fetcher.Contact:
		r.leaderContact()
		if n := len(resp.Entries); !bugs.QuiesceAfterContact && (resp.HighWatermark > r.log.LEO() || n > 0 && resp.Entries[n-1].Offset >= r.log.LEO()) {
			// The leader holds more than we do: the next fetch, due once
			// the writer is done, is not quiescent, though the answer
			// before this one left us caught up (R99: a quiescent fetch
			// follows an answer that shows nothing new).
			r.quiesceNext = false
		}
		if d.HighWatermark > r.leaderHW { // a contact fetch's answer (R77)
			r.leaderHW = d.HighWatermark
			r.updateFollowerHW()
			r.settleRole() // a removal that commits ends an outgoing replica's candidacy
		}
	case fetcher.NewEpoch:
		r.becomeFollower(d.Epoch, d.LeaderID)
	case fetcher.NewLeader:
		r.becomeFollower(r.epoch, d.LeaderID)
		if d.LeaderID == from {
			// The leader's own answer to our fetch: it is alive now.
			r.leaderContact()
		}
	case fetcher.LeaderGone:
		r.awaitAnswersFrom(from) // what we forwarded to it stays (R59)
		r.becomeFollower(r.epoch, "")
		r.fetchBackoff = r.now.Add(r.fetchRetryBackoff())
		// The leader itself says it no longer leads our epoch (it resigned,
		// or it restarted and lost its leader state): there is no leader of
		// this epoch left to protect, so grant pre-votes and campaign soon
		// instead of waiting out FetchTimeout (a whole cluster restarted
		// at once then elects in about an ElectionTimeout: R18).
		r.lastLeaderContact = time.Time{}
		if d := r.now.Add(r.randDuration(r.cfg.ElectionTimeout)); r.role == RoleFollower && d.Before(r.electionDeadline) {
			r.electionDeadline = d
		}
	case fetcher.Retry:
		r.fetchHint = ""
		r.fetchBackoff = r.now.Add(r.fetchRetryBackoff())
	case fetcher.Truncate:
		r.leaderContact()
		if d.Epoch == 0 && d.LogStart > 0 {
			// The leader has no epoch at or below our last one because its
			// log starts (retention) after where it could tell us how far
			// we agree (R53). With no log start to explain it, the same
			// answer is a violation: the plain truncation below goes below
			// the HW, which halts (R43).
			r.divergedBelowLogStart(d.LogStart, resp)
		} else {
			r.logger.Info("diverging log: truncating", "to", d.TruncateTo, "leo", r.log.LEO(), "leader_epoch", d.Epoch)
			r.truncate(d.TruncateTo)
		}
		r.settleRole() // the set in force may be one the truncation uncovered (R55)
	case fetcher.Append:
		r.leaderContact()
		if len(d.Entries) > 0 {
			r.appendEntries(d.Entries)
			r.settleRole() // a set among them is in force once appended (R55)
		}
		r.leaderHW = max(r.leaderHW, d.HighWatermark)
		r.noteLeaderHW(d.HighWatermark) // R82
		r.updateFollowerHW()
		r.settleRole() // a removal that commits ends an outgoing replica's candidacy
		r.followLogStart(d.LogStart)
		r.noteQuiescence(from, len(d.Entries), d.HighWatermark)
		r.noteCatalogIdle(from, len(d.Entries), d.HighWatermark)
	case fetcher.OutOfRange:
		r.leaderContact()
		r.resetToLogStart(d.LogStart, resp)
		r.settleRole() // the reset takes the leader's sets below its log start (R55)
	}
}

// divergedBelowLogStart answers a leader whose log starts at start, after
// every epoch of ours, with its voter-set rows below start and the epoch
// of its entry below start (R53): what we
// hold from start on is of epochs it
// does not have, so never committed; below start everything is committed
// and deleted there, or never committed. We never truncate below start
// (entries there may be committed: a truncation would leave our log start
// below committed entries we no longer hold); we end with an empty log at
// start, which the leader serves from there (last epoch 0). If our HW
// covers start, we hold the committed log up to it and only follow its log
// start; otherwise we reset to it, and our HW waits for the leader's
// answer, as after an out-of-range answer. If our own log starts at or
// after start, what we hold is not the leader's at all: it goes down to our
// log start (a violation, halting, if our HW is above that).
func (r *Replica) divergedBelowLogStart(start uint64, resp *protocol.FetchResponse) {
	r.logger.Info("diverging below the leader's log start: emptying the log up to it",
		"leo", r.log.LEO(), "log_start", r.log.logStart, "hw", r.hw, "leader_log_start", start)
	switch {
	case start <= r.log.logStart:
		r.truncate(r.log.logStart)
	case r.hw >= start:
		r.truncate(start)
		r.followLogStart(start)
	default:
		if !r.snapshotFirst(resp.LeaderID, resp, true) { // else the reset follows the transfer (R92)
			r.resetLog(start, true, resp.LogStartVoters, resp.LogStartEpoch)
		}
	}
}

// updateFollowerHW sets HW = min(durable LEO, leader's HW), never
// backwards. It moves no role: its caller then calls settleRole (a removal
// that commits ends an outgoing replica's candidacy).
func (r *Replica) updateFollowerHW() {
	if hw := min(r.log.durableEnd, r.leaderHW); hw > r.hw {
		r.hw = hw
	}
}
