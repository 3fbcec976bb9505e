package replica

import (
	"fmt"
	"slices"
	"time"

	"github.com/replog-io/replog/storage"
	"github.com/replog-io/replog/transport"
)

// leaderState is what a leader keeps for its epoch only: it is dropped at
// every change of leadership, so remote LEOs of an earlier epoch never count.
type leaderState struct {
	// epochStartLEO is the LEO when the epoch began: the HW moves only past
	// it (an entry of this epoch must commit first; Raft §5.4.2).
	epochStartLEO uint64
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
	// lastFetchID is each replica's last FetchID: a fetch that does not
	// follow it (a restarted replica, or one that lost our answer) may have
	// missed the current HW, so it is answered at once.
	lastFetchID map[string]uint64
	parked      []parkedFetch
	// pending proposals in offset order.
	pending []proposal

	hwBuf []uint64
}

type parkedFetch struct {
	from     string
	req      *transport.FetchRequest
	deadline time.Time
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
}

type doneKey struct {
	from      string
	requestID uint64
}

func newLeaderState(r *Replica, leo uint64) *leaderState {
	ls := &leaderState{
		epochStartLEO: leo,
		remote:        make(map[string]uint64),
		lastFetch:     make(map[string]time.Time),
		observerFetch: make(map[string]time.Time),
		sentHW:        make(map[string]uint64),
		lastFetchID:   make(map[string]uint64),
		hwBuf:         make([]uint64, 0, len(r.voters)),
	}
	// Grace period: every voter counts as heard from at the start.
	for _, v := range r.voters {
		ls.lastFetch[v] = r.now
	}
	return ls
}

// stepDown ends this replica's leadership: every pending proposal gets an
// unknown outcome (it may or may not commit under the next leader).
func (r *Replica) stepDown(newLeader string) {
	ls := r.leader
	if ls == nil {
		return
	}
	r.logger.Info("stepping down", "epoch", r.epoch, "pending", len(ls.pending))
	for _, p := range ls.pending {
		r.failProposal(p, newLeader)
	}
	r.leader = nil
	r.log.dropEmptyTrailingEpochs()
}

func (r *Replica) failProposal(p proposal, newLeader string) {
	if p.local {
		r.acks = append(r.acks, Ack{ID: p.id, Err: ErrUnknownOutcome})
	} else {
		r.send(p.from, &transport.AppendResponse{RequestID: p.requestID, Error: transport.AppendUnknown, LeaderID: newLeader})
	}
}

// tickLeader answers parked fetches whose wait is over and runs
// check-quorum.
func (r *Replica) tickLeader() {
	ls := r.leader
	kept := ls.parked[:0]
	for _, p := range ls.parked {
		if !r.now.Before(p.deadline) {
			r.respondFetch(p.from, p.req)
		} else {
			kept = append(kept, p)
		}
	}
	clear(ls.parked[len(kept):])
	ls.parked = kept

	n := 0
	for _, v := range r.voters {
		if v == r.id || r.now.Sub(ls.lastFetch[v]) < r.cfg.FetchTimeout {
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
		if p.req.FetchOffset < leo || r.hw > ls.sentHW[p.from] {
			r.respondFetch(p.from, p.req)
		} else {
			kept = append(kept, p)
		}
	}
	clear(ls.parked[len(kept):])
	ls.parked = kept
}

// handleFetchRequest is DESIGN.md §2.1, leader side (and the not-leader
// answer that lets others find the leader).
func (r *Replica) handleFetchRequest(from string, req *transport.FetchRequest) {
	if req.ReplicaID != from {
		return
	}
	if req.CurrentEpoch > r.epoch {
		if !r.isVoter(from) {
			// Only voters' word moves epochs: a non-voter learns epochs
			// from voters, so it has nothing to teach us.
			r.logger.Debug("fetch from a non-voter in a later epoch", "from", from, "epoch", req.CurrentEpoch)
			r.send(from, &transport.FetchResponse{FetchID: req.FetchID, Epoch: r.epoch, Error: transport.FetchNotLeader})
			return
		}
		// The fetcher knows a newer epoch: if we lead, we are stale.
		r.becomeFollower(req.CurrentEpoch, "")
	}
	if r.role != RoleLeader {
		// Name the leader only while following it: a prospective or
		// candidate replica has lost it.
		leader := r.leaderID
		if r.role != RoleFollower && r.role != RoleObserver {
			leader = ""
		}
		r.send(from, &transport.FetchResponse{
			FetchID: req.FetchID, LeaderID: leader, Epoch: r.epoch, Error: transport.FetchNotLeader,
		})
		return
	}
	ls := r.leader
	if req.CurrentEpoch < r.epoch {
		r.send(from, &transport.FetchResponse{
			FetchID: req.FetchID, LeaderID: r.id, Epoch: r.epoch, Error: transport.FetchFencedEpoch,
			HighWatermark: r.hw, LogStartOffset: r.log.logStart,
		})
		return
	}
	// Only voters count for check-quorum and the HW; a non-voter is served
	// as an observer.
	voter := r.isVoter(from)
	if voter {
		ls.lastFetch[from] = r.now
	} else {
		ls.observerFetch[from] = r.now
	}
	e, end := r.log.EndOffsetForEpoch(req.LastFetchedEpoch)
	if e != req.LastFetchedEpoch || end < req.FetchOffset {
		// The remote LEO is not updated from a diverging fetch.
		r.send(from, &transport.FetchResponse{
			FetchID: req.FetchID, LeaderID: r.id, Epoch: r.epoch, Error: transport.FetchDivergingEpoch,
			DivergingEpoch: e, DivergingEndOffset: end, HighWatermark: r.hw, LogStartOffset: r.log.logStart,
		})
		return
	}
	if req.FetchOffset < r.log.logStart {
		r.send(from, &transport.FetchResponse{
			FetchID: req.FetchID, LeaderID: r.id, Epoch: r.epoch, Error: transport.FetchOffsetOutOfRange,
			HighWatermark: r.hw, LogStartOffset: r.log.logStart,
		})
		return
	}
	if voter {
		ls.remote[from] = req.FetchOffset
		r.updateLeaderHW()
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
	if p := ls.parkedFrom(from); p != nil && earlierFetchID(req.FetchID, p.req.FetchID) {
		r.respondFetch(from, req)
		return
	}
	ls.unpark(from)
	prevID, seen := ls.lastFetchID[from]
	ls.lastFetchID[from] = req.FetchID
	if req.FetchOffset < r.log.LEO() || r.hw > ls.sentHW[from] || req.MaxWaitMs == 0 ||
		!seen || req.FetchID != prevID+1 {
		r.respondFetch(from, req)
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
func (r *Replica) respondFetch(from string, req *transport.FetchRequest) {
	maxBytes := r.cfg.FetchMaxBytes
	if req.MaxBytes > 0 && int(req.MaxBytes) < maxBytes {
		maxBytes = int(req.MaxBytes)
	}
	var entries []storage.Entry
	if req.FetchOffset < r.log.LEO() {
		es, err := r.log.read(req.FetchOffset, maxBytes)
		if err != nil {
			// The follower retries after its fetch timeout.
			r.logger.Error("reading entries for a fetch", "from", from, "offset", req.FetchOffset, "error", err)
			return
		}
		entries = es
	}
	r.leader.sentHW[from] = r.hw
	r.send(from, &transport.FetchResponse{
		FetchID: req.FetchID, LeaderID: r.id, Epoch: r.epoch, Error: transport.FetchOK,
		HighWatermark: r.hw, LogStartOffset: r.log.logStart, Entries: entries,
	})
}

// updateLeaderHW is DESIGN.md §2.3: the largest offset a majority of voters
// hold (the leader with its durable LEO), only past the epoch start, never
// backwards.
func (r *Replica) updateLeaderHW() {
	ls := r.leader
	vals := ls.hwBuf[:0]
	for _, v := range r.voters {
		if v == r.id {
			vals = append(vals, r.log.durableEnd)
		} else {
			vals = append(vals, ls.remote[v]) // 0 if not heard from
		}
	}
	slices.Sort(vals)
	o := vals[len(vals)-r.majority]
	ls.hwBuf = vals
	if o <= r.hw {
		return
	}
	if o <= ls.epochStartLEO && !bugHWNoEpochStart {
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
		if p.local {
			r.acks = append(r.acks, Ack{ID: p.id, FirstOffset: p.first})
		} else {
			r.send(p.from, &transport.AppendResponse{RequestID: p.requestID, Error: transport.AppendOK, LeaderID: r.id, FirstOffset: p.first})
			r.memo.set(doneKey{p.from, p.requestID}, forwardMemo{state: forwardAcked, first: p.first})
		}
		n++
	}
	if n > 0 {
		clear(ls.pending[:n])
		ls.pending = ls.pending[n:]
	}
}

// leaderPropose appends records as one batch for p (the leader's part of
// Propose and of forwarded appends).
func (r *Replica) leaderPropose(p proposal, records [][]byte) {
	ls := r.leader
	leo := r.log.LEO()
	if len(records) == 0 {
		// Nothing to commit: it is as committed as it will ever be.
		p.first, p.end = leo, leo
		ls.pending = append(ls.pending, p)
		r.ackUpTo(r.hw)
		return
	}
	entries := make([]storage.Entry, len(records))
	for i, rec := range records {
		entries[i] = storage.Entry{Offset: leo + uint64(i), Epoch: r.epoch, Type: storage.EntryData, Data: rec}
	}
	p.first, p.end = leo, leo+uint64(len(records))
	ls.pending = append(ls.pending, p)
	r.appendEntries(entries)
}

func (r *Replica) appendControlEntry() {
	leo := r.log.LEO()
	r.appendEntries([]storage.Entry{{Offset: leo, Epoch: r.epoch, Type: storage.EntryControl}})
}

// fetchSession reports whether non-voter from fetched from this leader
// within FetchTimeout in its epoch.
func (r *Replica) fetchSession(from string) bool {
	if r.leader == nil {
		return false
	}
	t, ok := r.leader.observerFetch[from]
	return ok && r.now.Sub(t) < r.cfg.FetchTimeout
}

func (r *Replica) handleAppendRequest(from string, req *transport.AppendRequest) {
	k := doneKey{from, req.RequestID}
	// A duplicate (the network may repeat a request) gets the answer its
	// first copy got, as far as it is known: never appended twice, never
	// "not appended" once it was.
	if m, ok := r.memo.get(k); ok {
		switch {
		case m.state == forwardRefused:
			r.send(from, &transport.AppendResponse{RequestID: req.RequestID, Error: transport.AppendNotLeader, LeaderID: r.leaderID})
		case m.state == forwardAcked:
			r.send(from, &transport.AppendResponse{RequestID: req.RequestID, Error: transport.AppendOK, LeaderID: r.id, FirstOffset: m.first})
		case r.role == RoleLeader && m.epoch == r.epoch:
			// Pending in this epoch: answered when it commits.
		default:
			// Appended by an earlier leadership of ours: it may or may not
			// commit.
			r.send(from, &transport.AppendResponse{RequestID: req.RequestID, Error: transport.AppendUnknown, LeaderID: r.leaderID})
		}
		return
	}
	if r.role != RoleLeader || req.Epoch != r.epoch {
		// Appended only by the leader of the epoch the request names. A
		// node that does not lead its current epoch and never did can never
		// lead it (an election moves to a new epoch): nothing was or will be
		// appended, a final not-leader. Any other epoch (an earlier one,
		// which this node may have led in a life it no longer remembers, or
		// one it has not reached) gets an unknown outcome, never not-leader.
		if req.Epoch == r.epoch && r.epochLeader != r.id {
			r.memo.set(k, forwardMemo{state: forwardRefused})
			r.send(from, &transport.AppendResponse{RequestID: req.RequestID, Error: transport.AppendNotLeader, LeaderID: r.leaderID})
			return
		}
		r.logger.Debug("forwarded append for another epoch", "from", from, "epoch", req.Epoch, "own_epoch", r.epoch)
		r.send(from, &transport.AppendResponse{RequestID: req.RequestID, Error: transport.AppendUnknown, LeaderID: r.leaderID})
		return
	}
	if !r.isVoter(from) && !r.fetchSession(from) {
		// Only members forward appends: voters, and observers that fetch
		// from this leader now. Nothing was appended in this epoch, the only
		// one the request could be appended in (and a copy arriving later
		// gets the same answer). (The epoch rule above comes first: a copy
		// naming an earlier epoch may have been appended then.)
		r.logger.Debug("refusing a forwarded append from a node that is not a member", "from", from)
		r.memo.set(k, forwardMemo{state: forwardRefused})
		r.send(from, &transport.AppendResponse{RequestID: req.RequestID, Error: transport.AppendNotLeader, LeaderID: r.leaderID})
		return
	}
	if !fitsForward(req.Records, r.cfg.MaxRecordSize) {
		r.send(from, &transport.AppendResponse{RequestID: req.RequestID, Error: transport.AppendTooLarge, LeaderID: r.id})
		return
	}
	r.memo.set(k, forwardMemo{state: forwardAppended, epoch: r.epoch})
	r.leaderPropose(proposal{from: from, requestID: req.RequestID}, req.Records)
}

// forward sends a follower's proposal to the leader it knows.
func (r *Replica) forward(id uint64, records [][]byte) {
	if !fitsForward(records, r.cfg.MaxRecordSize) {
		r.acks = append(r.acks, Ack{ID: id, Err: fmt.Errorf("%w: a forwarded batch is limited to %d bytes", ErrTooLarge, maxForwardBytes)})
		return
	}
	reqID := r.nextRequestID
	r.nextRequestID++
	r.forwarded = append(r.forwarded, forwardedProposal{
		requestID: reqID, id: id, to: r.leaderID, epoch: r.epoch, deadline: r.now.Add(2 * r.cfg.FetchTimeout),
	})
	r.send(r.leaderID, &transport.AppendRequest{RequestID: reqID, Epoch: r.epoch, Records: records})
}

func (r *Replica) handleAppendResponse(from string, resp *transport.AppendResponse) {
	i := slices.IndexFunc(r.forwarded, func(f forwardedProposal) bool { return f.requestID == resp.RequestID })
	if i < 0 {
		return
	}
	f := r.forwarded[i]
	r.forwarded = slices.Delete(r.forwarded, i, i+1)
	ack := Ack{ID: f.id}
	switch resp.Error {
	case transport.AppendOK:
		ack.FirstOffset = resp.FirstOffset
	case transport.AppendNotLeader:
		ack.Err = &NotLeaderError{LeaderID: resp.LeaderID}
	case transport.AppendTooLarge:
		ack.Err = ErrTooLarge
	case transport.AppendUnknown:
		ack.Err = ErrUnknownOutcome
	default:
		ack.Err = fmt.Errorf("%w: unknown append error %d from %s", ErrUnknownOutcome, resp.Error, from)
	}
	r.acks = append(r.acks, ack)
}

// abandonForwarded fails at once, with an unknown outcome, the forwarded
// proposals sent in an older epoch or to another leader than leader: the
// node they went to may have appended them, but nobody will answer.
func (r *Replica) abandonForwarded(leader string) {
	kept := r.forwarded[:0]
	for _, f := range r.forwarded {
		if f.epoch == r.epoch && f.to == leader {
			kept = append(kept, f)
			continue
		}
		r.acks = append(r.acks, Ack{ID: f.id, Err: ErrUnknownOutcome})
	}
	clear(r.forwarded[len(kept):])
	r.forwarded = kept
}

// expireForwarded fails forwarded proposals whose answer did not come in
// time (lost messages): nothing waits forever.
func (r *Replica) expireForwarded() {
	n := 0
	for n < len(r.forwarded) && !r.now.Before(r.forwarded[n].deadline) {
		r.acks = append(r.acks, Ack{ID: r.forwarded[n].id, Err: ErrUnknownOutcome})
		n++
	}
	if n > 0 {
		r.forwarded = slices.Delete(r.forwarded, 0, n)
	}
}

// maxForwardBytes bounds a forwarded batch (records + EntryOverhead each)
// so that its AppendRequest stays well inside a transport frame.
const maxForwardBytes = 8 << 20

// fitsForward reports whether records can be forwarded as one request: no
// record above maxRecord, the whole batch within maxForwardBytes.
func fitsForward(records [][]byte, maxRecord int) bool {
	total := 0
	for _, rec := range records {
		if len(rec) > maxRecord {
			return false
		}
		total += len(rec) + storage.EntryOverhead
	}
	return total <= maxForwardBytes
}

// forwardState is what a replica answered to a forwarded request.
type forwardState uint8

const (
	forwardRefused  forwardState = iota + 1 // answered "not the leader"
	forwardAppended                         // appended (in epoch), outcome pending or lost
	forwardAcked                            // committed at first
)

type forwardMemo struct {
	state forwardState
	epoch uint64
	first uint64
}

// forwardMemos remembers the fate of the last maxForwardMemos forwarded
// requests, across changes of role, so that duplicates are answered
// consistently.
type forwardMemos struct {
	m    map[doneKey]forwardMemo
	fifo []doneKey
}

const maxForwardMemos = 4096

func (f *forwardMemos) get(k doneKey) (forwardMemo, bool) {
	m, ok := f.m[k]
	return m, ok
}

func (f *forwardMemos) set(k doneKey, m forwardMemo) {
	if f.m == nil {
		f.m = make(map[doneKey]forwardMemo)
	}
	if _, ok := f.m[k]; !ok {
		f.fifo = append(f.fifo, k)
		if len(f.fifo) > maxForwardMemos {
			delete(f.m, f.fifo[0])
			f.fifo = f.fifo[1:]
		}
	}
	f.m[k] = m
}
