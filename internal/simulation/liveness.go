package simulation

import (
	"time"

	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/replica"
)

// Liveness while faults run. The checker keeps, for every node and every
// directed link, when the last fault touching it ended (a time in the
// future while it still runs), and checks three rules:
//
//  1. Recovery: once no fault has run for liveBound, one voter leads and
//     every other voter follows it (same epoch, same leader), and this stays
//     so, at every event, until the next fault. (Before the bound, lingering
//     effects of the last fault may still cost a voter its leader.) Faults come in storms with
//     lulls longer than liveBound in between in some runs (params.lulls),
//     so this is checked while the fault phase runs, not only at the end.
//  2. No needless deposition: a leader that a majority can reach is not
//     deposed. "Can reach" is measured, not guessed: a voter is in contact
//     with the leader while clean fetch answers from it (delivered within
//     the normal network delay, not duplicated) come less than a
//     FetchTimeout apart, with no fault on the voter or its links since.
//     A new epoch needs pre-vote grants from a majority, and a voter in
//     contact grants none; so if the leader and the voters in contact
//     over the pre-vote round that began the deposing epoch (from when
//     its candidate last turned prospective, at most an election round
//     before) are a majority, the deposition is unexplained. A leader resigning in its
//     own epoch (check-quorum) likewise needs fewer than a majority to have
//     fetched from it within FetchTimeout, or a fault on itself.
//  3. No needless loss of contact: a voter leaves its leader (prospective
//     or candidate) only a FetchTimeout after the leader's last clean
//     answer, unless a fault touched the voter since, or gossip told it a
//     node failed (a hint may start an election sooner, never decide one:
//     a prospective keeps fetching from its leader and follows it again
//     when it answers, so rule 1 counts it as following then).
//
// Voters change (voters.go): "voter" means a voter of the set in force at
// the directory it records. Rule 1 asks that every voter of the leader's
// set, and every node acting as a voter, follow the leader (a voter the
// set added follows as an observer until it fetches the set); while no set
// is committed (R57: the first election needs every bootstrap voter) it
// allows three times the election rounds. Rule 2 counts majorities of the
// deposed leader's set and of the deposing candidate's; a leader its own
// set removed is explained. Rule 3 explains a voter whose set no longer
// holds its leader. A leader fenced by a voter's later epoch that stands
// again at once (R20's Restand) is judged by the fencing epoch.
//
// What counts as a fault: a crash or restart, a pause, a clock jump or stall,
// a disk error (all touch their node); a partition, a dropped message, a
// late (beyond the normal network delay), duplicated or cross-incarnation
// message (all touch the link they are on, until they are delivered); and,
// as disturbances, a voter set that drops a node's leader, adds a node that
// does not know it yet, or a removed leader stepping down.
// Gossip hints, true, stale or false, are never faults: gossip must not
// decide elections (docs/protocol.md §3.4). Clock drift within ±5% is normal.

// forever: no end; never: a node no fault has touched yet.
const (
	forever = time.Duration(1<<63 - 1)
	never   = -forever
)

// faultClock records when faults last touched each node, and when late
// messages were sent on each link. (Lost messages need no record: the
// liveness rules measure contact from what was delivered.)
type faultClock struct {
	node []time.Duration // node[i]: end of the last fault on node i
	// lateSent[a][b]: when a sent b its last late, duplicated or
	// lane-queued message.
	lateSent [][]time.Duration
	last     time.Duration // end of the last fault anywhere
	what     string        // the last fault, for failure reports
	// quietFrom is the start of the quiet period being watched (rule 1),
	// and settled says every voter has followed one leader in it.
	quietFrom time.Duration
	settled   bool
}

func (s *sim) initFaultClock() {
	n := len(s.nodes)
	s.fc.node = make([]time.Duration, n)
	s.fc.lateSent = make([][]time.Duration, n)
	for i := range s.fc.lateSent {
		s.fc.node[i] = never
		s.fc.lateSent[i] = make([]time.Duration, n)
		for j := range s.fc.lateSent[i] {
			s.fc.lateSent[i][j] = never
		}
	}
	s.fc.quietFrom = -1
}

func (s *sim) faultAt(until time.Duration, what string) {
	if until >= s.fc.last {
		s.fc.last = until
		s.fc.what = what
	}
}

// touchNode records a fault on node i lasting until until.
func (s *sim) touchNode(i int, until time.Duration, what string) {
	if until > s.fc.node[i] {
		s.fc.node[i] = until
	}
	s.faultAt(until, what)
}

// touchLink records a fault on messages a→b lasting until until (for rule
// 1, any fault anywhere ends a quiet period).
func (s *sim) touchLink(a, b int, until time.Duration, what string) {
	s.faultAt(until, what)
}

// liveRounds is the number of election rounds liveBound allows for: split
// votes and rounds that outlast their timeout happen, each costing a
// round.
const liveRounds = 4

// liveBound is how long after the last fault ended one leader must be
// followed by every voter, and how long a fault may explain a leader
// change:
//
//   - a follower notices a dead leader FetchTimeout plus a random part of
//     ElectionTimeout after its last contact, on a clock that may run 5%
//     slow, at its next tick or loop round;
//   - then each election round (pre-vote, vote) ends within 2×ElectionTimeout
//     (slow clock: /0.95) plus its messages (2 hops), its fsyncs (the
//     candidate's vote, the voter's, a late report) and a tick and loop
//     round; liveRounds of them;
//   - then BeginEpoch reaches the voters and they persist the new epoch.
func (s *sim) liveBound() time.Duration {
	p := &s.p
	slow := func(d time.Duration) time.Duration { return time.Duration(float64(d) / 0.95) }
	detect := slow(p.fetchTimeout+p.electionTimeout) + p.tickMax + p.batchWindow
	round := slow(2*p.electionTimeout) + 2*p.netMax + 3*p.diskMax + p.tickMax + p.batchWindow
	return detect + liveRounds*round + 2*p.netMax + 2*p.diskMax
}

// liveOn says whether the liveness rules are checked: not with SafetyOnly
// or LyingDisk (whose self-test must be caught by the safety checks alone),
// nor with NoLiveness.
func (s *sim) liveOn() bool {
	return !s.opts.NoLiveness && !s.opts.SafetyOnly && !s.opts.LyingDisk
}

// checkRecovery is rule 1, run after every event.
func (s *sim) checkRecovery() {
	if s.err != nil || !s.liveOn() {
		return
	}
	if len(s.partitions) > 0 || s.fc.last > s.now || s.down > 0 {
		s.fc.quietFrom = -1
		return
	}
	if s.fc.quietFrom != s.fc.last {
		s.fc.quietFrom, s.fc.settled = s.fc.last, false
	}
	bound := s.bound
	if s.cset == nil {
		// R57: while no voter set is committed, an election needs the
		// grant of every bootstrap voter, so split votes cost rounds far
		// more often (with 6 or 7 voters a bootstrap can need more than
		// liveRounds); three times the rounds.
		bound += 2 * liveRounds * s.electionRound()
	}
	waited := s.now - s.fc.quietFrom
	if s.followDirty || s.now > s.followUntil {
		s.followOK, s.followUntil = s.oneLeaderFollowed()
		s.followDirty = false
	}
	if s.followOK {
		if !s.fc.settled {
			s.fc.settled = true
			s.res.Recoveries++
			if waited > s.res.MaxRecovery {
				s.res.MaxRecovery = waited
			}
			if r := float64(waited) / float64(bound); r > s.res.MaxRecoveryRatio {
				s.res.MaxRecoveryRatio = r
			}
		}
		return
	}
	if s.fc.settled && waited > bound {
		s.fail("liveness: no fault for %v (the last: %s, ended at %v), every voter followed one leader, and now not:\n%s",
			waited, s.fc.what, s.fc.quietFrom, s.dump())
		return
	}
	if waited > bound {
		s.fail("liveness: no fault for %v (the last: %s, ended at %v), and still no leader that every voter follows (bound %v):\n%s",
			waited, s.fc.what, s.fc.quietFrom, bound, s.dump())
	}
}

// oneLeaderFollowed says whether one node leads and every voter of its
// set in force (at the directory the set records), and every other node
// that acts as a voter, follows it in its epoch (as last observed by the
// checker), and until when the answer holds if no node changes (a
// prospective counts as following only for a while after a failure hint).
// checkState marks it for recomputation (followDirty) whenever a node's
// role, epoch, leader or voter set changes.
func (s *sim) oneLeaderFollowed() (bool, time.Duration) {
	var l *node
	for _, nd := range s.nodes {
		if nd.role == replica.RoleLeader {
			if l != nil {
				return false, forever
			}
			l = nd
		}
	}
	if l == nil {
		return false, forever
	}
	vs, _, _ := l.inForce()
	until := forever
	for _, nd := range s.nodes {
		if nd == l || nd.role == replica.RoleObserver && !hasVoter(vs, nd.id, nd.dirID) {
			continue
		}
		// A voter the set added that has not fetched the set yet is an
		// observer until it does (its log may be far behind the set's
		// offset): it follows the leader as one.
		following := s.following(nd) || nd.role == replica.RoleObserver
		if !following || nd.epoch != l.epoch || nd.leader != l.id {
			return false, forever
		}
		if nd.role == replica.RoleProspective {
			until = min(until, nd.failHintAt+s.bound)
		}
	}
	return true, until
}

// following says whether voter nd follows its leader: as a follower, or as
// a prospective that a failure hint sent asking for pre-votes lately (gossip
// may start an election sooner, never decide one; a prospective keeps
// fetching from its leader and follows it again when it answers).
func (s *sim) following(nd *node) bool {
	return nd.role == replica.RoleFollower ||
		nd.role == replica.RoleProspective && nd.failHintAt > 0 && s.now-nd.failHintAt <= s.bound
}

// contactRing is how many recent clean fetch answers a voter remembers
// for rule 2.
const contactRing = 32

// contact is a clean fetch answer a voter received: from whom, in which
// epoch, when.
type contact struct {
	at    time.Duration
	from  int
	epoch uint64
}

// noteContact records, before nd's core steps m (delivered within the
// normal delay and not a duplicate if clean), what the liveness rules
// need: a clean successful fetch answer (leader contact, as the core
// counts it) or a clean fetch request (a follower's sign of life, as a
// leader counts it for check-quorum).
func (s *sim) noteContact(nd *node, from int, m protocol.Message, clean bool) {
	switch b := m.Body.(type) {
	case *protocol.FetchResponse:
		// Only the first answer to its latest fetch (an answer to an older
		// fetch, or a second answer to a duplicated request, proves nothing
		// about now), a successful one from a node that says it leads the
		// answer's epoch. That proves the leader alive now: the answer
		// that tells a follower who leads counts too.
		if b.FetchID != nd.lastFetchID || b.FetchID == nd.answeredID {
			return
		}
		nd.answeredID = b.FetchID
		known := nd.leader == s.nodes[from].id && nd.epoch == b.Epoch
		if clean && b.Error == protocol.FetchOK && b.LeaderID == s.nodes[from].id && b.Epoch >= nd.epoch && (known || !s.opts.CoreContact) {
			nd.contacts[nd.nContacts%contactRing] = contact{at: s.now, from: from, epoch: b.Epoch}
			nd.nContacts++
		}
	case *protocol.FetchRequest:
		if !clean {
			return
		}
		if nd.heardAt == nil {
			nd.heardAt = make([]time.Duration, len(s.nodes))
			nd.heardEpoch = make([]uint64, len(s.nodes))
		}
		nd.heardAt[from], nd.heardEpoch[from] = s.now, b.CurrentEpoch
	}
}

// freshness is how long after a leader's answer a voter still counts it as
// contact, at the least, in simulated time: FetchTimeout on a clock up to
// 5% fast, minus the tick the core's clock may lag behind.
func (s *sim) freshness() time.Duration {
	return time.Duration(float64(s.p.fetchTimeout)/1.05) - s.p.tickMax - s.p.batchWindow - time.Millisecond
}

// inContact says whether voter v had leader l's contact in epoch at every
// moment of [from, to]: clean answers from l in its current incarnation,
// none further apart than freshness, the first at most freshness before
// from, the last at most freshness before to; no fault on v itself since
// (a restart forgets contact; a clock jump makes it stale); and no late or
// duplicated message from v sent since from (it could be a grant of the
// round, sent before the contact and delivered late). Lost messages need
// no exception: they show as missing answers.
func (s *sim) inContact(v *node, l int, epoch uint64, from, to time.Duration) bool {
	fresh := s.freshness()
	if fresh <= 0 || !v.up {
		return false
	}
	var times []time.Duration
	n := v.nContacts
	for k := 1; k <= min(n, contactRing); k++ {
		c := v.contacts[(n-k)%contactRing]
		if c.at > to {
			continue
		}
		if c.from == l && c.epoch == epoch {
			times = append(times, c.at)
		}
		if c.at < from-fresh {
			break
		}
	}
	if len(times) == 0 {
		return false
	}
	// times is newest first.
	if to-times[0] >= fresh {
		return false
	}
	for k := 1; k < len(times); k++ {
		if times[k-1]-times[k] >= fresh {
			return false
		}
		if times[k] <= from {
			break
		}
	}
	first := times[len(times)-1]
	if first > from || from-first >= fresh {
		return false
	}
	if s.fc.node[v.idx] >= first {
		return false
	}
	for o := range s.nodes {
		if s.fc.lateSent[v.idx][o] >= from {
			return false
		}
	}
	return true
}

// electionRound is the longest a pre-vote round can run before its last
// grant arrives: the round times out after up to 2×ElectionTimeout on a
// clock that may run 5% slow, plus a tick.
func (s *sim) electionRound() time.Duration {
	return time.Duration(float64(2*s.p.electionTimeout)/0.95) + s.p.tickMax + s.p.batchWindow
}

// leaderSteppedDown is rule 2: nd led epoch and now has role role in epoch
// newEpoch. A new epoch needs a candidate, and a candidate needs pre-vote
// grants from a majority of its set in force; a voter grants none while it
// has leader contact (and counts contact only from a leader its own set
// holds). Majorities are of the deposed leader's set in force and of the
// candidate's: both must be covered for the deposition to be unexplained.
// A leader its own set removed is explained (R58: it resigns once the
// removal commits, and its followers may elect another first).
// So if, over the pre-vote round that ended when newEpoch was first seen,
// the leader and voters in clean contact with it were a majority, the
// deposition is unexplained. A leader that resigns in its own epoch
// (check-quorum) must not while a majority (itself included) sent it
// clean fetches within its FetchTimeout, unless a fault touched the
// leader itself since it was elected, within liveBound. (Faults on the
// leader need no exception for a new epoch: a paused leader's followers
// get no answers, so they are not in contact.)
func (s *sim) leaderSteppedDown(nd *node, epoch, newEpoch uint64, role replica.Role) {
	if !s.liveOn() || s.err != nil {
		return
	}
	s.res.Depositions++
	own, _, _ := nd.inForce()
	if !hasVoter(own, nd.id, nd.dirID) {
		s.tracef("%s DEPOSED in epoch %d (as %s in epoch %d): its set in force %s removed it", nd.id, epoch, role, newEpoch, fmtVoters(own))
		return
	}
	sets := [][]protocol.Voter{own}
	in := 1
	var names []string
	var contacts []*node
	if newEpoch > epoch {
		// R20: a leader fenced by a voter's later epoch (left by that
		// voter's failed candidacy) stands again at once in the next one
		// (Restand): the epoch that deposed it is the fencing one, begun by
		// the other candidate.
		for by, ok := s.epochBy[newEpoch]; ok && by == nd.idx && newEpoch-1 > epoch; by, ok = s.epochBy[newEpoch] {
			newEpoch--
		}
		t := s.now
		from := t - s.electionRound()
		if seen, ok := s.epochSeen[newEpoch]; ok && seen < t {
			t = seen
			// Grants count only in the candidate's current pre-vote
			// round, which began at or after it last turned prospective
			// before it became a candidate.
			from = t - s.electionRound()
			if r, ok := s.epochRound[newEpoch]; ok {
				from = max(from, r)
			}
		}
		if r, ok := s.epochRound[newEpoch]; ok && r < nd.leaderSince {
			// The candidate's pre-vote round began before this leader was
			// elected: its grants may predate the leader, when no voter
			// had one to be in contact with. Only a fault makes such a
			// round outlast the election (a pause or a stalled clock on
			// the candidate keeps its round open while the others
			// elect).
			s.tracef("%s DEPOSED in epoch %d by a pre-vote round begun at %v, before it led (%v)", nd.id, epoch, r, nd.leaderSince)
			return
		}
		cand := -1
		if by, ok := s.epochBy[newEpoch]; ok {
			cand = by // it votes for itself, in contact or not
			if cs, _, boot := s.nodes[by].inForce(); !boot {
				sets = append(sets, cs)
			}
		}
		for _, v := range s.nodes {
			if vs, _, boot := v.inForce(); v != nd && v.idx != cand && (boot || hasID(vs, nd.id)) && s.inContact(v, nd.idx, epoch, from, t) {
				contacts = append(contacts, v)
			}
		}
	} else {
		if s.fc.node[nd.idx] >= max(s.now-s.liveBound(), nd.leaderSince) {
			return // a clock jump or stall, a pause: check-quorum may fire
		}
		fresh := s.freshness()
		for _, v := range s.nodes {
			if v == nd || nd.heardAt == nil || nd.heardEpoch[v.idx] != epoch || s.now-nd.heardAt[v.idx] >= fresh {
				continue
			}
			contacts = append(contacts, v)
		}
	}
	for _, vs := range sets {
		in, names = 0, names[:0]
		if hasVoter(vs, nd.id, nd.dirID) {
			in++
		}
		for _, v := range contacts {
			if hasVoter(vs, v.id, v.dirID) {
				in++
				names = append(names, v.id)
			}
		}
		s.tracef("%s DEPOSED in epoch %d (as %s in epoch %d); of %s in clean contact: %v", nd.id, epoch, role, newEpoch, fmtVoters(vs), names)
		if in <= len(vs)/2 {
			return
		}
	}
	s.fail("liveness: leader %s of epoch %d became %s in epoch %d (epoch %d first seen at %v), but it and %d voters in clean contact with it %v are a majority of %s, and no fault touched it for %v\n%s",
		nd.id, epoch, role, newEpoch, newEpoch, s.epochSeen[newEpoch], in-1, names, fmtVoters(sets[len(sets)-1]), s.liveBound(), s.dump())
}

// followerLeft is rule 3: nd followed leader in epoch and became role. If
// that leader still leads the epoch, nd must not while a clean answer of it
// came less than a
// FetchTimeout ago, unless a fault touched nd since (a restart, a pause, a
// clock jump or stall) or gossip told it a node failed since (a hint may
// start an election sooner).
func (s *sim) followerLeft(nd *node, leader string, epoch uint64, role replica.Role) {
	if !s.liveOn() || s.err != nil || leader == "" {
		return
	}
	li, ok := s.byID[leader]
	if !ok || nd.nContacts == 0 {
		return
	}
	if l := s.nodes[li]; !l.up || l.role != replica.RoleLeader || l.epoch != epoch {
		return // the leader is gone (or resigned): nd is right to look for another
	}
	if vs, _, boot := nd.inForce(); !boot && !hasID(vs, leader) {
		return // its set no longer holds the leader (R58): it takes no answer of it
	}
	c := nd.contacts[(nd.nContacts-1)%contactRing]
	if c.from != li || c.epoch != epoch || s.now-c.at >= s.freshness() {
		return
	}
	if s.fc.node[nd.idx] >= c.at || nd.failHintAt >= c.at {
		return
	}
	s.fail("liveness: %s left leader %s of epoch %d (now %s) %v after a clean answer from it (FetchTimeout %v), with no fault on %s since\n%s",
		nd.id, leader, epoch, role, s.now-c.at, s.p.fetchTimeout, nd.id, s.dump())
}
