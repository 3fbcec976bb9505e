package simulation

import (
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"time"

	"github.com/replog-io/replog/internal/shell"
	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/replica"
	"github.com/replog-io/replog/storage"
)

// Voter changes and voter wipes (docs/protocol.md R55–R58).
//
// Every node's disk has a directory ID, "<id>.d<k>" for its k-th disk
// (replica.Config.DirID): a wipe (voterWipe, and retention.go's observer
// wipes) restarts a node on an empty store with the next one. The
// workload (voterChangeTimer) proposes voter changes through
// shell.VoterChange on random nodes: adds of observers and of nodes it
// removed earlier, removes of followers and of the leader, and refusals
// that must stay refusals (an unknown node, the last voter). In runs with
// ManualVoterChanges the workload also heals wiped voters itself (remove
// the old incarnation, add the new one); otherwise the core's automatic
// replacement must.
//
// The checker mirrors each node's voter-set rows from the writes its core
// issues (node.vrows: appended EntryVoters entries, truncations, prefix
// deletions and resets, and the store's rows at a restart), and checks:
//
//   - R55: the core's set in force (Status.Voters, VotersOffset,
//     Bootstrap) is the newest row of that mirror, and its role agrees
//     with it: an observer iff (ID, DirID) is not in the set (in the
//     bootstrap set: iff its ID is not a bootstrap voter), except a leader
//     removed from its set, which leads on only until the removal commits
//     (R58).
//   - R56, R57, every majority counted against the set in force: each HW
//     advance of a leader is covered by a majority of a voter set it had in
//     force in that round (at its start, or appended in it), each voter
//     counted only if the disk at the directory the set records holds the
//     entries (a lost disk counts with what it held when it was lost: an
//     answer it sent before may still arrive); nothing commits while the
//     bootstrap set is in force; no vote is granted by a node that is not a
//     voter of its own set in force unless the candidate's request named
//     its directory (KIP-853: a voter added by a set it has not fetched
//     yet), and votes are counted per directory (one per epoch per disk).
//   - A new incarnation is never counted as the old one: a leader's record
//     of a voter's log end (Status.RemoteLEO) never exceeds what the disk
//     at the recorded directory ever held.
//   - R58, one change at a time: every new voter set a leader appends
//     differs from the one it had in force by at most one voter (the same
//     set again is allowed: retention re-appends the set in force above a
//     log start that passed it), the committed log's sets form such a chain
//     too, its first set names exactly the bootstrap voters, and no
//     leader's log holds two voter sets above the committed log.
//   - Outcomes: an acknowledged change is committed at the offset it names,
//     and that set has (add) or lacks (remove) the node; refusals are the
//     documented ones; an add of an unknown node and a remove of the last
//     voter never succeed.
//   - Liveness (liveness.go) counts voters against the set in force, and a
//     removed leader's resignation is explained (R58).
//   - Convergence (converged) also waits until no voter of the leader's
//     set has lost its disk and every wiped voter is a voter again: the
//     automatic replacement (or, with ManualVoterChanges, the workload)
//     must heal it.
//
// How many voters may lose their disks, and when. A committed entry is on a
// majority M of the set S in force. With R56 a wiped voter's new
// incarnation is no voter of S: it neither votes nor is counted. Every
// election and every commit then needs a majority of S among the voters
// that kept their disks, and any majority of S meets M; so safety holds
// whatever the number of wipes, and only liveness is at stake: once the
// voters of S that kept their disks are fewer than a majority of S, no
// leader can be elected and nothing commits ever again, and the entries
// only the lost disks held are lost for good. So the nemesis wipes a voter
// only when (voterWipeAllowed):
//
//   - no other node is a voter without its disk, and no earlier wipe is
//     still to be healed (its new incarnation a voter of the committed set
//     again): at most one voter without its old disk at a time;
//   - every voter set that may be in force anywhere (the committed one,
//     and each node's newest set and sets above the committed log) has at
//     least 3 voters, so that the voters left with their disks are still a
//     majority of it (2 of 3); a set of 1 or 2 voters never loses one;
//   - in each such set that holds the victim, a majority other than the
//     victim is up: never while a majority is otherwise down, so that the
//     cluster can go on (and replace the victim) once it restarts;
//   - no voter change is in flight (a set newer than the committed one,
//     other than it, anywhere): a leader that appended its own removal
//     may hold the newest log yet no longer take itself for a voter (R55),
//     so it neither campaigns nor grants to a less up-to-date candidate,
//     and is as good as a second voter lost.
//
// Observer wipes (retention.go) wait while the committed set has one voter:
// an observer may be added as the second from a fetch of its old disk
// delivered late, and a set of two with a lost disk commits nothing again.
//
// The workload keeps every set it makes at 3 voters or more: it removes a
// voter only from a committed set of 4 or more, and never while a voter has
// lost its disk (except the remove of the lost one, in manual runs, which
// may take a set of 3 to 2 for as long as the automatic replacement does).
// In runs that start with 1 or 2 voters it adds observers, and asks to
// remove the last voter (which must be refused).
//
// A NoSync node's power loss is a partial wipe; disk.go's taint logic counts
// holders against the committed set with the same directory rule, so that
// a loss that takes an entry's last majority stops the run, as before.

// vcParams are the knobs of voter changes and voter wipes for one run.
type vcParams struct {
	// changeEvery: the mean gap between two voter changes of the
	// workload (0: none).
	changeEvery time.Duration
	// removeLeaderProb: a remove names the leader.
	removeLeaderProb float64
	// manual: ManualVoterChanges on every node; the workload heals wiped
	// voters. healOnly: the timer makes no other change.
	manual, healOnly bool
	// wipeEvery: the mean gap between two voter wipes (0: none);
	// wipeAfterCommitProb: a voter that holds what a leader just
	// committed is wiped right after, and the leader may crash soon
	// after that (what R56 guards against: the entry then lives on
	// fewer than a majority of disks).
	wipeEvery           time.Duration
	wipeAfterCommitProb float64
}

// chooseVoterChanges draws the knobs from the voter stream (so that the
// other streams draw as before). Runs with voter changes get an observer
// or two to add if they have none.
func chooseVoterChanges(p *params, r *rand.Rand) {
	if r.Intn(3) != 0 {
		p.vc.changeEvery = ms(10 + 120*r.Float64())
		p.vc.removeLeaderProb = 0.5 * r.Float64()
		if p.observers == 0 {
			p.observers = 1 + r.Intn(2)
		}
	}
	p.vc.manual = r.Intn(4) == 0
	if r.Intn(2) == 0 {
		p.vc.wipeEvery = ms(20 + 200*r.Float64())
		p.vc.wipeAfterCommitProb = 0.1 * r.Float64()
	}
	if p.vc.wipeEvery > 0 && p.vc.changeEvery == 0 {
		// The timer only heals wiped voters (manual runs); in automatic
		// runs it proposes nothing, and its draws keep the voter stream
		// as the trace hashes record it.
		p.vc.changeEvery, p.vc.healOnly = ms(30+300*r.Float64()), true
	}
}

// dirName is the directory ID of a node's k-th disk.
func dirName(id string, k int) string { return fmt.Sprintf("%s.d%d", id, k) }

// lostDisk is a disk as it was when its node was wiped: an answer it sent
// before may still arrive and be counted.
type lostDisk struct {
	store   durable
	retired uint64
	maxLEO  uint64
}

// Event ids of evVoterWipe.
const (
	wipeTimer = iota // the wipe timer: a random voter
	wipeNode         // event.node, right after it counted toward a commit
)

// setupVoters starts the timers of voter changes and voter wipes.
func (s *sim) setupVoters() {
	if s.p.vc.manual && (s.p.vc.changeEvery > 0 || s.p.vc.wipeEvery > 0) {
		s.res.Faults.ManualRuns++
	}
	if s.p.vc.changeEvery > 0 {
		s.schedule(s.vcBetween(0, 2*s.p.vc.changeEvery), event{kind: evVoterChange})
	}
	if s.p.vc.wipeEvery > 0 {
		s.schedule(s.vcBetween(0, 2*s.p.vc.wipeEvery), event{kind: evVoterWipe, id: wipeTimer})
	}
}

// vcBetween is between, drawn from the voter stream.
func (s *sim) vcBetween(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(s.vr.Int63n(int64(hi-lo)+1))
}

// ---- the mirror of each node's voter-set rows ----

// storeRows returns a store's voter-set rows (none for a store that keeps
// none), as the core reads them at New.
func storeRows(st storage.Store) []protocol.VotersAt {
	if vs, ok := st.(interface{ VoterSets() []protocol.VotersAt }); ok {
		return vs.VoterSets()
	}
	return nil
}

// inForce is nd's set in force by the mirror: its newest row, or nil with
// bootstrap true.
func (nd *node) inForce() (vs []protocol.Voter, offset uint64, bootstrap bool) {
	if n := len(nd.vrows); n > 0 {
		return nd.vrows[n-1].Voters, nd.vrows[n-1].Offset, false
	}
	return nil, 0, true
}

// member reports whether nd is a voter of its own set in force (bootstrap:
// a bootstrap voter).
func (s *sim) member(nd *node) bool {
	vs, _, boot := nd.inForce()
	if boot {
		return slices.Contains(s.voters, nd.id)
	}
	return hasVoter(vs, nd.id, nd.dirID)
}

// outgoingRows reports whether nd's newest voter set removed it: the set
// before it holds nd at its directory, the newest does not.
func (nd *node) outgoingRows() bool {
	n := len(nd.vrows)
	return n >= 2 && hasVoter(nd.vrows[n-2].Voters, nd.id, nd.dirID) && !hasVoter(nd.vrows[n-1].Voters, nd.id, nd.dirID)
}

// outgoing reports whether nd may campaign though its set in force lacks
// it (R55: a replica counts its newest set, and a leader that removed
// itself leads until the removal commits): its newest set removed it and
// its HW has not passed that set's entry.
func (nd *node) outgoing(hw uint64) bool {
	return nd.outgoingRows() && nd.vrows[len(nd.vrows)-1].Offset >= hw
}

// noteMsgSet records vs, now in force on nd, in its message window.
func (nd *node) noteMsgSet(vs []protocol.Voter) {
	nd.msgSets = append(nd.msgSets, vs)
	nd.msgOutgoing = nd.msgOutgoing || nd.outgoingRows()
}

// memberInRound reports whether nd was a voter of a set it had in force
// when the messages it sends now may have been built: during its current
// round (a fetch answer of the same round may change its set after a
// message was built) or an earlier one whose messages its core still held
// for a write (msgSets).
func (s *sim) memberInRound(nd *node) bool {
	for _, vs := range nd.msgSets {
		if vs == nil && slices.Contains(s.voters, nd.id) || hasVoter(vs, nd.id, nd.dirID) {
			return true
		}
	}
	return s.member(nd)
}

func hasVoter(vs []protocol.Voter, id, dir string) bool {
	for _, v := range vs {
		if v.ID == id && v.DirID == dir {
			return true
		}
	}
	return false
}

func hasID(vs []protocol.Voter, id string) bool {
	for _, v := range vs {
		if v.ID == id {
			return true
		}
	}
	return false
}

func fmtVoters(vs []protocol.Voter) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = v.ID + "/" + v.DirID
	}
	return "{" + strings.Join(parts, " ") + "}"
}

// setDelta is the number of (ID, directory) pairs in one set and not the
// other.
func setDelta(a, b []protocol.Voter) int {
	n := 0
	for _, v := range a {
		if !hasVoter(b, v.ID, v.DirID) {
			n++
		}
	}
	for _, v := range b {
		if !hasVoter(a, v.ID, v.DirID) {
			n++
		}
	}
	return n
}

// rowsAppend records the voter sets among entries nd's core appended. A
// leader's new set must differ from the one it had in force by one voter at
// most (R58).
func (s *sim) rowsAppend(nd *node, es []protocol.Entry) {
	var st *replica.Status
	for _, e := range es {
		if e.Type != protocol.EntryVoters {
			continue
		}
		vs, owed, err := protocol.DecodeVoterSet(e.Data)
		if err == nil {
			err = protocol.ValidateVoterSet(vs, owed)
		}
		if err != nil {
			s.fail("%s: appends a voter set at offset %d that is not valid: %v", nd.id, e.Offset, err)
			return
		}
		if st == nil {
			x := nd.r.Status()
			st = &x
		}
		if st.Role == replica.RoleLeader && st.Epoch == e.Epoch && !s.opts.SafetyOnly {
			prev, _, boot := nd.inForce()
			if boot {
				if ids := voterIDs(vs); !sameIDs(ids, s.voters) {
					s.fail("%s: its first voter set %s (offset %d) does not name exactly the bootstrap voters %v (R57)", nd.id, fmtVoters(vs), e.Offset, s.voters)
					return
				}
			} else if d := setDelta(prev, vs); d > 1 {
				s.fail("%s: leader of epoch %d appends voter set %s at offset %d, %d voters away from the set in force %s: one change at a time (R58)",
					nd.id, st.Epoch, fmtVoters(vs), e.Offset, d, fmtVoters(prev))
				return
			} else if why := owedCarried(nd.vrows[len(nd.vrows)-1], vs, owed); why != "" {
				s.fail("%s: leader of epoch %d appends voter set %s owing %s at offset %d after %s owing %s: %s (R58)",
					nd.id, st.Epoch, fmtVoters(vs), fmtVoters(owed), e.Offset, fmtVoters(prev), fmtVoters(nd.vrows[len(nd.vrows)-1].Owed), why)
				return
			} else if added, ok := addedVoter(prev, vs); ok && !s.current(added) && !s.tainted {
				// The leader added an incarnation whose disk is already
				// lost (it fetched within the bound R58 allows, then was
				// wiped): a double fault with any other lost voter, which
				// no protocol survives (the new set's majority may be gone
				// for good). The run stops here, counted.
				s.res.Faults.DeadAdds++
				s.taint(fmt.Sprintf("%s added %s/%s at offset %d, a disk already lost", nd.id, added.ID, added.DirID, e.Offset))
			}
		}
		nd.vrows = append(nd.vrows, protocol.VotersAt{Offset: e.Offset, Voters: vs, Owed: owed})
		s.setRecorded = true
		nd.roundSets = append(nd.roundSets, vs)
		nd.noteMsgSet(vs)
		s.tracef("%s voter set %s in force from offset %d", nd.id, fmtVoters(vs), e.Offset)
		s.setChanged(nd)
	}
}

// setChanged: nd's set in force changed. Liveness rule 1 looks again; a
// set that no longer holds the leader nd follows makes nd leave it (it
// takes no answer from a non-voter): a disturbance like a fault, which
// rule 1 gives liveBound to settle.
// A voter the set adds that does not know it yet becomes one when it
// fetches the set: a disturbance too.
func (s *sim) setChanged(nd *node) {
	s.followDirty = true
	vs, _, boot := nd.inForce()
	if boot {
		return
	}
	if nd.leader != "" && nd.leader != nd.id && !hasID(vs, nd.leader) {
		s.touchNode(nd.idx, s.now, "a voter set without the leader")
	}
	for _, v := range vs {
		if i, ok := s.byID[v.ID]; ok && s.current(v) && !s.member(s.nodes[i]) {
			s.touchNode(i, s.now, "a voter set adding a node")
		}
	}
}

func voterIDs(vs []protocol.Voter) []string {
	ids := make([]string, len(vs))
	for i, v := range vs {
		ids[i] = v.ID
	}
	return ids
}

func sameIDs(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// rowsTruncate drops the rows at or above to: the previous set is in force
// again (R55).
func (s *sim) rowsTruncate(nd *node, to uint64) {
	n := len(nd.vrows)
	for n > 0 && nd.vrows[n-1].Offset >= to {
		n--
	}
	if n != len(nd.vrows) {
		nd.vrows = nd.vrows[:n:n]
		vs, _, _ := nd.inForce()
		nd.roundSets = append(nd.roundSets, vs)
		nd.noteMsgSet(vs)
		s.setChanged(nd)
	}
}

// rowsPrune drops the rows below start except the newest of them (the set
// in force at the log start) and the newest change before it, after a
// prefix deletion or a reset, as stores do (protocol.KeptVoterRows).
func (s *sim) rowsPrune(nd *node, start uint64) {
	if kept := protocol.KeptVoterRows(nd.vrows, start); len(kept) != len(nd.vrows) {
		nd.vrows = slices.Clone(kept)
	}
}

// owedCarried checks a leader's new set vs, owing owed, against the set in
// force before it (R58): a debt is never dropped unless its node is a
// voter again (a change made between a replacement's two steps must not
// hide the removal), and a new one is only the incarnation this very
// change removed. It returns what is wrong, or "".
func owedCarried(prev protocol.VotersAt, vs, owed []protocol.Voter) string {
	for _, o := range prev.Owed {
		if !hasVoter(owed, o.ID, o.DirID) && !hasID(vs, o.ID) {
			return fmt.Sprintf("the debt to %s/%s is dropped though %s is no voter", o.ID, o.DirID, o.ID)
		}
	}
	for _, o := range owed {
		if !hasVoter(prev.Owed, o.ID, o.DirID) && !(hasVoter(prev.Voters, o.ID, o.DirID) && !hasID(vs, o.ID)) {
			return fmt.Sprintf("it owes %s/%s, which this change did not remove", o.ID, o.DirID)
		}
	}
	return ""
}

// rowsReset takes the voter-set rows a reset to its leader's log start
// records below it (R53, R55): they must be the committed log's, the set
// in force at the log start and the newest change before it, since
// everything below a leader's log start is committed.
func (s *sim) rowsReset(nd *node, w protocol.Write) {
	var all []protocol.VotersAt
	for o := 0; o < len(s.committed) && uint64(o) < w.Offset; o++ {
		if k := s.committed[o]; k.typ == protocol.EntryVoters {
			vs, owed, err := protocol.DecodeVoterSet([]byte(k.data))
			if err == nil {
				all = append(all, protocol.VotersAt{Offset: uint64(o), Voters: vs, Owed: owed})
			}
		}
	}
	want := protocol.KeptVoterRows(all, w.Offset)
	if !s.opts.SafetyOnly && fmt.Sprint(want) != fmt.Sprint(w.Voters) {
		s.fail("%s: resets to %d with voter-set rows %v below it, the committed log's are %v", nd.id, w.Offset, w.Voters, want)
		return
	}
	keep := slices.DeleteFunc(slices.Clone(nd.vrows), func(r protocol.VotersAt) bool { return r.Offset < w.Offset })
	nd.vrows = append(slices.Clone(w.Voters), keep...)
	vs, _, _ := nd.inForce()
	nd.roundSets = append(nd.roundSets, vs)
	nd.noteMsgSet(vs)
	s.setChanged(nd)
}

// checkVoters compares nd's core's set in force with the mirror, and its
// role with its membership (R55, R56, R58).
func (s *sim) checkVoters(nd *node, st replica.Status) bool {
	vs, off, boot := nd.inForce()
	if st.DirID != nd.dirID {
		s.fail("%s: runs with directory %q, its disk is %q", nd.id, st.DirID, nd.dirID)
		return false
	}
	if st.Bootstrap != boot || !boot && (st.VotersOffset != off || !slices.Equal(st.Voters, vs)) || boot && !slices.Equal(voterIDs(st.Voters), s.voters) {
		s.fail("%s: its core's voter set in force is %s at offset %d (bootstrap %v), its log's is %s at offset %d (bootstrap %v) (R55)",
			nd.id, fmtVoters(st.Voters), st.VotersOffset, st.Bootstrap, fmtVoters(vs), off, boot)
		return false
	}
	member := s.member(nd)
	switch {
	case st.ClusterSeen && !s.setRecorded:
		s.fail("%s: its bootstrap round was told that a cluster exists, but none has a voter set (R60)", nd.id)
		return false
	case st.Role == replica.RoleObserver && member && !st.ClusterSeen:
		s.fail("%s (%s) is a voter of its set in force %s but has role observer", nd.id, nd.dirID, fmtVoters(vs))
		return false
	case st.Role == replica.RoleLeader && !member && !boot && st.HighWatermark > off:
		s.fail("%s leads epoch %d though its set in force %s (offset %d) removed it and is committed (HW %d): it must resign (R58)",
			nd.id, st.Epoch, fmtVoters(vs), off, st.HighWatermark)
		return false
	case st.Role == replica.RoleObserver && !member && nd.outgoing(st.HighWatermark):
		s.fail("%s (%s): its uncommitted set in force %s (offset %d, HW %d) removed it, but it observes: it must still campaign (R55)", nd.id, nd.dirID, fmtVoters(vs), off, st.HighWatermark)
		return false
	case st.Role != replica.RoleObserver && st.Role != replica.RoleLeader && !member && !nd.outgoing(st.HighWatermark):
		s.fail("%s (%s) is not a voter of its set in force %s (bootstrap %v) but has role %s", nd.id, nd.dirID, fmtVoters(vs), boot, st.Role)
		return false
	}
	return true
}

// ---- which disks hold what ----

// diskAt returns the disk at voter v's recorded directory: the node's
// current one, or the one it lost.
func (s *sim) diskAt(v protocol.Voter) (store durable, retired uint64, maxLEO uint64, ok bool) {
	i, known := s.byID[v.ID]
	if !known {
		return nil, 0, 0, false
	}
	if nd := s.nodes[i]; nd.dirID == v.DirID {
		return nd.store, nd.retired, nd.maxLEO, true
	}
	if d, lost := s.lost[v.DirID]; lost {
		return d.store, d.retired, d.maxLEO, true
	}
	return nil, 0, 0, false
}

// holdsAt says whether the disk at voter v's recorded directory holds the
// committed entry k at o durably (or held it when it was lost).
func (s *sim) holdsAt(v protocol.Voter, o uint64, k entryKey) bool {
	st, retired, _, ok := s.diskAt(v)
	if !ok {
		return false
	}
	if got, ok := entryAt(st, o); ok {
		return got == k || got.typ == protocol.EntryHole && s.holeStandsFor(o, got.epoch, k)
	}
	return o < retired && o < st.LogStart()
}

// deletedAt says whether the disk at voter v's recorded directory starts
// above offset o (it deleted o, or reset past it).
func (s *sim) deletedAt(v protocol.Voter, o uint64) bool {
	st, _, _, ok := s.diskAt(v)
	return ok && o < st.LogStart()
}

// current says whether voter v's recorded directory is its node's disk now.
func (s *sim) current(v protocol.Voter) bool {
	i, ok := s.byID[v.ID]
	return ok && s.nodes[i].dirID == v.DirID
}

// checkCounted checks a leader's HW advance from nd.countedHW to hw: every
// entry passed is durable on a majority of a voter set the leader had in
// force in this round, at the directories it records (R56: a new
// incarnation is never counted as the old one). It reports whether the
// event's checks go on (a NoSync loss that explains a shortfall taints the
// run, which then stops after them).
func (s *sim) checkCounted(nd *node, hw uint64) bool {
	if !slices.ContainsFunc(nd.roundSets, func(vs []protocol.Voter) bool { return vs != nil }) {
		s.fail("%s: leader's HW moved from %d to %d while the bootstrap set is in force: nothing commits before a voter set does (R57)", nd.id, nd.countedHW, hw)
		return false
	}
	for o := max(nd.countedHW, nd.start); o < hw; o++ {
		k := nd.shadow[o]
		// An entry already committed may since have been deleted below a
		// log start by retention or a reset (R51-R53): that counts as
		// held.
		deleted := o < uint64(len(s.committed))
		best, bestSet, ok := -1, []protocol.Voter(nil), false
		for _, vs := range nd.roundSets {
			if vs == nil {
				continue
			}
			n := 0
			for _, v := range vs {
				if s.holdsAt(v, o, k) || deleted && s.deletedAt(v, o) {
					n++
				}
			}
			ok = ok || n > len(vs)/2
			if n > best {
				best, bestSet = n, vs
			}
		}
		if ok {
			continue
		}
		if s.noSyncExplains(o, bestSet, best) {
			return true // tainted: the run stops after this event
		}
		s.fail("%s: leader's HW moved from %d to %d past offset %d %v, which is durable on only %d voters of %s at their recorded directories (sets in force in the round: %d)",
			nd.id, nd.countedHW, hw, o, k, best, fmtVoters(bestSet), len(nd.roundSets))
		return false
	}
	return true
}

// checkRemote: a leader's record of a voter's log end never exceeds what
// the disk at the directory its set records ever held (a fetch of a new
// incarnation counted as the old one would).
func (s *sim) checkRemote(nd *node, st replica.Status) bool {
	if s.opts.SafetyOnly {
		return true
	}
	for _, v := range st.Voters {
		leo, ok := st.RemoteLEO[v.ID]
		if !ok || s.current(v) {
			continue
		}
		if _, _, maxLEO, known := s.diskAt(v); !known || leo > maxLEO {
			s.fail("%s: leader of epoch %d records voter %s/%s at log end %d, but that disk (lost) never held more than %d: it counted another incarnation's fetch (R56)",
				nd.id, st.Epoch, v.ID, v.DirID, leo, maxLEO)
			return false
		}
	}
	return true
}

// checkOneChange: no leader's log holds two voter sets above the committed
// log (R58: a change is appended only once the set in force is committed).
func (s *sim) checkOneChange(nd *node) bool {
	if s.opts.SafetyOnly {
		return true
	}
	n := 0
	c := uint64(len(s.committed))
	for i := len(nd.vrows) - 1; i >= 0 && nd.vrows[i].Offset >= c; i-- {
		n++
	}
	if n > 1 {
		s.fail("%s: leader's log holds %d voter sets above the committed log (end %d): %v", nd.id, n, c, nd.vrows[len(nd.vrows)-n:])
		return false
	}
	return true
}

// committedVoters records a committed voter set at offset o: the chain of
// committed sets changes one voter at a time, and the first names the
// bootstrap voters (R57). A wiped voter whose new incarnation is in it is
// healed.
func (s *sim) committedVoters(by *node, o uint64, k entryKey) {
	vs, err := protocol.DecodeVoters([]byte(k.data))
	if err != nil {
		s.fail("%s: committed voter set at offset %d does not decode: %v", by.id, o, err)
		return
	}
	if s.cset == nil {
		if !sameIDs(voterIDs(vs), s.voters) {
			s.fail("%s: the first committed voter set %s (offset %d) does not name exactly the bootstrap voters %v (R57)", by.id, fmtVoters(vs), o, s.voters)
			return
		}
	} else if d := setDelta(s.cset, vs); d > 1 && !s.opts.SafetyOnly {
		s.fail("%s: committed voter set %s at offset %d is %d voters away from the previous committed one %s (R58)", by.id, fmtVoters(vs), o, d, fmtVoters(s.cset))
		return
	}
	if s.cset != nil && setDelta(s.cset, vs) > 0 {
		s.res.Faults.VoterSetsCommitted++
	}
	prev := s.cset
	s.cset, s.csetAt = vs, o
	for _, nd := range s.nodes {
		switch {
		case hasVoter(vs, nd.id, nd.dirID):
			if nd.replaceDue {
				s.res.Faults.Replacements++
				s.tracef("%s REPLACED: its disk %s is a voter again (committed at %d)", nd.id, nd.dirID, o)
			}
			nd.replaceDue = false
			if !hasID(prev, nd.id) {
				nd.wlRemoved = false // added back
			}
		case hasID(vs, nd.id) && !nd.wlRemoved:
			// A set with a voter whose disk is gone committed (an add
			// that was in flight at the wipe): it is owed a replacement.
			nd.replaceDue = true
		}
	}
}

// addedVoter returns the voter cur adds to prev, if it adds exactly one.
func addedVoter(prev, cur []protocol.Voter) (protocol.Voter, bool) {
	if len(cur) != len(prev)+1 {
		return protocol.Voter{}, false
	}
	for _, v := range cur {
		if !hasVoter(prev, v.ID, v.DirID) {
			return v, true
		}
	}
	return protocol.Voter{}, false
}

// ---- voter wipes ----

// relevantSets are the voter sets that may be in force anywhere: the
// committed one, and every node's newest set and sets above the committed
// log.
func (s *sim) relevantSets() [][]protocol.Voter {
	sets := [][]protocol.Voter{s.cset}
	c := uint64(len(s.committed))
	for _, nd := range s.nodes {
		for i := len(nd.vrows) - 1; i >= 0; i-- {
			if i == len(nd.vrows)-1 || nd.vrows[i].Offset >= c {
				sets = append(sets, nd.vrows[i].Voters)
				continue
			}
			break
		}
	}
	return sets
}

// isVoterAnywhere says whether nd's current disk is a voter of a set that
// may be in force anywhere.
func (s *sim) isVoterAnywhere(nd *node, sets [][]protocol.Voter) bool {
	if s.cset == nil && slices.Contains(s.voters, nd.id) {
		return true // the bootstrap set is still in force somewhere
	}
	for _, vs := range sets {
		if hasVoter(vs, nd.id, nd.dirID) {
			return true
		}
	}
	return false
}

// voterWipeAllowed says whether voter v may lose its disk now (see above).
func (s *sim) voterWipeAllowed(v *node, sets [][]protocol.Voter) (bool, string) {
	if s.cset == nil {
		return false, "no voter set committed yet"
	}
	for _, nd := range s.nodes {
		if nd.replaceDue {
			return false, nd.id + " is not replaced yet"
		}
	}
	if s.changeInFlight() {
		// A leader that appended its own removal may hold the newest log
		// yet no longer take itself for a voter (R55): it neither
		// campaigns nor grants to a less up-to-date candidate, and with
		// one more voter gone a majority may be out of reach.
		return false, "a voter change is in flight"
	}
	for _, vs := range sets {
		if len(vs) < 3 {
			return false, "a set of fewer than 3 voters " + fmtVoters(vs)
		}
		for _, m := range vs {
			if !s.current(m) {
				return false, m.ID + "/" + m.DirID + " lost its disk"
			}
		}
		if !hasVoter(vs, v.id, v.dirID) {
			continue
		}
		up := 0
		for _, m := range vs {
			if m.ID != v.id && s.nodes[s.byID[m.ID]].up {
				up++
			}
		}
		if up <= len(vs)/2 {
			return false, "a majority of " + fmtVoters(vs) + " is otherwise down"
		}
	}
	return true, ""
}

// voterWipeEvent handles evVoterWipe.
func (s *sim) voterWipeEvent(ev event) {
	if s.phase != phaseFaults {
		return
	}
	if ev.id == wipeTimer {
		s.schedule(s.vcBetween(0, 2*s.p.vc.wipeEvery), event{kind: evVoterWipe, id: wipeTimer})
	}
	if !s.faulting() {
		return
	}
	sets := s.relevantSets()
	var v *node
	if ev.id == wipeNode {
		v = s.nodes[ev.node]
		if v.inc != ev.inc {
			return
		}
	} else {
		var cands []*node
		for _, nd := range s.nodes {
			if s.isVoterAnywhere(nd, sets) {
				cands = append(cands, nd)
			}
		}
		if len(cands) == 0 {
			return
		}
		v = cands[s.vr.Intn(len(cands))]
	}
	if !s.isVoterAnywhere(v, sets) {
		return
	}
	if ok, why := s.voterWipeAllowed(v, sets); !ok {
		s.res.Faults.VoterWipesHeld++
		s.tracef("%s voter wipe held: %s", v.id, why)
		return
	}
	s.res.Faults.VoterWipes++
	// The cluster owes it a replacement if the committed set holds it
	// (and the workload did not ask to remove it).
	v.replaceDue = hasVoter(s.cset, v.id, v.dirID) && !v.wlRemoved
	s.wipe(v, "voter")
	if ev.id == wipeNode && s.vr.Intn(2) == 0 {
		// What R56 guards against: the leader goes too, before the
		// entries it committed reached the others.
		if l := s.upLeader(); l != nil && l != v {
			s.schedule(s.vcBetween(0, s.p.netMax+s.p.diskMax), event{kind: evCrash, node: l.idx, inc: l.inc})
		}
	}
}

// wipeAfterCommit may wipe, right after leader nd's HW moved, a voter that
// holds what it committed.
func (s *sim) wipeAfterCommit(nd *node) {
	if s.p.vc.wipeAfterCommitProb == 0 || !s.faulting() || s.vr.Float64() >= s.p.vc.wipeAfterCommitProb {
		return
	}
	vs, _, boot := nd.inForce()
	if boot || len(vs) < 2 {
		return
	}
	v := vs[s.vr.Intn(len(vs))]
	i, ok := s.byID[v.ID]
	if !ok || i == nd.idx {
		return
	}
	f := s.nodes[i]
	s.schedule(s.vcBetween(0, s.p.netMax), event{kind: evVoterWipe, id: wipeNode, node: f.idx, inc: f.inc})
}

// wipe restarts v on an empty store with a new directory ID (an empty
// rejoin: a new pod with an empty volume): its old disk is lost, kept
// only to judge answers it sent before.
func (s *sim) wipe(v *node, what string) {
	s.hash.byte(0xA6)
	s.hash.u64(uint64(v.idx))
	if v.up {
		s.crash(v, "wiped") // schedules its restart
	}
	s.lost[v.dirID] = lostDisk{store: v.store, retired: v.retired, maxLEO: v.maxLEO}
	old := v.dirID
	v.disk++
	v.dirID = dirName(v.id, v.disk)
	s.tracef("%s WIPE (%s): disk %s lost; it restarts empty as %s", v.id, what, old, v.dirID)
	if v.noSync {
		v.store = memoryStore{storage.NewMemoryDeferred()}
	} else {
		v.store = s.newStore()
	}
	// A new store: its log start starts again at 0, nothing in it has
	// been compared with the committed log, and it has voted nowhere.
	v.checked, v.storeStart, v.retired, v.maxLEO = 0, 0, 0, 0
	v.votes = map[uint64]string{}
	v.vrows = nil
	s.snapWipe(v)
}

// ---- the workload's voter changes ----

// voterChangeTimer handles evVoterChange: one voter change proposed on a
// random node (the leader sometimes), while the workload runs; in manual
// runs the healing of wiped voters goes on until they are healed.
func (s *sim) voterChangeTimer() {
	due := s.healDue() != nil
	heal := s.p.vc.manual && due
	// While quiescing, the timer lives on as long as a heal may still
	// become due: a set naming a wiped disk that is appended but not yet
	// committed (an add in flight at the wipe) makes it due only when it
	// commits (a timer stopped before would leave that voter unhealed,
	// and the run would never converge).
	if s.phase == phaseStable || s.phase == phaseQuiesce && !due && !s.changeInFlight() && s.changesOutstanding() == 0 {
		return
	}
	s.schedule(s.vcBetween(0, 2*s.p.vc.changeEvery), event{kind: evVoterChange})
	if s.phase == phaseQuiesce && !heal || s.changesOutstanding() >= 2 {
		return
	}
	via := s.randomUpFrom(s.vr) // the voter stream
	if via == nil {
		return
	}
	if l := s.upLeader(); l != nil && s.now >= l.pausedUntil && s.vr.Intn(3) == 0 {
		via = l
	}
	ch, healing, ok := s.chooseChange(heal)
	if !ok {
		return
	}
	s.proposeChange(via, ch, healing)
}

// changesOutstanding counts the workload's voter changes not answered yet
// on a process still up (a crashed process's forwarded change may still be
// made: the count cannot see it).
func (s *sim) changesOutstanding() int {
	s.vcPending = slices.DeleteFunc(s.vcPending, func(p *proposal) bool {
		nd := s.nodes[p.node]
		return p.acked || !nd.up || nd.inc != p.inc
	})
	return len(s.vcPending)
}

// healDue returns a node whose wipe is not healed yet: a voter of the
// committed set at a disk it lost, or a wiped voter owed its replacement
// (replaceDue). In manual runs the workload heals it; otherwise the core
// must.
func (s *sim) healDue() *node {
	for _, nd := range s.nodes {
		if nd.replaceDue || hasID(s.cset, nd.id) && !hasVoter(s.cset, nd.id, nd.dirID) {
			return nd
		}
	}
	return nil
}

// chooseChange picks the next change (see the file comment); healing says
// it heals a wiped voter (manual runs).
func (s *sim) chooseChange(heal bool) (ch protocol.VoterChange, healing, ok bool) {
	c := s.cset
	if heal && s.vr.Intn(4) != 0 {
		nd := s.healDue()
		if hasID(c, nd.id) && !hasVoter(c, nd.id, nd.dirID) && (s.vr.Intn(2) == 0 || !nd.replaceDue) {
			// Remove the old incarnation (only that, if the workload
			// wanted the node removed anyway).
			return protocol.VoterChange{NodeID: nd.id}, true, true
		}
		// Add: the core removes the old incarnation first, if it still
		// votes (the caller retries).
		return protocol.VoterChange{Add: true, NodeID: nd.id}, true, true
	}
	if c == nil || s.p.vc.healOnly {
		return protocol.VoterChange{}, false, false
	}
	lossy := s.healDue() != nil
	for _, v := range c {
		lossy = lossy || !s.current(v)
	}
	switch k := s.vr.Intn(20); {
	case k < 9: // add an observer, or a node removed earlier
		if len(c) >= 7 {
			return protocol.VoterChange{}, false, false
		}
		var cands []*node
		for _, nd := range s.nodes {
			if nd.up && !hasID(c, nd.id) && (!nd.replaceDue || s.p.vc.manual) {
				cands = append(cands, nd)
			}
		}
		if len(cands) == 0 {
			return protocol.VoterChange{}, false, false
		}
		return protocol.VoterChange{Add: true, NodeID: cands[s.vr.Intn(len(cands))].id}, false, true
	case k < 17: // remove a voter, the leader sometimes
		if len(c) == 1 && s.vr.Intn(4) == 0 {
			s.res.Faults.VoterProbes++
			return protocol.VoterChange{NodeID: c[0].ID}, false, true // must be refused: the last voter
		}
		if len(c) < 4 || lossy || s.changesOutstanding() > 0 {
			return protocol.VoterChange{}, false, false
		}
		if l := s.upLeader(); l != nil && hasID(c, l.id) && s.vr.Float64() < s.p.vc.removeLeaderProb {
			return protocol.VoterChange{NodeID: l.id}, false, true
		}
		return protocol.VoterChange{NodeID: c[s.vr.Intn(len(c))].ID}, false, true
	default: // refusals: an unknown node to add, a non-voter to remove
		s.res.Faults.VoterProbes++
		if s.vr.Intn(2) == 0 {
			return protocol.VoterChange{Add: true, NodeID: "nobody"}, false, true
		}
		for _, nd := range s.nodes {
			if !hasID(c, nd.id) {
				return protocol.VoterChange{NodeID: nd.id}, false, true
			}
		}
		return protocol.VoterChange{NodeID: "nobody"}, false, true
	}
}

// changeInFlight says whether some node holds a voter set newer than the
// committed one that differs from it.
func (s *sim) changeInFlight() bool {
	for _, nd := range s.nodes {
		for i := len(nd.vrows) - 1; i >= 0 && nd.vrows[i].Offset > s.csetAt; i-- {
			if setDelta(nd.vrows[i].Voters, s.cset) > 0 {
				return true
			}
		}
	}
	return false
}

// proposeChange proposes ch on nd's shell.
func (s *sim) proposeChange(nd *node, ch protocol.VoterChange, heal bool) {
	p := &proposal{id: uint64(len(s.proposals) + 1), node: nd.idx, inc: nd.inc, committedAt: -1, change: &ch}
	s.proposals = append(s.proposals, p)
	s.vcPending = append(s.vcPending, p)
	s.res.Faults.VoterChanges++
	s.hash.byte(0xC5)
	s.hash.u64(p.id)
	s.hash.bool(ch.Add)
	s.hash.str(ch.NodeID)
	s.tracef("%s propose id=%d voter change add=%v node=%s (committed set %s)", nd.id, p.id, ch.Add, ch.NodeID, fmtVoters(s.cset))
	if i, ok := s.byID[ch.NodeID]; ok && !ch.Add && !heal {
		s.nodes[i].wlRemoved = true
		p.wlRemove = true
	}
	s.input(nd, shell.VoterChange(p.id, ch))
}

// changeAcked checks the outcome of a voter change.
func (s *sim) changeAcked(nd *node, p *proposal, a replica.Ack) {
	ch := *p.change
	if a.Err != nil {
		s.tracef("%s ack id=%d voter change add=%v node=%s: %v", nd.id, p.id, ch.Add, ch.NodeID, a.Err)
		var nl *replica.NotLeaderError
		switch {
		case errors.As(a.Err, &nl), errors.Is(a.Err, replica.ErrUnknownOutcome), errors.Is(a.Err, replica.ErrVoterChangePending),
			errors.Is(a.Err, replica.ErrNotCaughtUp) && ch.Add, errors.Is(a.Err, replica.ErrUnknownNode),
			errors.Is(a.Err, replica.ErrLastVoter) && !ch.Add:
			s.res.Faults.VoterChangesRefused++
			if i, ok := s.byID[ch.NodeID]; ok && p.wlRemove && !errors.Is(a.Err, replica.ErrUnknownOutcome) {
				s.nodes[i].wlRemoved = false // nothing was appended
			}
		default:
			s.fail("%s answers voter change %d (add=%v node=%s) with %v, which is none of its documented outcomes", nd.id, p.id, ch.Add, ch.NodeID, a.Err)
		}
		return
	}
	if _, known := s.byID[ch.NodeID]; !known && ch.Add {
		s.fail("%s: adding unknown node %q succeeded (offset %d)", nd.id, ch.NodeID, a.FirstOffset)
		return
	}
	// Committed at o: in the committed log as observed (a forwarded
	// change's leader showed it committed; the node's own HW may not know
	// yet), with what the node holds there below its HW.
	o := a.FirstOffset
	s.extend(nd, nd.r.HighWatermark())
	if s.err != nil {
		return
	}
	if o >= uint64(len(s.committed)) {
		s.fail("%s: voter change %d acknowledged at offset %d, which no replica has shown committed (committed log ends at %d)", nd.id, p.id, o, len(s.committed))
		return
	}
	k := s.committed[o]
	if k.typ != protocol.EntryVoters {
		s.fail("%s: voter change %d acknowledged at offset %d, which holds %v, not a voter set", nd.id, p.id, o, k)
		return
	}
	vs, err := protocol.DecodeVoters([]byte(k.data))
	if err != nil || hasID(vs, ch.NodeID) != ch.Add {
		s.fail("%s: voter change %d (add=%v node=%s) acknowledged at offset %d, whose set is %s (%v)", nd.id, p.id, ch.Add, ch.NodeID, o, fmtVoters(vs), err)
		return
	}
	s.tracef("%s ack id=%d voter change add=%v node=%s OK at %d: %s", nd.id, p.id, ch.Add, ch.NodeID, o, fmtVoters(vs))
	if ch.Add {
		s.res.Faults.VoterAdds++
	} else {
		s.res.Faults.VoterRemoves++
	}
}
