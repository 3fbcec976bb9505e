package replica

import (
	"slices"
	"time"

	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/replica/internal/bugs"
)

// leaderState is what a leader keeps for its epoch only: it is dropped at
// every change of leadership, so remote LEOs of an earlier epoch never count.
type leaderState struct {
	// epochStartLEO is the LEO when the epoch began: the HW moves only past
	// it (an entry of this epoch must commit first; Raft §5.4.2).
	epochStartLEO uint64
	// since is when this leadership began.
	since time.Time
	// remote is each other voter's LEO, from its latest valid fetch in this
	// epoch. Absent: not heard from yet.
	remote map[string]uint64
	// lastFetch is when each voter last fetched in this epoch (check-quorum).
	lastFetch map[string]time.Time
	// observerFetch is when each non-voter last fetched in this epoch: its
	// fetch session, which lets it forward appends. Never counted for the
	// HW or check-quorum.
	observerFetch map[string]time.Time
	// sentHW is the HW last sent to each fetching replica: a fetch from a
	// replica that has not seen the current HW is answered at once.
	sentHW map[string]uint64
	// sentLogStart is the log start last sent to each fetching replica:
	// a parked fetch is answered when the log start has passed it, so
	// that a follower whose fetch is parked with no deadline (a
	// quiescent one, R99) still learns of a prefix deletion (R51).
	sentLogStart map[string]uint64
	// fetchDir, fetchOffset and anyFetch are the directory, offset and time
	// of each replica's latest valid fetch in this epoch, voter or not:
	// what a voter change needs to know (R58).
	fetchDir    map[string]string
	fetchOffset map[string]uint64
	anyFetch    map[string]time.Time
	// fetchLevel is the feature level each replica supports as its valid
	// fetches in this epoch say (R68): the lowest one said within
	// FetchTimeout, so that a late fetch of an earlier incarnation (a node
	// since rolled back) does not speak for the node for long.
	fetchLevel map[string]levelSeen
	// lastFetchID is each replica's last FetchID: a fetch that does not
	// follow it (a restarted replica, or one that lost our answer) may have
	// missed the current HW, so it is answered at once.
	lastFetchID map[string]uint64
	// served is the last fetch of each replica answered with entries
	// that was ahead of its durable offset: R71's fresh fetch repeating
	// it is answered without them.
	served map[string]servedFetch
	parked []parkedFetch
	// pending proposals in offset order.
	pending []proposal
	// transfer is the leadership transfer under way, if any (R59,
	// transfer.go): while it is, nothing new is appended.
	transfer *transferState
	// silent holds the voters whose quiescent fetch is parked and whose
	// node the shell reported silent since it arrived (PeerSilent, R99).
	silent map[string]bool
	// quota is the replication quota's bucket and waiting fetches (R73,
	// quota.go); backlog the uncommitted bytes appended (R74, backlog.go).
	quota   catchUpQuota
	backlog backlog

	hwBuf []uint64
}

// servedFetch names a fetch answered with entries: its ID and offset.
type servedFetch struct{ id, offset uint64 }

type parkedFetch struct {
	from     string
	req      *protocol.FetchRequest
	deadline time.Time
	// quiescent: parked with no deadline (R99), answered only for
	// entries, a new HW, a resync or the end of this leadership.
	quiescent bool
}

// proposal is a batch the leader appended at [first, end), acknowledged
// once end ≤ HW.
type proposal struct {
	id        uint64 // local proposal ID
	local     bool
	from      string // forwarding replica (local == false)
	requestID uint64
	first     uint64
	end       uint64
	// dup: a caller ID's duplicate (R64), answered with the original's
	// offset and ErrDuplicate.
	dup bool
}

func newLeaderState(r *Replica, leo uint64) *leaderState {
	ls := &leaderState{
		epochStartLEO: leo,
		since:         r.now,
		remote:        make(map[string]uint64),
		lastFetch:     make(map[string]time.Time),
		observerFetch: make(map[string]time.Time),
		sentHW:        make(map[string]uint64),
		sentLogStart:  make(map[string]uint64),
		lastFetchID:   make(map[string]uint64),
		served:        make(map[string]servedFetch),
		fetchDir:      make(map[string]string),
		fetchOffset:   make(map[string]uint64),
		anyFetch:      make(map[string]time.Time),
		fetchLevel:    make(map[string]levelSeen),
		silent:        make(map[string]bool),
		hwBuf:         make([]uint64, 0, len(r.voters)),
	}
	// Grace period: every voter counts as heard from at the start.
	for _, v := range r.voters {
		ls.lastFetch[v] = r.now
	}
	return ls
}

// tickLeader answers parked fetches whose wait is over. Check-quorum runs
// in Ready (checkQuorum), after the round's messages were stepped.
func (r *Replica) tickLeader() {
	ls := r.leader
	kept := ls.parked[:0]
	for _, p := range ls.parked {
		if !p.quiescent && !r.now.Before(p.deadline) {
			r.respondFetch(p.from, p.req)
		} else {
			kept = append(kept, p)
		}
	}
	clear(ls.parked[len(kept):])
	ls.parked = kept
}

// checkQuorum makes a leader resign when fewer than a majority of voters
// (itself included) fetched from it within FetchTimeout. It runs in Ready,
// not in Tick: a tick that crosses the deadline comes first in a shell's
// round, and a fetch that arrived in that same round (stepped after the
// tick) must still count, or a leader a majority reaches resigns whenever
// the fetches keeping it arrive just before its deadline.
func (r *Replica) checkQuorum() {
	n := 0
	for _, v := range r.voters {
		if v == r.id && r.voter || v != r.id && r.now.Sub(r.heardAt(v)) < r.cfg.FetchTimeout {
			n++
		}
	}
	if n < r.majority {
		r.logger.Warn("check-quorum failed: resigning", "epoch", r.epoch, "heard_from", n)
		r.becomeFollower(r.epoch, "")
		r.lastLeaderContact = time.Time{}
	}
}

// serveParked answers parked fetches that can make progress: new entries
// (even not yet durable here) or a HW the replica has not seen.
func (r *Replica) serveParked() {
	ls := r.leader
	if len(ls.parked) == 0 {
		return
	}
	leo := r.log.LEO()
	kept := ls.parked[:0]
	for _, p := range ls.parked {
		if p.req.FetchOffset < leo || r.hw > ls.sentHW[p.from] || r.log.logStart > ls.sentLogStart[p.from] && !bugs.QuiesceMissesLogStart {
			r.unparkQuiescent(p)
			r.respondFetch(p.from, p.req)
		} else {
			kept = append(kept, p)
		}
	}
	clear(ls.parked[len(kept):])
	ls.parked = kept
}

// fenceFetchRequest is the part of docs/protocol.md §3.2 every role does the
// same (stepCommon): a voter's fetch naming a later epoch moves this replica
// to that epoch first (if it leads, it is stale); a non-voter's is answered
// not-leader, since only voters' word moves epochs. It reports whether the
// fetch goes on to the role's step function.
func (r *Replica) fenceFetchRequest(from string, req *protocol.FetchRequest) bool {
	if req.ReplicaID != from {
		return false
	}
	if req.CurrentEpoch > r.epoch {
		if !r.isVoterDir(from, req.ReplicaDirID) {
			if r.role == RoleLeader && req.Restand && r.formerVoter(from, req.ReplicaDirID) && !r.behind(req.LastFetchedEpoch, req.FetchOffset) && !bugs.NoRemovedRestand {
				// R20 for a removed voter: its failed candidacy left it
				// in a later epoch, and it was removed before it could
				// learn so from our log. It can follow no leader of an
				// epoch below its own, so it would never fetch its
				// removal: stand again at once
				// in the epoch after its, as for a voter. Only an
				// incarnation our log recorded as a voter, told by a
				// voter of its set that we lead (Restand), is heard.
				r.logger.Info("fenced by a removed voter's later epoch: standing again at once", "from", from, "epoch", req.CurrentEpoch)
				r.becomeFollower(req.CurrentEpoch, "")
				r.becomeCandidate()
				return false
			}
			// Only voters' word moves epochs: a non-voter learns epochs
			// from voters, so it has nothing to teach us.
			r.logger.Debug("fetch from a non-voter in a later epoch", "from", from, "epoch", req.CurrentEpoch)
			r.send(from, &protocol.FetchResponse{FetchID: req.FetchID, Epoch: r.epoch, Error: protocol.FetchNotLeader, Quiescent: req.Quiescent})
			return false
		}
		// The fetcher knows a newer epoch: if we lead, we are stale.
		if r.role == RoleFollower && from == r.leaderID {
			r.awaitAnswersFrom(from) // our leader moved on (R59)
		}
		wasLeader := r.role == RoleLeader
		r.becomeFollower(req.CurrentEpoch, "")
		if wasLeader && req.Restand && r.voter && !r.behind(req.LastFetchedEpoch, req.FetchOffset) {
			// R20: a voter whose failed candidacy left it in a later
			// epoch, told by a voter in contact with us that we lead, can
			// never follow us. Our log is at least as up to date as its:
			// stand at once in the epoch after its; our followers (our
			// own request, R24) and it grant.
			r.logger.Info("fenced by a voter's later epoch: standing again at once", "from", from, "epoch", req.CurrentEpoch)
			r.becomeCandidate()
		}
	}
	return true
}

// behind reports whether a log ending at (lastEpoch, leo) is more up to
// date than ours (R21).
func (r *Replica) behind(lastEpoch, leo uint64) bool {
	own := r.log.voteEpoch()
	return lastEpoch > own || lastEpoch == own && leo > r.log.LEO()
}

// answerNotLeader is a non-leader's answer to a fetch, naming leader
// (the leader it follows; "" for a prospective or candidate replica, which
// has lost it), so that the fetcher can find the leader.
func (r *Replica) answerNotLeader(from string, req *protocol.FetchRequest, leader string) {
	r.send(from, &protocol.FetchResponse{
		FetchID: req.FetchID, LeaderID: leader, Epoch: r.epoch, Error: protocol.FetchNotLeader, Quiescent: req.Quiescent,
	})
}

// serveFetch is docs/protocol.md §3.2 (leader side), for a fetch that passed
// fenceFetchRequest.
func (r *Replica) serveFetch(from string, req *protocol.FetchRequest) {
	ls := r.leader
	if req.CurrentEpoch < r.epoch {
		r.send(from, &protocol.FetchResponse{
			FetchID: req.FetchID, LeaderID: r.id, Epoch: r.epoch, Error: protocol.FetchFencedEpoch,
			HighWatermark: r.hw, LogStartOffset: r.log.logStart, Quiescent: req.Quiescent,
		})
		return
	}
	// Only voters count for check-quorum and the HW; a non-voter is served
	// as an observer. A voter is a node at its directory (R56): the same ID
	// fetching from another directory is a new incarnation, and what the
	// old one acknowledged no longer counts (its disk is gone).
	voter := r.isVoterDir(from, req.ReplicaDirID)
	delete(ls.silent, from) // heard from again
	if voter {
		ls.lastFetch[from] = r.now
	} else {
		ls.observerFetch[from] = r.now
		if r.isVoter(from) {
			// Its LEO no longer counts; its last fetch time stays, for
			// automatic replacement to see whether the old incarnation
			// still fetches (autoReplace).
			delete(ls.remote, from)
		}
	}
	if req.FetchOffset < r.log.logStart {
		// Out of range before any divergence check: everything the
		// follower holds is below our log start, and it resets (R53).
		r.respondFetch(from, req)
		return
	}
	e, end := r.log.EndOffsetForEpoch(req.LastFetchedEpoch)
	// Last epoch 0: the follower's log is empty (a reset, or everything
	// deleted by retention), and everything below its offset was committed:
	// it agrees with us up to our LEO, also above our log start (R53).
	empty := req.LastFetchedEpoch == 0 && req.FetchOffset <= r.log.LEO()
	if !empty && (e != req.LastFetchedEpoch || end < req.FetchOffset) {
		// The remote LEO is not updated from a diverging fetch.
		resp := &protocol.FetchResponse{
			FetchID: req.FetchID, LeaderID: r.id, Epoch: r.epoch, Error: protocol.FetchDivergingEpoch,
			DivergingEpoch: e, DivergingEndOffset: end, HighWatermark: r.hw, LogStartOffset: r.log.logStart,
			Quiescent: req.Quiescent,
		}
		if e == 0 && r.log.logStart > 0 {
			// The follower may reset to our log start (R53): it records
			// our voter sets below it (R55).
			resp.LogStartVoters, resp.LogStartEpoch = r.logStartVoters(), r.log.logStartEpoch()
		}
		r.send(from, resp)
		return
	}
	held := req.FetchOffset // R70: what the fetcher holds durably
	if req.HasDurableOffset && !bugs.CountFetchOffset {
		held = min(held, req.DurableOffset)
	}
	ls.fetchDir[from], ls.fetchOffset[from], ls.anyFetch[from] = req.ReplicaDirID, held, r.now
	r.noteFetchLevel(from, max(int(req.FeatureLevel), protocol.BaseFeatureLevel))
	r.notePace(from, req) // R73
	if voter {
		ls.remote[from] = held
		r.updateLeaderHW()
		r.resignIfRemoved()
	}
	if r.role != RoleLeader {
		return // resigned (R58)
	}
	if r.transferring() { // R59: nothing new is appended during a transfer
		r.transferFetch(from, voter)
	} else {
		r.autoReplace(from, req.ReplicaDirID)
	}
	// A newer fetch replaces the replica's parked one without answering it:
	// a follower has one fetch outstanding and takes an answer to an older
	// one only when it asked the same question as the newer one (fetcher's
	// late-answer rule), which the newer one's answer answers too. (Answering
	// the replaced fetch would be worse than useless: the follower would take
	// it for the newer one's answer and fetch again at once, replacing that
	// one, in a loop with no wait.) A delayed copy of an earlier fetch is
	// answered at once and leaves the parked one alone: the follower may be
	// waiting for that one.
	if r.throttledCopy(from, req) { // the same for a fetch waiting for the quota (R73)
		return
	}
	if p := ls.parkedFrom(from); p != nil && earlierFetchID(req.FetchID, p.req.FetchID) {
		r.respondFetch(from, req)
		return
	}
	if p := ls.parkedFrom(from); p != nil && p.quiescent && !earlierFetchID(p.req.FetchID, req.FetchID) && !bugs.QuiesceReplacedUnanswered {
		// A parked quiescent fetch replaced by a fetch that is not the
		// same life's next (an ID shortly after it) is answered, never
		// dropped: it has no deadline, and its follower neither retries
		// it nor lets its timers run (R99). The fetch replacing it is one
		// the follower sent in an earlier life, delayed past its restart
		// (its IDs start anew at random): the follower still waits for
		// the parked one, and nothing counts as lost (R100), since both
		// messages arrived. The same life's next fetch is dropped as any
		// replaced fetch is: the follower built it, so it waits for the
		// parked one no more, and an answer would be taken for the new
		// one (the fetcher's late-answer rule), which would then be
		// replaced by the fetch that answer prompts, and answered in
		// turn: fetches in a loop on an idle log.
		q := *p
		r.unparkQuiescent(q)
		ls.unpark(from)
		r.respondFetch(from, q.req)
	}
	ls.unpark(from)
	prevID, seen := ls.lastFetchID[from]
	ls.lastFetchID[from] = req.FetchID
	if req.FetchOffset < r.log.LEO() || r.hw > ls.sentHW[from] || r.log.logStart > ls.sentLogStart[from] || req.MaxWaitMs == 0 ||
		!seen || req.FetchID != prevID+1 {
		r.respondFetch(from, req)
		return
	}
	if req.Quiescent && voter && r.quiescence() {
		// R99: no deadline; the node's contact with the fetcher stands
		// in for its fetches (heardAt).
		ls.parked = append(ls.parked, parkedFetch{from: from, req: req, quiescent: true})
		r.quiesceStats.Parked++
		return
	}
	wait := time.Duration(req.MaxWaitMs) * time.Millisecond
	ls.parked = append(ls.parked, parkedFetch{from: from, req: req, deadline: r.now.Add(wait)})
}

// parkedFrom returns the fetch parked for from, if any.
func (ls *leaderState) parkedFrom(from string) *parkedFetch {
	for i := range ls.parked {
		if ls.parked[i].from == from {
			return &ls.parked[i]
		}
	}
	return nil
}

// earlierFetchID reports whether fetch ID a was issued shortly before b by
// the same fetcher. IDs count up by one per fetch from a random start (and
// may wrap), so a restarted replica's IDs are far from its old ones: they
// count as a new life (they replace the parked fetch), not as earlier.
func earlierFetchID(a, b uint64) bool { return a != b && b-a <= maxFetchIDLag }

// maxFetchIDLag bounds how far behind the parked fetch an ID may be and still
// count as a delayed copy of an earlier fetch of the same life.
const maxFetchIDLag = 1 << 20

func (ls *leaderState) unpark(from string) {
	for i, p := range ls.parked {
		if p.from == from {
			ls.parked = slices.Delete(ls.parked, i, i+1)
			return
		}
	}
}

// respondFetch answers a validated fetch with entries from its offset and
// the current HW. Entries not yet durable here may be sent: the leader
// counts itself only with its durable LEO.
func (r *Replica) respondFetch(from string, req *protocol.FetchRequest) {
	maxBytes := r.cfg.FetchMaxBytes
	if req.MaxBytes > 0 && int(req.MaxBytes) < maxBytes {
		maxBytes = int(req.MaxBytes)
	}
	if req.FetchOffset < r.log.logStart {
		// Below the log start (also a delayed copy of an earlier fetch,
		// answered here directly): the follower resets to it (R53).
		r.send(from, &protocol.FetchResponse{
			FetchID: req.FetchID, LeaderID: r.id, Epoch: r.epoch, Error: protocol.FetchOffsetOutOfRange,
			HighWatermark: r.hw, LogStartOffset: r.log.logStart, LogStartVoters: r.logStartVoters(),
			LogStartEpoch: r.log.logStartEpoch(), Quiescent: req.Quiescent,
		})
		return
	}
	if sv, ok := r.leader.served[from]; ok && req.FetchID == sv.id+1 && req.FetchOffset == sv.offset {
		// R71's fresh fetch, sent when the follower's durable end reached
		// its offset, after we had answered the fetch it repeats: that
		// answer carries the entries and the follower takes it for this
		// one (the late-answer rule). Sending them twice would double
		// what a follower under load is sent; the HW goes alone. (Lost,
		// that answer costs one more fetch, which gets the entries.)
		r.sendFetchOK(from, req, nil)
		return
	}
	var entries []protocol.Entry
	if req.FetchOffset < r.log.LEO() {
		throttled := r.throttles(from, req) // R73
		if throttled && r.quotaWaits(from, req) {
			return
		}
		es, err := r.log.read(req.FetchOffset, maxBytes)
		if err != nil {
			// The follower retries after its fetch timeout.
			r.logger.Error("reading entries for a fetch", "from", from, "offset", req.FetchOffset, "error", err)
			return
		}
		entries = r.wholeBatches(es)
		if throttled {
			r.chargeQuota(entries)
		}
	}
	r.sendFetchOK(from, req, entries)
}

// sendFetchOK answers fetch req with entries (none: nothing to send, or
// the replication quota's wait is over, R73) and the current HW.
func (r *Replica) sendFetchOK(from string, req *protocol.FetchRequest, entries []protocol.Entry) {
	r.leader.sentHW[from] = r.hw
	r.leader.sentLogStart[from] = r.log.logStart
	if len(entries) > 0 && req.HasDurableOffset && req.DurableOffset < req.FetchOffset {
		r.leader.served[from] = servedFetch{id: req.FetchID, offset: req.FetchOffset}
	} else {
		delete(r.leader.served, from)
	}
	r.send(from, &protocol.FetchResponse{
		FetchID: req.FetchID, LeaderID: r.id, Epoch: r.epoch, Error: protocol.FetchOK,
		HighWatermark: r.hw, LogStartOffset: r.log.logStart, Entries: entries, Quiescent: req.Quiescent,
	})
}

// updateLeaderHW is docs/protocol.md §3.5: the largest offset a majority of voters
// hold (the leader with its durable LEO), only past the epoch start, never
// backwards. It moves no role: its caller then calls resignIfRemoved (R58).
func (r *Replica) updateLeaderHW() {
	ls := r.leader
	if r.bootstrap {
		return // nothing commits before a voter set is in force (R57)
	}
	vals := ls.hwBuf[:0]
	for _, v := range r.voters {
		switch {
		case v == r.id && r.voter:
			vals = append(vals, r.log.durableEnd)
		case v == r.id:
			vals = append(vals, 0) // removed (R58): not counted
		default:
			vals = append(vals, ls.remote[v]) // 0 if not heard from
		}
	}
	slices.Sort(vals)
	o := vals[len(vals)-r.majority]
	ls.hwBuf = vals
	if o <= r.hw {
		return
	}
	if o <= ls.epochStartLEO && !bugs.HWNoEpochStart {
		return
	}
	r.hw = o
	r.ackUpTo(r.hw)
}

// ackUpTo acknowledges pending proposals that end at or below limit.
func (r *Replica) ackUpTo(limit uint64) {
	ls := r.leader
	n := 0
	for n < len(ls.pending) && ls.pending[n].end <= limit {
		p := ls.pending[n]
		switch {
		case p.local && p.dup:
			r.acks = append(r.acks, Ack{ID: p.id, FirstOffset: p.first, Err: ErrDuplicate})
		case p.local:
			r.acks = append(r.acks, Ack{ID: p.id, FirstOffset: p.first})
		default:
			r.send(p.from, ackResponse(p.requestID, r.id, p.first, p.dup))
			r.memo.set(doneKey{p.from, p.requestID}, forwardMemo{state: forwardAcked, first: p.first, dup: p.dup})
		}
		n++
	}
	if n > 0 {
		clear(ls.pending[:n])
		ls.pending = ls.pending[n:]
	}
}

// leaderPropose appends records as one batch of entries of type typ for p
// (the leader's part of Propose, ProposeBarrier and forwarded appends).
func (r *Replica) leaderPropose(p proposal, typ protocol.EntryType, records [][]byte) {
	ls := r.leader
	leo := r.log.LEO()
	if len(records) == 0 {
		// Nothing to commit: it is as committed as it will ever be.
		p.first, p.end = leo, leo
		ls.pending = append(ls.pending, p)
		r.ackUpTo(r.hw)
		return
	}
	if r.backlogRefuses(p, typ, records) { // R74
		return
	}
	entries := make([]protocol.Entry, len(records))
	for i, rec := range records {
		entries[i] = protocol.Entry{Offset: leo + uint64(i), Epoch: r.epoch, Time: r.now.UnixMilli(), Type: typ, Data: rec}
	}
	p.first, p.end = leo, leo+uint64(len(records))
	ls.pending = append(ls.pending, p)
	r.noteBacklog(typ, records, p.end)
	r.appendEntries(entries)
}

func (r *Replica) appendControlEntry() {
	leo := r.log.LEO()
	r.appendEntries([]protocol.Entry{{Offset: leo, Epoch: r.epoch, Time: r.now.UnixMilli(), Type: protocol.EntryControl}})
}
