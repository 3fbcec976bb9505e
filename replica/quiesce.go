package replica

import (
	"time"

	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/replica/internal/bugs"
)

// Quiescent idle logs (docs/protocol.md 3.15, R98-R100). A caught-up
// follower's next fetch is marked quiescent; its leader parks it with no
// deadline, and both sides take their liveness of the other from the
// node's contact with the peer (Config.Contact) instead of from a fetch
// every FetchMaxWait. A quiesced log has no deadline of its own: the
// shell wakes it when the peer falls silent (PeerSilent) or a quiescent
// message may be lost (Resync, PeerDown).

// PeerContact is the node's contact with its peers (R98): any
// authenticated message from a peer, of any log or a heartbeat, is
// contact with it. internal/contact's Clock is one; the TCP transport and
// the simulation drive it.
type PeerContact interface {
	// LastHeard is when anything was last heard from peer (zero: never).
	LastHeard(peer string) time.Time
}

// QuiescenceStats count quiescent fetches (R99) over the replica's life.
type QuiescenceStats struct {
	// Sent is how many quiescent fetches this replica sent as a
	// follower; Parked how many it parked without a deadline as a
	// leader.
	Sent, Parked uint64
}

// quiescence reports whether this replica may quiesce and park quiescent
// fetches: it knows its node's contact, and the cluster runs at
// FeatureLevelQuiescence (every node reads the flag and heartbeats).
func (r *Replica) quiescence() bool {
	return r.cfg.Contact != nil && r.level >= protocol.FeatureLevelQuiescence
}

// nodeContact is when the node last heard from peer (zero without a
// contact clock).
func (r *Replica) nodeContact(peer string) time.Time {
	if r.cfg.Contact == nil {
		return time.Time{}
	}
	return r.cfg.Contact.LastHeard(peer)
}

// contactFresh reports whether the node heard from peer within
// FetchTimeout.
func (r *Replica) contactFresh(peer string) bool {
	t := r.nodeContact(peer)
	return !t.IsZero() && r.now.Sub(t) < r.cfg.FetchTimeout
}

// quiesced reports whether this follower's quiescent fetch is out to the
// leader it follows.
func (r *Replica) quiesced() bool {
	return r.leaderID != "" && r.fetch.Quiescent() && r.fetch.Target() == r.leaderID
}

// noteQuiescence decides, on an answer to a fetch from its leader, whether
// the follower's next fetch is quiescent (R99): a voter following, the
// answer brought no entries and an HW equal to its log end, its own HW is
// there, and nothing is in its writer.
func (r *Replica) noteQuiescence(from string, entries int, hw uint64) {
	leo := r.log.LEO()
	r.quiesceNext = r.quiescence() && r.role == RoleFollower && r.voter && from == r.leaderID &&
		entries == 0 && hw == leo && r.hw == leo && r.log.durableEnd == leo && len(r.log.marks) == 0
}

// unquiesce ends this follower's quiescence: the node's last contact with
// the leader is its last leader contact (the leader's node was heard from
// then, and parked the fetch), its election timer runs from there, and
// its fetch is due for a retry, a normal one. After a resync the contact
// is fresh, so the follower fetches for FetchTimeout before it would
// stand (a leader log that stopped on a node that lives on is replaced
// so); after a silence it is not, and it stands soon.
func (r *Replica) unquiesce() {
	if heard := r.nodeContact(r.leaderID); heard.After(r.lastLeaderContact) {
		r.lastLeaderContact = heard
		r.electionDeadline = heard.Add(r.cfg.FetchTimeout + r.randDuration(r.cfg.ElectionTimeout))
	}
	r.quiesceNext = false
	r.fetch.TimeOut()
}

// PeerSilent tells the replica that its node heard nothing from peer for
// FetchTimeout (the node's contact clock, R98). It is the event that
// wakes a quiesced log, which keeps no deadline of its own (R96 holds: a
// quiesced core changes nothing as time passes, only on this event): a
// follower quiesced on peer wakes (unquiesce: it stands FetchTimeout
// after the last contact, as after a silent leader); a leader no longer
// counts peer's parked quiescent fetch as contact (heardAt), so its
// check-quorum in this round's Ready sees peer as last heard at its last
// fetch. A report the node's contact has overtaken (peer heard from
// again since) is ignored.
func (r *Replica) PeerSilent(peer string) {
	if r.err != nil || peer == "" || peer == r.id || r.contactFresh(peer) {
		return
	}
	switch {
	case r.role == RoleLeader:
		if r.parksQuiescent(peer) {
			r.leader.silent[peer] = true
		}
	case r.quiesced() && r.leaderID == peer:
		r.logger.Debug("the quiesced leader's node fell silent: fetching again", "leader", peer, "heard", r.nodeContact(peer))
		r.unquiesce()
	}
}

// Resync tells the replica that a quiescent message between its node and
// peer may have been lost (R100: the heartbeats' counts disagree, or the
// connection closed): a follower quiesced on peer fetches again now, a
// normal fetch; a leader answers the quiescent fetch it parks for peer
// now, so that peer's follower fetches again too.
func (r *Replica) Resync(peer string) {
	if r.err != nil || peer == "" || peer == r.id || bugs.QuiesceNoResync {
		return
	}
	r.resync(peer)
}

func (r *Replica) resync(peer string) {
	switch {
	case r.role == RoleLeader:
		if p := r.leader.parkedFrom(peer); p != nil && p.quiescent {
			q := *p
			r.unparkQuiescent(q)
			r.leader.unpark(peer)
			r.respondFetch(peer, q.req)
		}
	case r.quiesced() && r.leaderID == peer:
		r.unquiesce()
	}
}

// leaderNotLeading takes a message from peer that only a replica not
// leading sends (a fetch in our epoch, a pre-vote for a later one; an
// older fetch may be one sent before peer led): if this follower
// is quiesced on peer, its leader's log no longer leads while the
// leader's node lives on, and heartbeats keep the contact fresh, so
// PeerSilent never comes. Its quiescent fetch was answered "not leader"
// at the step-down unless the fetch, or that answer, was lost and the
// resync too: the follower then fetches again now, a normal fetch, whose
// answer tells it the leader is gone (R99, R100).
func (r *Replica) leaderNotLeading(peer string) {
	if bugs.QuiesceTrustsLeader || r.role != RoleFollower || !r.quiesced() || r.leaderID != peer {
		return
	}
	r.logger.Debug("the quiesced leader fetches or campaigns: fetching again", "leader", peer)
	r.unquiesce()
}

// heardAt is when the leader last heard from voter v for check-quorum
// (R27) and the hand-over and replacement checks: its last fetch, or now
// while a quiescent fetch of v's is parked and the node has not reported
// v silent since (R99): v is alive and caught up, and its fetch stands.
func (r *Replica) heardAt(v string) time.Time {
	return r.contactedAt(v, r.leader.lastFetch[v])
}

// contactedAt is t, when this leader last heard from replica id by its
// fetches, or now while it parks a quiescent fetch of id's and no
// PeerSilent came for id since (R99).
func (r *Replica) contactedAt(id string, t time.Time) time.Time {
	if r.parksQuiescent(id) && (!r.leader.silent[id] || bugs.QuiesceIgnoresContact) {
		return r.now
	}
	return t
}

// parksQuiescent reports whether this leader parks a quiescent fetch of
// id's.
func (r *Replica) parksQuiescent(id string) bool {
	p := r.leader.parkedFrom(id)
	return p != nil && p.quiescent
}

// unparkQuiescent records, as a quiescent fetch p leaves the parked
// ones (answered), the contact heardAt counted for its fetcher as its
// last fetch: until its next fetch arrives, a round trip later,
// check-quorum must not count it as unheard since the fetch before.
func (r *Replica) unparkQuiescent(p parkedFetch) {
	if p.quiescent {
		r.leader.lastFetch[p.from] = r.heardAt(p.from)
	}
}

// answerQuiescentParked answers every quiescent fetch a leader parks
// "not leader" (naming successor, "" if none) as it steps down: such a
// fetch has no deadline, and its follower, which trusts its node's
// contact, would otherwise wait for it as long as the node lives.
func (r *Replica) answerQuiescentParked(successor string) {
	for _, p := range r.leader.parked {
		if p.quiescent {
			r.send(p.from, &protocol.FetchResponse{
				FetchID: p.req.FetchID, LeaderID: successor, Epoch: r.epoch, Error: protocol.FetchNotLeader, Quiescent: true,
			})
		}
	}
}
