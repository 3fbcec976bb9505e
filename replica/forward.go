package replica

import (
	"fmt"
	"slices"
	"time"

	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/replica/internal/bugs"
)

// forwardedProposal is a proposal a follower forwarded to the leader.
type forwardedProposal struct {
	requestID uint64
	id        uint64
	to        string // the leader it was sent to
	epoch     uint64 // the epoch it was sent in
	deadline  time.Time
}

type doneKey struct {
	from      string
	requestID uint64
}

func (r *Replica) failProposal(p proposal, newLeader string) {
	if p.local {
		r.acks = append(r.acks, Ack{ID: p.id, Err: ErrUnknownOutcome})
	} else {
		r.send(p.from, &protocol.AppendResponse{RequestID: p.requestID, Error: protocol.AppendUnknown, LeaderID: newLeader})
	}
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

// leaderAppendRequest appends a forwarded proposal (the leader's side).
func (r *Replica) leaderAppendRequest(from string, req *protocol.AppendRequest) {
	if r.answerFromMemo(from, req, true) {
		return
	}
	if req.Epoch != r.epoch {
		r.refuseForward(from, req)
		return
	}
	k := doneKey{from, req.RequestID}
	if !r.isVoter(from) && !r.fetchSession(from) {
		// Only members forward appends: voters, and observers that fetch
		// from this leader now. Nothing was appended in this epoch, the only
		// one the request could be appended in (and a copy arriving later
		// gets the same answer). (The epoch rule above comes first: a copy
		// naming an earlier epoch may have been appended then.)
		r.logger.Debug("refusing a forwarded append from a node that is not a member", "from", from)
		r.memo.set(k, forwardMemo{state: forwardRefused})
		r.send(from, &protocol.AppendResponse{RequestID: req.RequestID, Error: protocol.AppendNotLeader, LeaderID: r.leaderID})
		return
	}
	if !fitsForward(req.Records, r.cfg.MaxRecordSize, r.cfg.MaxForwardBytes) {
		r.send(from, &protocol.AppendResponse{RequestID: req.RequestID, Error: protocol.AppendTooLarge, LeaderID: r.id})
		return
	}
	if req.Type == protocol.EntryVoters {
		r.forwardedVoterChange(from, req)
		return
	}
	if req.Type == protocol.EntryKeyed || req.Type == protocol.EntryState {
		key, records, ok := r.forwardedKeyed(from, req)
		if !ok {
			r.send(from, &protocol.AppendResponse{RequestID: req.RequestID, Error: protocol.AppendTooLarge, LeaderID: r.id})
			return
		}
		r.memo.set(k, forwardMemo{state: forwardAppended, epoch: r.epoch})
		r.leaderKeyed(proposal{from: from, requestID: req.RequestID}, req.Type, records, key)
		return
	}
	typ, ok := forwardedType(req)
	if !ok {
		// R50: a peer's control entries are empty barriers, never data
		// (the control records' limit is 0 bytes): nothing is appended.
		r.logger.Debug("refusing a forwarded control append with data", "from", from)
		r.send(from, &protocol.AppendResponse{RequestID: req.RequestID, Error: protocol.AppendTooLarge, LeaderID: r.id})
		return
	}
	r.memo.set(k, forwardMemo{state: forwardAppended, epoch: r.epoch})
	r.leaderPropose(proposal{from: from, requestID: req.RequestID}, typ, req.Records)
}

// forwardedVoterChange is the leader's side of a forwarded voter change
// (R58): one record, a protocol.VoterChange; the leader computes the new
// set from its own. A refusal appends nothing and is not remembered (a
// copy is judged again, as a retry would be).
func (r *Replica) forwardedVoterChange(from string, req *protocol.AppendRequest) {
	var ch protocol.VoterChange
	err := protocol.ErrMalformed
	if len(req.Records) == 1 {
		ch, err = protocol.DecodeVoterChange(req.Records[0])
	}
	if err != nil {
		r.logger.Debug("refusing a malformed voter change", "from", from, "error", err)
		r.send(from, &protocol.AppendResponse{RequestID: req.RequestID, Error: protocol.AppendTooLarge, LeaderID: r.id})
		return
	}
	r.leaderVoterChange(proposal{from: from, requestID: req.RequestID}, ch)
}

// refuseAppendRequest answers a forwarded proposal reaching a replica that
// does not lead.
func (r *Replica) refuseAppendRequest(from string, req *protocol.AppendRequest) {
	if r.answerFromMemo(from, req, false) {
		return
	}
	r.refuseForward(from, req)
}

// answerFromMemo answers a duplicate (the network may repeat a request)
// with the answer its first copy got, as far as it is known: never
// appended twice, never "not appended" once it was. leading says whether
// this replica leads now. It reports whether req was a duplicate.
func (r *Replica) answerFromMemo(from string, req *protocol.AppendRequest, leading bool) bool {
	m, ok := r.memo.get(doneKey{from, req.RequestID})
	if !ok {
		return false
	}
	switch {
	case m.state == forwardRefused:
		r.send(from, &protocol.AppendResponse{RequestID: req.RequestID, Error: protocol.AppendNotLeader, LeaderID: r.leaderID})
	case m.state == forwardDeclined:
		r.send(from, &protocol.AppendResponse{RequestID: req.RequestID, Error: m.code, LeaderID: r.id})
	case m.state == forwardAcked:
		r.send(from, ackResponse(req.RequestID, r.id, m.first, m.dup))
	case leading && m.epoch == r.epoch:
		// Pending in this epoch: answered when it commits.
	default:
		// Appended by an earlier leadership of ours: it may or may not
		// commit.
		r.send(from, &protocol.AppendResponse{RequestID: req.RequestID, Error: protocol.AppendUnknown, LeaderID: r.leaderID})
	}
	return true
}

// refuseForward answers a forwarded proposal that is not appended here: it
// is appended only by the leader of the epoch it names. A node that does
// not lead its current epoch and never did can never lead it (an election
// moves to a new epoch): nothing was or will be appended, a final
// not-leader. Any other epoch (an earlier one, which this node may have led
// in a life it no longer remembers, or one it has not reached) gets an
// unknown outcome, never not-leader; so does its own epoch when it cannot
// tell who led it (knowsWhoLedItsEpoch).
func (r *Replica) refuseForward(from string, req *protocol.AppendRequest) {
	if req.Epoch == r.epoch && r.epochLeader != r.id && r.knowsWhoLedItsEpoch() {
		r.memo.set(doneKey{from, req.RequestID}, forwardMemo{state: forwardRefused})
		r.send(from, &protocol.AppendResponse{RequestID: req.RequestID, Error: protocol.AppendNotLeader, LeaderID: r.leaderID})
		return
	}
	r.logger.Debug("forwarded append for another epoch", "from", from, "epoch", req.Epoch, "own_epoch", r.epoch)
	r.send(from, &protocol.AppendResponse{RequestID: req.RequestID, Error: protocol.AppendUnknown, LeaderID: r.leaderID})
}

// knowsWhoLedItsEpoch reports whether this replica can tell that it did
// not lead its epoch, unless it names itself as that epoch's leader: it
// knows another leader of it (an epoch has one leader), or its directory
// has been this node for the whole epoch, so that R47's durable record
// of having led it would be here. The second holds for a voter the set in
// force records at this directory: a leader added it from its fetches
// (R58) or its grant (R57), in an epoch after any its ID's earlier
// directories led. A node whose directory was wiped knows neither: a late
// copy of a request its old disk appended, naming the epoch the new one
// has since learned of, must not be refused as never appended.
func (r *Replica) knowsWhoLedItsEpoch() bool {
	if bugs.WipedNotLeader {
		return true
	}
	return r.epochLeader != "" || !r.bootstrap && r.voter
}

// forwardedType returns the type of entry a forwarded request's records
// become, and whether the leader may append them: data, or control entries
// without data (barriers, R50). Any other type is refused (the codec never
// decodes one; an in-memory network could carry it).
func forwardedType(req *protocol.AppendRequest) (protocol.EntryType, bool) {
	switch req.Type {
	case 0, protocol.EntryData:
		return protocol.EntryData, true
	case protocol.EntryControl:
		for _, rec := range req.Records {
			if len(rec) > 0 {
				return 0, false
			}
		}
		return protocol.EntryControl, true
	}
	return 0, false
}

// forward sends a follower's proposal to the leader it knows.
func (r *Replica) forward(id uint64, typ protocol.EntryType, records [][]byte) {
	if !fitsForward(records, r.cfg.MaxRecordSize, r.cfg.MaxForwardBytes) {
		r.acks = append(r.acks, Ack{ID: id, Err: fmt.Errorf("%w: a forwarded batch is limited to %d bytes", ErrTooLarge, r.cfg.MaxForwardBytes)})
		return
	}
	reqID := r.nextRequestID
	r.nextRequestID++
	r.forwarded = append(r.forwarded, forwardedProposal{
		requestID: reqID, id: id, to: r.leaderID, epoch: r.epoch, deadline: r.now.Add(2 * r.cfg.FetchTimeout),
	})
	req := &protocol.AppendRequest{RequestID: reqID, Epoch: r.epoch, Records: records}
	if typ != protocol.EntryData {
		req.Type = typ
	}
	r.send(r.leaderID, req)
}

func (r *Replica) handleAppendResponse(from string, resp *protocol.AppendResponse) {
	i := slices.IndexFunc(r.forwarded, func(f forwardedProposal) bool { return f.requestID == resp.RequestID })
	if i < 0 {
		return
	}
	f := r.forwarded[i]
	r.forwarded = slices.Delete(r.forwarded, i, i+1)
	ack := Ack{ID: f.id}
	switch resp.Error {
	case protocol.AppendOK:
		ack.FirstOffset = resp.FirstOffset
	case protocol.AppendDuplicate:
		ack.FirstOffset, ack.Err = resp.FirstOffset, ErrDuplicate
	default:
		ack.Err = appendErrorAsError(resp.Error, resp.LeaderID)
		if !knownAppendError(resp.Error) {
			ack.Err = fmt.Errorf("%w: unknown append error %d from %s", ErrUnknownOutcome, resp.Error, from)
		}
	}
	r.acks = append(r.acks, ack)
}

// appendErrorAsError is the error an Ack carries for a refusal e (leader:
// the leader the answer names).
func appendErrorAsError(e protocol.AppendError, leader string) error {
	switch e {
	case protocol.AppendNotLeader:
		return &NotLeaderError{LeaderID: leader}
	case protocol.AppendTooLarge:
		return ErrTooLarge
	case protocol.AppendVoterChangePending:
		return ErrVoterChangePending
	case protocol.AppendUnknownNode:
		return ErrUnknownNode
	case protocol.AppendLastVoter:
		return ErrLastVoter
	case protocol.AppendNotCaughtUp:
		return ErrNotCaughtUp
	case protocol.AppendLogExists:
		return ErrLogExists
	case protocol.AppendUnknownLog:
		return ErrUnknownLog
	case protocol.AppendFeatureLevelTooLow:
		return ErrFeatureLevelTooLow
	}
	return ErrUnknownOutcome
}

func knownAppendError(e protocol.AppendError) bool {
	return e <= protocol.AppendFeatureLevelTooLow
}

// ackResponse is the answer to a forwarded request acknowledged at first
// (dup: a caller ID's duplicate, R64).
func ackResponse(requestID uint64, leader string, first uint64, dup bool) *protocol.AppendResponse {
	e := protocol.AppendOK
	if dup {
		e = protocol.AppendDuplicate
	}
	return &protocol.AppendResponse{RequestID: requestID, Error: e, LeaderID: leader, FirstOffset: first}
}

// abandonForwarded fails at once, with an unknown outcome, the forwarded
// proposals sent in an older epoch or to another leader than leader: the
// node they went to may have appended them, but nobody will answer.
func (r *Replica) abandonForwarded(leader string) {
	kept := r.forwarded[:0]
	for _, f := range r.forwarded {
		if f.epoch == r.epoch && f.to == leader || r.answeredAfterHandOver(f) {
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

// fitsForward reports whether records can be forwarded as one request: no
// record above maxRecord, the whole batch (records + EntryOverhead each)
// within maxBytes (Config.MaxForwardBytes).
func fitsForward(records [][]byte, maxRecord, maxBytes int) bool {
	total := 0
	for _, rec := range records {
		if len(rec) > maxRecord {
			return false
		}
		total += len(rec) + protocol.EntryOverhead
	}
	return total <= maxBytes
}

// forwardState is what a replica answered to a forwarded request.
type forwardState uint8

const (
	forwardRefused  forwardState = iota + 1 // answered "not the leader"
	forwardAppended                         // appended (in epoch), outcome pending or lost
	forwardAcked                            // committed at first
	forwardDeclined                         // a log change refused (R80), with code
)

type forwardMemo struct {
	state forwardState
	epoch uint64
	first uint64
	dup   bool // acknowledged as a caller ID's duplicate (R64)
	code  protocol.AppendError
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
