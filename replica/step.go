package replica

import (
	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/replica/internal/bugs"
)

// Step handles one inbound message. Malformed or stale messages are
// dropped (and logged).
//
// Dispatch has two stages (etcd raft's Step, then its step function of the
// role). stepCommon does what every role does the same: it checks the
// addressee and sender, the epoch bounds and the voters a message names
// (admissible), handles vote requests, BeginEpoch, EndEpoch (R59) and
// answers to forwarded appends, and fences fetch requests (a voter's fetch naming a later epoch
// moves this replica to it first). What is left depends on the role, as it
// is after stepCommon, and goes to stepLeader, stepFollower (a voter
// following, and an observer), stepProspective or stepCandidate.
func (r *Replica) Step(m protocol.Message) {
	if r.err != nil {
		return
	}
	if !r.stepCommon(m) {
		return
	}
	switch r.role {
	case RoleLeader:
		r.stepLeader(m)
	case RoleFollower, RoleObserver:
		r.stepFollower(m)
	case RoleProspective:
		r.stepProspective(m)
	case RoleCandidate:
		r.stepCandidate(m)
	}
}

// stepCommon handles what does not depend on the role. It reports whether
// the message still needs the role's step function (fetch requests and
// responses, vote responses, forwarded appends).
func (r *Replica) stepCommon(m protocol.Message) bool {
	if m.To != "" && m.To != r.id {
		r.logger.Debug("dropping message for another node", "msg", m)
		return false
	}
	if m.From == "" || m.From == r.id {
		r.logger.Debug("dropping message without a valid sender", "msg", m)
		return false
	}
	if !r.admissible(m) {
		return false
	}
	switch b := m.Body.(type) {
	case *protocol.FetchRequest:
		return r.fenceFetchRequest(m.From, b)
	case *protocol.FetchResponse, *protocol.VoteResponse, *protocol.DeleteRecords,
		*protocol.SnapshotRequest, *protocol.SnapshotResponse:
		return true
	case *protocol.AppendRequest:
		return !r.refuseHandedOver(m.From, b) // R59
	case *protocol.VoteRequest:
		r.handleVoteRequest(m.From, b)
	case *protocol.BeginEpoch:
		r.handleBeginEpoch(m.From, b)
	case *protocol.AppendResponse:
		r.handleAppendResponse(m.From, b)
	case *protocol.EndEpoch:
		r.handleEndEpoch(m.From, b) // R59
	default:
		r.logger.Warn("dropping message of unknown type", "msg", m)
	}
	return false
}

// stepLeader: the leader serves fetches and appends forwarded proposals;
// it has no fetch or vote round outstanding.
func (r *Replica) stepLeader(m protocol.Message) {
	switch b := m.Body.(type) {
	case *protocol.FetchRequest:
		r.serveFetch(m.From, b)
	case *protocol.FetchResponse:
		r.dropFetchResponse(m.From, b)
	case *protocol.VoteResponse:
		r.dropVoteResponse(m.From, b)
	case *protocol.AppendRequest:
		if !r.holdAppendRequest(m.From, b) { // held during a transfer (R59)
			r.leaderAppendRequest(m.From, b)
		}
	case *protocol.DeleteRecords:
		r.handleDeleteRecords(m.From, b)
	case *protocol.SnapshotRequest:
		r.serveSnapshotRequest(m.From, b) // R92
	}
}

// stepFollower: a voter following (or looking for) a leader, and an
// observer, fetch; they name the leader they follow to fetchers.
func (r *Replica) stepFollower(m protocol.Message) {
	switch b := m.Body.(type) {
	case *protocol.FetchRequest:
		if b.CurrentEpoch == r.epoch {
			r.leaderNotLeading(m.From)
		}
		r.answerNotLeader(m.From, b, r.leaderID)
	case *protocol.FetchResponse:
		r.handleFetchResponse(m.From, b)
	case *protocol.VoteResponse:
		r.dropVoteResponse(m.From, b)
	case *protocol.AppendRequest:
		r.refuseAppendRequest(m.From, b)
	case *protocol.SnapshotRequest:
		r.refuseSnapshotRequest(m.From, b)
	case *protocol.SnapshotResponse:
		r.handleSnapshotResponse(m.From, b)
	}
}

// stepProspective: a pre-vote round is open, and the fetch sent before it
// may still be answered by the leader (then the replica follows it again).
func (r *Replica) stepProspective(m protocol.Message) {
	switch b := m.Body.(type) {
	case *protocol.FetchRequest:
		// It has lost its leader: it names none.
		r.answerNotLeader(m.From, b, "")
	case *protocol.FetchResponse:
		r.prospectiveFetchResponse(m.From, b)
	case *protocol.VoteResponse:
		r.handlePreVoteResponse(m.From, b)
	case *protocol.AppendRequest:
		r.refuseAppendRequest(m.From, b)
	case *protocol.SnapshotRequest:
		r.refuseSnapshotRequest(m.From, b)
	}
}

// stepCandidate: a vote round is open; no fetch is outstanding.
func (r *Replica) stepCandidate(m protocol.Message) {
	switch b := m.Body.(type) {
	case *protocol.FetchRequest:
		r.answerNotLeader(m.From, b, "")
	case *protocol.FetchResponse:
		r.dropFetchResponse(m.From, b)
	case *protocol.VoteResponse:
		r.handleVoteResponse(m.From, b)
	case *protocol.AppendRequest:
		r.refuseAppendRequest(m.From, b)
	case *protocol.SnapshotRequest:
		r.refuseSnapshotRequest(m.From, b)
	}
}

// admissible checks what every message must satisfy whoever sent it
// (defence in depth: authenticated peers may still be wrong or hostile).
// Only a voter of this replica's voter set can lead, so a message naming
// another node as leader, or a leader's message from a non-voter, is
// dropped whole.
func (r *Replica) admissible(m protocol.Message) bool {
	var leader string
	// epoch bounds the message (absurd epochs are dropped); leaderEpoch is
	// the epoch whose leader it names, if it names one.
	var epoch, leaderEpoch uint64
	switch b := m.Body.(type) {
	case *protocol.FetchRequest:
		epoch = b.CurrentEpoch
	case *protocol.VoteRequest:
		epoch = b.Epoch
	case *protocol.AppendRequest:
		epoch = b.Epoch
	case *protocol.DeleteRecords:
		epoch = b.Epoch
	case *protocol.SnapshotRequest:
		epoch = b.Epoch
	case *protocol.SnapshotResponse:
		epoch = b.Epoch
		// As a fetch answer: only a voter answers what this replica asked.
		if !r.mayLead(m.From, epoch) {
			r.logger.Debug("dropping a snapshot answer from a non-voter", "from", m.From)
			return false
		}
		leader = b.LeaderID
	case *protocol.FetchResponse:
		epoch = b.Epoch
		// Fetches go to voters only (and to a leader a voter named, R42):
		// an answer from anyone else answers nothing this replica asked.
		if !r.mayLead(m.From, epoch) {
			r.logger.Debug("dropping a fetch response from a non-voter", "from", m.From)
			return false
		}
		leader = b.LeaderID
	case *protocol.VoteResponse:
		// LeaderID is the leader of the responder's own epoch, not of the
		// epoch the request asked for: vouching for it in RequestEpoch (a
		// pre-vote asks for ours + 1) would make us refuse to follow it in
		// its epoch, and a voter whose set lacks the leader would stay out
		// for ever.
		leader, leaderEpoch = b.LeaderID, b.Epoch
		epoch = max(b.Epoch, b.RequestEpoch)
		if b.Formed && r.bootstrap {
			// A fresh store learns that a cluster exists (R60); the leader
			// it names, whom no set here holds, is only where to fetch.
			leader = ""
		}
	case *protocol.BeginEpoch:
		leader = b.LeaderID
		epoch = b.Epoch
		if !r.mayLead(m.From, epoch) {
			r.logger.Debug("dropping BeginEpoch from a non-voter", "from", m.From)
			return false
		}
	case *protocol.AppendResponse:
		leader = b.LeaderID
		epoch = r.epoch
	case *protocol.EndEpoch:
		leader, epoch = b.LeaderID, b.Epoch
	}
	if _, ok := m.Body.(*protocol.VoteResponse); !ok || bugs.VouchRequestEpoch {
		leaderEpoch = epoch
	}
	if leader != "" && leader != m.From && r.isVoter(m.From) && !r.isVoter(leader) && namesItsLeader(m.Body) {
		// A voter of our set that does not lead names its leader, whom our
		// set does not hold: a voter added by entries we have not fetched
		// yet (R55). Its word lets us follow that leader in that epoch, and
		// fetch the entries (R42).
		r.vouch(leader, leaderEpoch)
	}
	if leader != "" && !r.mayLead(leader, leaderEpoch) {
		r.logger.Debug("dropping a message naming a non-voter as leader", "from", m.From, "leader", leader)
		return false
	}
	if epoch >= MaxEpoch || epoch > r.epoch && epoch-r.epoch > MaxEpochJump {
		r.logger.Debug("dropping a message with an absurd epoch", "from", m.From, "epoch", epoch, "own_epoch", r.epoch)
		return false
	}
	return true
}

// namesItsLeader reports whether b is a non-leader's answer naming the
// leader it follows: a not-leader fetch answer, or a vote answer.
func namesItsLeader(b protocol.Body) bool {
	switch b := b.(type) {
	case *protocol.FetchResponse:
		return b.Error == protocol.FetchNotLeader
	case *protocol.VoteResponse:
		return true
	}
	return false
}
