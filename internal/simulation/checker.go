package simulation

import (
	"errors"
	"math"

	"github.com/replog-io/replog/internal/shell"
	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/replica"
	"github.com/replog-io/replog/storage"
)

// The checker. Every check is incremental (no per-step scan of a log);
// all run after every event on the node it touched:
//
//   - Committed log: s.committed is the committed log as observed. When a
//     node's HW passes what that node was already checked against
//     (node.checked), the entries in between are compared with s.committed,
//     or appended to it if new. So no two replicas ever hold different
//     entries below their HWs, and a node never truncates what it held
//     below its HW (checked when the truncation is issued).
//   - Durability: a newly committed entry is durable, with the same
//     contents, on a majority of the voter set in force, each voter at the
//     directory the set records (voters.go); what a fetch says the
//     fetcher holds (its durable offset, else its fetch offset) never
//     exceeds the fetcher's durable log, and its fetch offset does so only
//     at the pipelined level (R70, R71); a granted vote is durable before it is
//     sent and a voter grants one candidate per epoch, across crashes (per
//     disk: a wiped voter's new disk has voted nowhere).
//   - Leaders: one per epoch over the whole run; a new leader of epoch E
//     holds every entry committed in an epoch below E (leader
//     completeness), hence every acknowledged append; with the rule checks
//     on, a leader's HW moves only onto an entry of its own epoch.
//   - HW: never moves back within a process; HW ≤ LEO; ReadableHW =
//     min(HW, durable LEO), never moving back; HW checkpoints never above
//     the HW.
//   - Logs: appends are contiguous, epochs never decrease along a log,
//     data entries carry payloads the workload proposed (never a refused
//     one), the core's LEO matches the writes it issued.
//   - Exactly once: no record is committed at two offsets.
//   - Acks: a success is declared only when the declaring leader's HW
//     covers the records and its log holds them at the acked offsets
//     (forwarded acks must agree); ErrNotLeader means nothing was
//     appended; ErrTooLarge exactly for oversized records; one ack per
//     proposal.
//   - Readers read below ReadableHW and get exactly the committed entries.
//   - The core's own violation counter stays 0.
//   - After the faults and the workload stop, the cluster converges within
//     a bound, and every store then holds exactly the committed log.

// checkOutput checks what a round of nd's shell publishes to its readers:
// the readable HW is min(HW, durable LEO), never moves back within a
// process, and the wake-up flag says exactly when it moved (a reader
// waiting at the old value would otherwise sleep through new entries).
func (s *sim) checkOutput(nd *node, out shell.Output) {
	if out.Halted != nil {
		if s.levelHalt(nd, out.Halted) {
			return
		}
		s.fail("%s: the shell reports the core halted: %v", nd.id, out.Halted)
		return
	}
	st := out.Status
	if want := min(st.HighWatermark, st.DurableLEO); out.ReadableHW != want {
		s.fail("%s: the shell publishes ReadableHW %d, but min(HW %d, durable LEO %d) is %d", nd.id, out.ReadableHW, st.HighWatermark, st.DurableLEO, want)
		return
	}
	if out.ReadableHW < nd.published {
		s.fail("%s: the shell's ReadableHW moved back from %d to %d", nd.id, nd.published, out.ReadableHW)
		return
	}
	if out.ReadableMoved != (out.ReadableHW != nd.published) {
		s.fail("%s: the shell's ReadableHW went from %d to %d, but it says moved=%v (readers woken wrongly)", nd.id, nd.published, out.ReadableHW, out.ReadableMoved)
		return
	}
	nd.published = out.ReadableHW
}

// check runs the per-step invariants on the node an event touched, right
// after its Ready was processed.
func (s *sim) check(nd *node) { s.checkState(nd, true) }

// checkState runs the per-step invariants. afterReady says the core's
// writes so far have all been taken (so its LEO must match them).
func (s *sim) checkState(nd *node, afterReady bool) {
	if s.err != nil || !nd.up {
		return
	}
	st := nd.r.Status()
	if st.Violations != 0 {
		s.fail("%s: the core counted %d invariant violations (Status.Violations)", nd.id, st.Violations)
		return
	}
	if err := nd.r.Err(); err != nil {
		if s.levelHalt(nd, err) {
			return // R68: rolled forward
		}
		// The core halted (a truncation below its HW, epochs exhausted):
		// the shell would stop the node loudly. No run without a NoSync
		// loss (which stops the run first) may get there.
		s.fail("%s: the core halted: %v", nd.id, err)
		return
	}
	if !s.checkVoters(nd, st) {
		return
	}
	if s.checkLevel(nd, st); s.err != nil {
		return
	}
	if st.Epoch < nd.epoch {
		s.fail("%s: epoch went back from %d to %d", nd.id, nd.epoch, st.Epoch)
		return
	}
	if afterReady && st.LEO != uint64(len(nd.shadow)) {
		s.fail("%s: core says LEO %d, its writes make the log end at %d", nd.id, st.LEO, len(nd.shadow))
		return
	}
	if st.DurableLEO > st.LEO || st.DurableLEO > s.durableEnd(nd) {
		s.fail("%s: durable LEO %d above LEO %d or store LEO %d", nd.id, st.DurableLEO, st.LEO, nd.store.LEO())
		return
	}
	hw := st.HighWatermark
	if hw < nd.hw {
		s.fail("%s: HW moved back from %d to %d", nd.id, nd.hw, hw)
		return
	}
	if hw > st.LEO || hw > uint64(len(nd.shadow)) {
		s.fail("%s: HW %d above LEO %d or above the writes it issued (%d)", nd.id, hw, st.LEO, len(nd.shadow))
		return
	}
	if hw > nd.hw && st.Role == replica.RoleLeader && !s.opts.SafetyOnly && hw > nd.unknown && nd.shadow[hw-1].epoch != st.Epoch {
		s.fail("%s: leader of epoch %d moved its HW from %d to %d onto an entry of epoch %d: an entry of its own epoch must commit first (Raft §5.4.2)",
			nd.id, st.Epoch, nd.hw, hw, nd.shadow[hw-1].epoch)
		return
	}
	if hw > nd.hw && st.Role == replica.RoleLeader && s.faulting() && s.rng.Float64() < s.p.crashAfterCommitProb {
		// A leader dying right after its HW moved, before the followers
		// hear of it: the moment Raft's figure 8 is about.
		s.schedule(s.between(0, s.p.netMax), event{kind: evCrash, node: nd.idx, inc: nd.inc})
	}
	if hw > nd.countedHW {
		// A leader's (or a leader's that stepped down in this round) HW
		// moved: counted against its voter sets (voters.go).
		if (st.Role == replica.RoleLeader || nd.role == replica.RoleLeader && nd.epoch == st.Epoch) && !s.opts.SafetyOnly && !s.checkCounted(nd, hw) {
			return
		}
		if st.Role == replica.RoleLeader {
			s.wipeAfterCommit(nd)
		}
		nd.countedHW = hw
	}
	nd.hw = hw
	rh := nd.r.ReadableHW()
	if rh < nd.readable {
		s.fail("%s: ReadableHW moved back from %d to %d", nd.id, nd.readable, rh)
		return
	}
	nd.readable = rh
	s.extend(nd, hw)
	if !s.checkLogStart(nd, st, afterReady) {
		return
	}
	if st.Role == replica.RoleLeader && (!s.checkRemote(nd, st) || !s.checkOneChange(nd)) {
		return
	}
	voterRole := st.Role != replica.RoleObserver || nd.role != replica.RoleObserver
	if voterRole && (st.Role != nd.role || st.Epoch != nd.epoch) {
		if _, ok := s.epochSeen[st.Epoch]; !ok {
			s.epochSeen[st.Epoch] = s.now
			s.epochBy[st.Epoch] = nd.idx
			if nd.role == replica.RoleProspective {
				s.epochRound[st.Epoch] = nd.prospectiveAt
			}
		}
		if st.Role == replica.RoleProspective && nd.role != replica.RoleProspective {
			nd.prospectiveAt = s.now
		}
		switch {
		case nd.role == replica.RoleLeader && st.Role != replica.RoleLeader:
			if !s.member(nd) {
				// R58: its set removed it and the removal committed (or
				// another leader took over): an election follows.
				s.res.Faults.RemovedLeaders++
				s.touchNode(nd.idx, s.now, "a removed leader stepped down")
			}
			s.leaderSteppedDown(nd, nd.epoch, st.Epoch, st.Role)
		case nd.role == replica.RoleFollower && (st.Role == replica.RoleProspective || st.Role == replica.RoleCandidate):
			s.followerLeft(nd, nd.leader, nd.epoch, st.Role)
		}
		if s.err != nil {
			return
		}
	}
	if st.Role != nd.role || st.Epoch != nd.epoch || st.LeaderID != nd.leader {
		// (Observers too: a voter a set added follows as one until it
		// fetches the set, liveness.go.)
		s.followDirty = true
	}
	nd.leader = st.LeaderID
	if st.Role == replica.RoleLeader {
		if l, ok := s.leaders[st.Epoch]; ok && l != nd.idx {
			s.fail("two leaders in epoch %d: %s and %s", st.Epoch, s.nodes[l].id, nd.id)
			return
		}
		s.leaders[st.Epoch] = nd.idx
		if nd.role != replica.RoleLeader || nd.epoch != st.Epoch {
			nd.role, nd.epoch = st.Role, st.Epoch
			nd.leaderSince = s.now
			s.becameLeader(nd)
		}
	}
	nd.role, nd.epoch = st.Role, st.Epoch
}

// extend compares nd's log below hw with the committed log, growing the
// committed log with what is new.
func (s *sim) extend(nd *node, hw uint64) {
	for o := nd.checked; o < hw && s.err == nil; o++ {
		if o >= uint64(len(nd.shadow)) {
			s.fail("%s: HW %d above its log end %d", nd.id, hw, len(nd.shadow))
			return
		}
		if o < nd.unknown {
			// Deleted here before the checker saw it (a reset, or a
			// restart on a store that starts later): nothing to compare,
			// and it must have been committed.
			if o >= uint64(len(s.committed)) {
				s.fail("%s: HW %d covers offset %d below its log start %d, which no replica has shown committed (committed log ends at %d)",
					nd.id, hw, o, nd.start, len(s.committed))
				return
			}
			continue
		}
		k := nd.shadow[o]
		if o < uint64(len(s.committed)) {
			if k != s.committed[o] {
				s.fail("%s: committed logs differ at offset %d: %s has %v below its HW %d, committed is %v",
					nd.id, o, nd.id, k, hw, s.committed[o])
			}
			continue
		}
		s.checkMajority(nd, o, k)
		if k.typ == protocol.EntryVoters {
			s.committedVoters(nd, o, k)
		}
		if k.typ == protocol.EntryFeature {
			s.committedLevel(nd, o, k)
		}
		if k.typ == protocol.EntryData && !k.tombstone() {
			// Exactly once: a record is committed at one offset only (a
			// duplicated forwarded append must never be appended twice).
			if at, dup := s.committedData[k.data]; dup {
				s.fail("%s: record %q committed twice, at offsets %d and %d", nd.id, k.data, at, o)
				return
			}
			s.committedData[k.data] = o
		}
		s.catalogCommitted(nd, o, k)
		s.committed = append(s.committed, k)
		s.commitEpoch = append(s.commitEpoch, nd.epochNow())
	}
	if nd.checked < hw {
		nd.checked = hw
	}
}

// checkMajority: an entry becoming committed must be durable, with the
// same contents, on a majority of a voter set the node that first shows it
// committed had in force in its round (a leader: checkCounted checks every
// HW advance of leaders that way; this covers the others), each voter at
// the directory the set records.
func (s *sim) checkMajority(by *node, o uint64, k entryKey) {
	best, bestSet := -1, []protocol.Voter(nil)
	for _, vs := range by.roundSets {
		if vs == nil {
			continue
		}
		n := 0
		for _, v := range vs {
			if s.holdsAt(v, o, k) {
				n++
			}
		}
		if n > len(vs)/2 {
			return
		}
		if n > best {
			best, bestSet = n, vs
		}
	}
	if bestSet == nil {
		s.fail("%s: offset %d %v became committed (HW %d) while the bootstrap set is in force (R57)", by.id, o, k, by.hw)
		return
	}
	if s.noSyncExplains(o, bestSet, best) {
		return
	}
	s.fail("%s: offset %d %v became committed (HW %d) but is durable on only %d voters of %s at their recorded directories",
		by.id, o, k, by.hw, best, fmtVoters(bestSet))
}

// becameLeader checks a new leader's log against the committed log (which
// holds every acknowledged append) and, in the fault phase, may arrange a
// crash soon after the election: the nastiest moment for a new epoch.
func (s *sim) becameLeader(nd *node) {
	// Leader completeness: an entry committed in epoch T (by the leader of
	// T) is in the log of every leader of an epoch above T. A leader of a
	// lower epoch can still be elected late (its votes were delayed) and
	// need not hold it.
	// Entries below its log start it need not hold: retention deleted
	// them (checkLogStart checks that only committed ones went).
	s.tracef("%s LEADER of epoch %d (logstart=%d leo=%d)", nd.id, nd.epoch, nd.start, len(nd.shadow))
	for o, k := range s.committed {
		if s.commitEpoch[o] >= nd.epoch || uint64(o) < nd.start {
			continue
		}
		if o >= len(nd.shadow) {
			s.fail("%s: leader of epoch %d has log end %d, but offset %d was committed in epoch %d", nd.id, nd.epoch, len(nd.shadow), o, s.commitEpoch[o])
			return
		}
		if nd.shadow[o] != k {
			s.fail("%s: leader of epoch %d has %v at offset %d, the entry committed there in epoch %d is %v", nd.id, nd.epoch, nd.shadow[o], o, s.commitEpoch[o], k)
			return
		}
	}
	for _, p := range s.ackedProps {
		if p.commitEpoch >= nd.epoch {
			continue
		}
		for i, rec := range p.records {
			o := uint64(p.committedAt) + uint64(i)
			if o < nd.start {
				continue
			}
			if o >= uint64(len(nd.shadow)) || nd.shadow[o].data != rec || nd.shadow[o].typ != protocol.EntryData || nd.shadow[o].key != p.entryKey {
				s.fail("%s: leader of epoch %d lacks acknowledged record %q at offset %d", nd.id, nd.epoch, rec, o)
				return
			}
		}
	}
	s.electedDelete(nd)
	if !s.faulting() {
		return
	}
	if s.rng.Float64() < s.p.crashNewLeaderProb {
		s.schedule(s.between(0, 2*s.p.netMax+s.p.diskMax), event{kind: evCrash, node: nd.idx, inc: nd.inc})
	}
	if s.rng.Float64() < s.p.isolateNewLeaderProb {
		s.isolate(nd.idx, 0)
	}
	if s.p.voters > 1 && s.rng.Float64() < s.p.crashFollowerOnElectProb {
		f := s.nodes[s.rng.Intn(s.p.voters)]
		if f != nd {
			s.schedule(s.between(0, 2*s.p.netMax+s.p.diskMax), event{kind: evCrash, node: f.idx, inc: f.inc})
		}
	}
}

// checkSend checks what a message claims before it leaves its node.
func (s *sim) checkSend(nd *node, m protocol.Message) {
	switch b := m.Body.(type) {
	case *protocol.VoteRequest:
		if !s.memberInRound(nd) && !nd.msgOutgoing {
			s.fail("%s (%s), not a voter of its set in force nor removed by its uncommitted newest set, asks for votes: %s", nd.id, nd.dirID, m)
		}
	case *protocol.VoteResponse:
		if !b.Granted {
			return
		}
		if !s.memberInRound(nd) && !nd.namedIn[namedRound{m.To, b.Round}] {
			s.fail("%s (%s), not a voter of its set in force nor named by the candidate's, grants a vote: %s", nd.id, nd.dirID, m)
			return
		}
		if b.PreVote {
			return
		}
		if v := nd.votes[b.Epoch]; v != m.To {
			q, _ := nd.store.QuorumState()
			s.fail("%s grants its vote in epoch %d to %s, but its durable vote in that epoch is %q (quorum state %+v)", nd.id, b.Epoch, m.To, v, q)
			return
		}
		g := s.grants[b.Epoch]
		if g == nil {
			g = map[string]int{}
			s.grants[b.Epoch] = g
		}
		c := s.byID[m.To]
		if prev, ok := g[nd.dirID]; ok && prev != c {
			s.fail("%s (%s) votes twice in epoch %d: for %s and %s", nd.id, nd.dirID, b.Epoch, s.nodes[prev].id, m.To)
			return
		}
		g[nd.dirID] = c
	case *protocol.FetchResponse:
		if b.LeaderID == nd.id && b.Error != protocol.FetchNotLeader && !s.checkLeaderLogStart(nd, b) {
			return
		}
		// FetchMaxBytes bounds a response (exactlyonce.go: the first
		// entry, or keyed batch, always goes whole).
		s.checkFetchSize(nd, b)
	case *protocol.FetchRequest:
		nd.lastFetchID = b.FetchID
		if b.ReplicaDirID != nd.dirID {
			s.fail("%s fetches as directory %q, its disk is %q", nd.id, b.ReplicaDirID, nd.dirID)
			return
		}
		// The offset the leader counts (R70): the durable offset if the
		// fetch says one; it says one ahead of the fetch offset only at
		// the pipelined level (R71), where every node reads it.
		counted := b.FetchOffset
		if b.HasDurableOffset {
			if b.DurableOffset > b.FetchOffset {
				s.fail("%s fetches with durable offset %d above its fetch offset %d", nd.id, b.DurableOffset, b.FetchOffset)
				return
			}
			counted = b.DurableOffset
			if b.DurableOffset < b.FetchOffset {
				nd.aheadOf = b.FetchOffset
			}
			if b.FetchOffset > nd.store.LEO() && nd.r.Status().FeatureLevel < protocol.FeatureLevelPipelinedFetch {
				s.fail("%s fetches with offset %d above its durable log end %d below the pipelined level: a leader of the previous release would count it",
					nd.id, b.FetchOffset, nd.store.LEO())
				return
			}
		}
		if counted > nd.store.LEO() {
			s.fail("%s fetches saying it holds %d, above its durable log end %d: the leader would count entries that a crash loses",
				nd.id, counted, nd.store.LEO())
		}
	case *protocol.AppendResponse:
		if b.Error != protocol.AppendOK && b.Error != protocol.AppendDuplicate {
			return // (a duplicate's answer names the original, committed: R64)
		}
		o := b.FirstOffset
		if o >= uint64(len(nd.shadow)) {
			s.fail("%s answers append %d OK at offset %d beyond its log end %d", nd.id, b.RequestID, o, len(nd.shadow))
			return
		}
		k := nd.shadow[o]
		if o < nd.start && k == (entryKey{}) && o < uint64(len(s.committed)) {
			// Its entry was committed, then deleted by retention before
			// the answer went out (a leader may delete up to below its HW
			// in the round that acks): judge by the committed log, which
			// keeps it.
			k = s.committed[o]
		}
		if k.typ == protocol.EntryVoters {
			// A forwarded voter change (R58): the new set, committed (the
			// proposing node's ack is checked against its content).
			if o >= nd.r.HighWatermark() {
				s.fail("%s answers voter change %d OK at offset %d, which holds %v at or above its HW %d", nd.id, b.RequestID, o, k, nd.r.HighWatermark())
			}
			return
		}
		if _, keyed, ok := logRecordOf(k); ok && keyed {
			// A forwarded log change (R80): its entry, committed (the
			// proposing node's ack is checked against its content).
			if o >= nd.r.HighWatermark() {
				s.fail("%s answers log change %d OK at offset %d, which holds %v at or above its HW %d", nd.id, b.RequestID, o, k, nd.r.HighWatermark())
			}
			return
		}
		if k.typ == protocol.EntryControl {
			// A forwarded barrier (R50): an empty control entry, committed.
			if k.data != "" || o >= nd.r.HighWatermark() {
				s.fail("%s answers append %d OK at offset %d, which holds %v (HW %d): not a committed barrier", nd.id, b.RequestID, o, k, nd.r.HighWatermark())
			}
			return
		}
		if k.tombstone() {
			return // no payload to tell its proposal by
		}
		ref, ok := s.payloadOf[k.data]
		if !ok || ref.i != 0 || k.typ != protocol.EntryData {
			s.fail("%s answers append %d OK at offset %d, which holds %v, not a proposal's first record", nd.id, b.RequestID, o, k)
			return
		}
		if ref.prop.node != s.byID[m.To] && ref.prop.eo.key.ID == "" {
			// (An append with an ID may be retried by another node:
			// exactlyonce.go.)
			s.fail("%s answers append OK to %s, but offset %d holds a proposal of %s", nd.id, m.To, o, s.nodes[ref.prop.node].id)
			return
		}
		s.declareCommitted(nd, ref.prop, o, "append response")
	}
}

// onAck handles an Ack from the core.
func (s *sim) onAck(nd *node, a replica.Ack) {
	if a.ID == 0 || a.ID > uint64(len(s.proposals)) {
		s.fail("%s acks unknown proposal %d", nd.id, a.ID)
		return
	}
	p := s.proposals[a.ID-1]
	if p.node != nd.idx || p.inc != nd.inc {
		s.fail("%s (incarnation %d) acks proposal %d made on %s incarnation %d", nd.id, nd.inc, p.id, s.nodes[p.node].id, p.inc)
		return
	}
	if p.acked {
		s.fail("%s acks proposal %d twice", nd.id, p.id)
		return
	}
	p.acked = true
	if p.logChange != nil {
		s.logChangeAcked(nd, p, a)
		return
	}
	if p.barrier {
		s.barrierAcked(nd, p, a)
		return
	}
	if p.change != nil {
		s.changeAcked(nd, p, a)
		return
	}
	nd.inflight--
	if p.tooLarge {
		if !errors.Is(a.Err, replica.ErrTooLarge) {
			s.fail("%s acks proposal %d with a record over the size limit with %v, want ErrTooLarge", nd.id, p.id, a.Err)
		}
		return
	}
	if s.eoAck(nd, p, a) {
		return
	}
	if a.Err != nil {
		s.tracef("%s ack id=%d err=%v", nd.id, a.ID, a.Err)
		if notAppended(a.Err) {
			p.notLeader = true
			if p.appended {
				s.fail("%s answers proposal %d with %v, but its records were appended", nd.id, p.id, a.Err)
				return
			}
		}
		if p.entryKey != "" && errors.Is(a.Err, replica.ErrFeatureLevelTooLow) {
			// A keyed append below level 10 (R102): refused, nothing
			// appended (the level may have been raised after the proposing
			// node checked it, or its leader runs below it).
			p.notLeader = true
			if p.appended {
				s.fail("%s answers proposal %d with %v, but its records were appended", nd.id, p.id, a.Err)
			}
			return
		}
		if !notAppended(a.Err) && !errors.Is(a.Err, replica.ErrUnknownOutcome) {
			s.fail("%s acks proposal %d with unexpected error %v", nd.id, p.id, a.Err)
		}
		return
	}
	s.tracef("%s ack id=%d OK at %d", nd.id, a.ID, a.FirstOffset)
	s.declareCommitted(nd, p, a.FirstOffset, "ack")
}

// declareCommitted checks a claim by nd that p's records are committed at
// first, first+1, ...: either the claim was already checked when some
// leader made it (then the offsets must agree), or nd's own HW must cover
// the records and its log hold them.
func (s *sim) declareCommitted(nd *node, p *proposal, first uint64, how string) {
	if p.committedAt >= 0 {
		if uint64(p.committedAt) != first {
			s.fail("%s: %s says proposal %d is committed at %d, earlier it was at %d", nd.id, how, p.id, first, p.committedAt)
		}
		return
	}
	hw := nd.r.HighWatermark()
	end := first + uint64(len(p.records))
	if end > hw {
		if s.opts.SafetyOnly || p.tombstone() {
			// (A tombstone has no payload by which the leader's answer to
			// its forwarded append could be told apart from another's, so
			// a forwarder's ack of one is believed too; leader
			// completeness and convergence check it.)
			// Believe the claim; the leader and convergence checks find
			// out whether it was true.
			p.committedAt = int64(first)
			p.commitEpoch = nd.epochNow()
			s.ackedProps = append(s.ackedProps, p)
			return
		}
		s.fail("%s: %s declares proposal %d committed at [%d, %d), but the HW is %d", nd.id, how, p.id, first, end, hw)
		return
	}
	for i, rec := range p.records {
		o := first + uint64(i)
		var k entryKey
		if o < uint64(len(nd.shadow)) {
			k = nd.shadow[o]
		}
		if o < nd.start && k == (entryKey{}) && o < uint64(len(s.committed)) {
			// Deleted here by retention: a retry answered with the
			// original's offset after retention (R63, R66) is judged by the
			// committed log.
			k = s.committed[o]
		}
		if k.data != rec || k.typ != protocol.EntryData || k.key != p.entryKey {
			s.fail("%s: %s declares proposal %d committed at %d, but offset %d does not hold %q (entry key %q): %v", nd.id, how, p.id, first, o, rec, p.entryKey, k)
			return
		}
	}
	if hw < nd.hw {
		return // check() reports it
	}
	nd.hw = hw
	rh := nd.r.ReadableHW()
	if rh < nd.readable {
		s.fail("%s: ReadableHW moved back from %d to %d", nd.id, nd.readable, rh)
		return
	}
	nd.readable = rh
	s.extend(nd, hw)
	p.committedAt = int64(first)
	p.commitEpoch = nd.epochNow()
	s.ackedProps = append(s.ackedProps, p)
}

// epochNow is the node's current epoch (its core's, not the checker's
// last observation).
func (nd *node) epochNow() uint64 { return nd.r.Status().Epoch }

// converged reports whether the quiet cluster has settled: every node up,
// running (not paused, its clock not stalled: a stalled leader's followers
// rightly elect another) and with nothing pending, one leader, everyone in its epoch and following
// it, every log and HW equal to the leader's log end.
func (s *sim) converged() bool {
	if s.changesOutstanding() > 0 {
		// A voter change still unanswered may land later (one that
		// removes the leader makes it resign, R58): the cluster is not
		// settled (a leader whose own removal is in flight resigns when
		// it lands, and the stable phase would take that for a
		// deposition).
		return false
	}
	var leader *node
	for _, nd := range s.nodes {
		if !nd.up || s.now < nd.pausedUntil || s.now < nd.clockFrom || len(nd.pending) > 0 || nd.reportedSeq < nd.durableSeq || nd.roundPending || len(nd.inbox) > 0 {
			return false
		}
		if nd.role == replica.RoleLeader {
			if leader != nil {
				return false
			}
			leader = nd
		}
	}
	if leader == nil {
		return false
	}
	lst := leader.r.Status()
	if lst.Role != replica.RoleLeader || lst.HighWatermark != lst.LEO || uint64(len(leader.shadow)) != lst.LEO {
		return false
	}
	// Voters (voters.go): the leader is a voter of its set, every voter of
	// it has its disk, and every wiped voter is a voter again (healed by
	// the automatic replacement, or by the workload in manual runs).
	vs, _, _ := leader.inForce()
	if !hasVoter(vs, leader.id, leader.dirID) || s.healDue() != nil {
		return false
	}
	for _, v := range vs {
		if !s.current(v) {
			return false
		}
	}
	for _, nd := range s.nodes {
		if nd == leader {
			continue
		}
		st := nd.r.Status()
		if st.Epoch != lst.Epoch || st.LeaderID != leader.id || st.LEO != lst.LEO || uint64(len(nd.shadow)) != st.LEO ||
			st.DurableLEO != lst.LEO || st.HighWatermark != lst.LEO {
			return false
		}
	}
	return true
}

// finalCheck: after convergence every store holds exactly the committed
// log, so every acknowledged append is readable on every node.
func (s *sim) finalCheck() {
	s.tracef("CONVERGED")
	s.finalBarriers()
	s.finalCatalog()
	for _, nd := range s.nodes {
		if nd.store.LEO() != uint64(len(s.committed)) {
			s.fail("%s: converged with store LEO %d, committed log has %d entries", nd.id, nd.store.LEO(), len(s.committed))
			return
		}
		es, err := nd.store.Entries(nd.store.LogStart(), math.MaxInt, math.MaxInt)
		if err != nil {
			s.fail("%s: reading the converged log: %v", nd.id, err)
			return
		}
		for _, e := range es {
			if e.Type == protocol.EntryHole && s.holeStandsFor(e.Offset, e.Epoch, s.committed[e.Offset]) {
				continue // a compaction pass removed it (R104)
			}
			if k := keyOf(e); k != s.committed[e.Offset] {
				s.fail("%s: converged with %v at offset %d, committed is %v", nd.id, k, e.Offset, s.committed[e.Offset])
				return
			}
		}
		// Retention: below the log start, and only there, entries are
		// gone (a reader gets ErrOutOfRange); the log start is within
		// the committed log.
		ls := nd.store.LogStart()
		if ls > nd.store.LEO() || ls != nd.r.Status().LogStart {
			s.fail("%s: converged with store log start %d (core's %d) above its LEO %d, or the two differ", nd.id, ls, nd.r.Status().LogStart, nd.store.LEO())
			return
		}
		for _, p := range s.ackedProps {
			for i, rec := range p.records {
				o := uint64(p.committedAt) + uint64(i)
				es, err := nd.store.Entries(o, 1, 1<<20)
				if o < ls {
					if !errors.Is(err, storage.ErrOutOfRange) {
						s.fail("%s: acknowledged record %q at offset %d, below the log start %d: read gave %v %v, want ErrOutOfRange", nd.id, rec, o, ls, es, err)
						return
					}
					continue
				}
				if err == nil && len(es) == 1 && es[0].Type == protocol.EntryHole && s.holeStandsFor(o, es[0].Epoch, s.committed[o]) {
					continue // superseded, and compacted (R103)
				}
				if err != nil || len(es) != 1 || string(protocol.UserData(es[0])) != rec {
					s.fail("%s: acknowledged record %q at offset %d not readable: %v %v", nd.id, rec, o, es, err)
					return
				}
			}
		}
	}
}

// notAppended reports whether err promises that nothing of its proposal
// was appended, ever: ErrNotLeader (R39), and ErrBacklogFull (R74: the
// leader refused it for a full backlog).
func notAppended(err error) bool {
	return errors.Is(err, replica.ErrNotLeader) || errors.Is(err, replica.ErrBacklogFull)
}
