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

// holdQuiesced is the follower's timers while its quiescent fetch is out
// (tickFollower): it reports true while the node's contact with the
// leader is within FetchTimeout (the leader is alive and parks the
// fetch: no retry, no contact fetch, no election timer). Once it is not,
// the follower wakes: the leader was last heard from at the node's last
// contact, its election timer runs from there (it stands FetchTimeout
// after the contact stopped, as after a silent leader), and the fetch is
// due for a retry, a normal one.
func (r *Replica) holdQuiesced() bool {
	if !r.quiesced() {
		return false
	}
	if r.contactFresh(r.leaderID) {
		return true
	}
	r.logger.Debug("the quiesced leader's node fell silent: fetching again", "leader", r.leaderID, "heard", r.nodeContact(r.leaderID))
	r.unquiesce()
	return false
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
// FetchTimeout (the node's contact clock, R98): a quiesced follower of
// peer wakes (holdQuiesced); a leader's check-quorum in the next Ready
// no longer counts a quiescent fetch of peer's (heardAt). It is the
// event that wakes a quiesced log, which has no deadline of its own.
func (r *Replica) PeerSilent(peer string) {
	if r.err != nil || peer == "" || peer == r.id {
		return
	}
	if r.role == RoleFollower && r.leaderID == peer {
		r.holdQuiesced()
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

// heardAt is when the leader last heard from voter v for check-quorum
// (R27) and the hand-over and replacement checks: its last fetch, or,
// while a quiescent fetch of v's is parked, the node's contact with v if
// later (R99): v is alive and caught up, and its fetch stands.
func (r *Replica) heardAt(v string) time.Time {
	ls := r.leader
	t := ls.lastFetch[v]
	if p := ls.parkedFrom(v); p != nil && p.quiescent {
		if bugs.QuiesceIgnoresContact {
			return r.now
		}
		t = later(t, r.nodeContact(v))
	}
	return t
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
