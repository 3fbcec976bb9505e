package simulation

import (
	"fmt"
	"math"

	"github.com/replog-io/replog/protocol"
)

// The simulated disk: writes the core asks for wait in a queue until their
// simulated completion applies them to the node's durable store.

// issueWrite checks a write against the core's view of its log, applies it
// to that view and queues it for the disk.
func (s *sim) issueWrite(nd *node, w protocol.Write) {
	if n := len(nd.pending); n > 0 && w.Seq <= nd.pending[n-1].Seq || w.Seq <= nd.durableSeq {
		s.fail("%s: write seq %d not increasing", nd.id, w.Seq)
		return
	}
	switch w.Kind {
	case protocol.WriteAppend:
		s.shadowAppend(nd, w.Entries)
		s.rowsAppend(nd, w.Entries)
	case protocol.WriteTruncate:
		if w.Offset < nd.checked {
			s.fail("%s: truncation to %d removes committed entries: the node held the committed log up to %d (its HW now %d)",
				nd.id, w.Offset, nd.checked, nd.r.HighWatermark())
			return
		}
		if w.Offset < nd.start {
			s.fail("%s: truncation to %d, below its log start %d", nd.id, w.Offset, nd.start)
			return
		}
		if w.Offset < uint64(len(nd.shadow)) {
			nd.shadow = nd.shadow[:w.Offset]
		}
		s.rowsTruncate(nd, w.Offset)
	case protocol.WriteDeletePrefix:
		if !s.issueDeletePrefix(nd, w) {
			return
		}
		if w.Voters != nil {
			s.rowsReset(nd, w)
			break
		}
		s.rowsPrune(nd, w.Offset)
	case protocol.WriteHWCheckpoint:
		if w.Offset > nd.r.HighWatermark() || w.Offset > uint64(len(s.committed)) {
			s.fail("%s: HW checkpoint %d above its HW %d or the committed log end %d", nd.id, w.Offset, nd.r.HighWatermark(), len(s.committed))
			return
		}
	case protocol.WriteQuorumState:
	default:
		s.fail("%s: unknown write kind %d", nd.id, w.Kind)
		return
	}
	if s.opts.LyingDisk {
		// Sabotage: the write lands in the volatile cache at once and is
		// reported durable; it becomes durable only at the next sync.
		if err := s.apply(nd, []protocol.Write{w}); err != nil {
			s.fail("%s: store rejected %s: %v", nd.id, fmtWrite(w), err)
			return
		}
		nd.durableSeq = w.Seq
		if !nd.reportPending {
			nd.reportPending = true
			s.schedule(0, event{kind: evReport, node: nd.idx, inc: nd.inc})
		}
		s.schedule(s.between(0, 20*s.p.diskMax), event{kind: evSync, node: nd.idx, inc: nd.inc})
		return
	}
	nd.pending = append(nd.pending, w)
	d := s.between(0, s.p.diskMax)
	if nd.noSync {
		d /= 8 // no fsync: the write ends in the page cache
	}
	s.schedule(d, event{kind: evDisk, node: nd.idx, inc: nd.inc, wseq: w.Seq})
}

func (s *sim) shadowAppend(nd *node, es []protocol.Entry) {
	for _, e := range es {
		if e.Offset != uint64(len(nd.shadow)) {
			s.fail("%s: append of offset %d, but its log ends at %d", nd.id, e.Offset, len(nd.shadow))
			return
		}
		if e.Type.Visible() && !keyOf(e).tombstone() {
			// (A tombstone has no payload to tell its proposal by.)
			ref, ok := s.payloadOf[string(protocol.UserData(e))]
			if !ok || ref.prop.tooLarge {
				s.fail("%s: appends offset %d with a payload no proposal made (or a refused one): %q", nd.id, e.Offset, e.Data)
				return
			}
			if ref.prop.notLeader {
				s.fail("%s: appends offset %d with a record of proposal %d, which was answered ErrNotLeader (\"nothing was appended\")", nd.id, e.Offset, ref.prop.id)
				return
			}
			ref.prop.appended = true
		}
		if n := len(nd.shadow); n > 0 && e.Epoch < nd.shadow[n-1].epoch {
			s.fail("%s: epochs decrease along the log: offset %d has epoch %d after epoch %d", nd.id, e.Offset, e.Epoch, nd.shadow[n-1].epoch)
			return
		}
		k, ok := s.resolve(nd, e)
		if !ok {
			return
		}
		if e.Type == protocol.EntryHole {
			s.res.Faults.HolesFetched++
		}
		nd.shadow = append(nd.shadow, k)
	}
}

// diskDone makes every pending write up to seq durable, in order (a later
// write never lands without the earlier ones), then reports it now or a
// little later (the process may crash in between: durable but unreported).
func (s *sim) diskDone(nd *node, seq uint64) {
	if s.p.diskErrProb > 0 && s.faulting() && s.xr.Float64() < s.p.diskErrProb {
		s.diskError(nd, seq)
		return
	}
	if nd.noSync {
		// The OS writes the page cache back a little later.
		s.schedule(s.between(0, s.p.noSyncFlush), event{kind: evSync, node: nd.idx, inc: nd.inc})
	}
	n := 0
	for n < len(nd.pending) && nd.pending[n].Seq <= seq {
		n++
	}
	if n == 0 {
		return // already done by an earlier completion (group commit)
	}
	// Everything completing here lands in one transaction, as the shell's
	// writer hands its whole queue to one Apply.
	if err := s.apply(nd, nd.pending[:n]); err != nil {
		s.fail("%s: store rejected w%d..w%d: %v", nd.id, nd.pending[0].Seq, nd.pending[n-1].Seq, err)
		return
	}
	nd.durableSeq = nd.pending[n-1].Seq
	s.tracef("%s durable up to w%d", nd.id, nd.durableSeq)
	nd.pending = nd.pending[n:]
	if nd.reportPending {
		return
	}
	if s.rng.Float64() < s.p.reportDelayProb {
		nd.reportPending = true
		s.schedule(s.between(0, s.p.diskMax), event{kind: evReport, node: nd.idx, inc: nd.inc})
		return
	}
	s.report(nd)
}

func (s *sim) report(nd *node) {
	if nd.durableSeq <= nd.reportedSeq {
		return
	}
	nd.reportedSeq = nd.durableSeq
	s.hash.byte(0xB3)
	s.hash.u64(nd.reportedSeq)
	s.tracef("%s persisted(w%d)", nd.id, nd.reportedSeq)
	nd.sh.Persisted(nd.reportedSeq)
	s.wantRound(nd)
}

// apply checks ws's quorum-state writes against the node's durable vote
// (an epoch never goes back, a vote never changes within an epoch) and
// applies ws to its store in one Apply: one transaction, all or nothing.
func (s *sim) apply(nd *node, ws []protocol.Write) error {
	old, _ := nd.store.QuorumState()
	for _, w := range ws {
		if w.Kind != protocol.WriteQuorumState {
			continue
		}
		if w.Quorum.Epoch < old.Epoch {
			s.fail("%s: durable epoch goes back from %d to %d", nd.id, old.Epoch, w.Quorum.Epoch)
		} else if w.Quorum.Epoch == old.Epoch && old.VotedFor != "" && w.Quorum.VotedFor != old.VotedFor {
			s.fail("%s: durable vote in epoch %d changes from %s to %q", nd.id, old.Epoch, old.VotedFor, w.Quorum.VotedFor)
		}
		if w.Quorum.VotedFor != "" {
			nd.votes[w.Quorum.Epoch] = w.Quorum.VotedFor
		}
		old = w.Quorum
	}
	retired := s.retiredAfter(nd, ws)
	if err := nd.store.Apply(ws); err != nil {
		return err
	}
	nd.maxLEO = max(nd.maxLEO, nd.store.LEO())
	s.appliedLogStart(nd, retired)
	return nil
}

// diskError: the writes completing up to seq fail (fsync or write returns
// an error). Some of them may have reached the disk, the last one torn.
// The shell must stop the replica loudly and never reuse it (the core's
// contract): the node goes down and restarts from its store like after a
// crash, and nothing acknowledged may be lost.
func (s *sim) diskError(nd *node, seq uint64) {
	n := 0
	for n < len(nd.pending) && nd.pending[n].Seq <= seq {
		n++
	}
	if n == 0 {
		return
	}
	s.res.Faults.DiskErrors++
	s.tracef("%s DISK ERROR: writes up to w%d failed; the node stops", nd.id, seq)
	s.landPrefix(nd, nd.pending[:n])
	nd.pending = nil
	s.crashNode(nd, "disk error", false)
}

// landPrefix makes a random prefix of ws durable, the write after it
// possibly torn (an append cut short: the store then holds a prefix of its
// entries). A store must come back as a prefix of what was written.
func (s *sim) landPrefix(nd *node, ws []protocol.Write) {
	k := s.xr.Intn(len(ws) + 1)
	if err := s.apply(nd, ws[:k]); err != nil {
		s.fail("%s: store rejected the first %d pending writes: %v", nd.id, k, err)
		return
	}
	if k < len(ws) && ws[k].Kind == protocol.WriteAppend && len(ws[k].Entries) > 1 {
		w := ws[k]
		j := 1 + s.xr.Intn(len(w.Entries)-1)
		w.Entries = w.Entries[:j]
		if err := s.apply(nd, []protocol.Write{w}); err != nil {
			s.fail("%s: store rejected torn %s: %v", nd.id, fmtWrite(w), err)
			return
		}
		s.res.Faults.TornWrites++
		s.tracef("%s TORN: %d whole writes and %d of %d entries of w%d reached the disk", nd.id, k, j, len(ws[k].Entries), w.Seq)
	}
}

// noSyncLoss is what a NoSync node lost at a power loss.
type noSyncLoss struct {
	node       int
	dir        string // the disk that lost them
	from, to   uint64 // log offsets lost or changed: [from, to)
	grantsLost bool   // a vote it had granted (or cast for itself)
}

// crashDisk applies a crash to nd's disk before its process goes. A
// process crash keeps what a NoSync node's OS holds; a power loss does not
// (it keeps a random prefix of the unsynced writes). On a node that syncs,
// a crash may leave part of the pending writes on disk, the last torn
// (params.tornProb).
func (s *sim) crashDisk(nd *node, power bool) {
	if nd.noSync {
		m := nd.store.(memoryStore)
		if !power {
			if err := m.Sync(); err != nil {
				s.fail("%s: sync: %v", nd.id, err)
			}
			return
		}
		oldLEO := m.LEO()
		unsynced := m.Unsynced()
		keep := s.xr.Intn(unsynced + 1)
		if keep == unsynced {
			nd.store = memoryStore{m.CrashAfter(keep)}
			return // the OS had written everything back
		}
		// What the node held before: the lost writes may have truncated
		// and rewritten entries, not only appended, so the loss starts
		// where the logs before and after first differ.
		from := m.LogStart()
		before, _ := m.Entries(from, math.MaxInt, math.MaxInt)
		nd.store = memoryStore{m.CrashAfter(keep)}
		// A prefix deletion the OS had not written back is lost too: the
		// log start may come back lower (the entries it had deleted were
		// committed, and are back as they were).
		nd.storeStart = min(nd.storeStart, nd.store.LogStart())
		after, _ := nd.store.Entries(from, math.MaxInt, math.MaxInt)
		for i := 0; i < len(before) && i < len(after) && keyOf(before[i]) == keyOf(after[i]); i++ {
			from = before[i].Offset + 1
		}
		if leo := nd.store.LEO(); leo < from {
			// Its log now ends below where it started: entries it had
			// deleted as committed copies are back only up to here, and
			// what it held from here on is lost.
			from = leo
		}
		q, _ := nd.store.QuorumState()
		loss := noSyncLoss{node: nd.idx, dir: nd.dirID, from: from, to: oldLEO}
		for e, v := range nd.votes {
			if e > q.Epoch || e == q.Epoch && q.VotedFor != v {
				delete(nd.votes, e)
				if _, granted := s.grants[e][nd.dirID]; granted || v == nd.id {
					loss.grantsLost = true
				}
			}
		}
		s.res.Faults.NoSyncLosses++
		s.tracef("%s NOSYNC LOSS: %d of %d unsynced writes lost: offsets [%d, %d) of its log (LEO now %d), granted vote lost: %v",
			nd.id, unsynced-keep, unsynced, loss.from, loss.to, nd.store.LEO(), loss.grantsLost)
		s.nsLost = append(s.nsLost, loss)
		s.nsHistory = append(s.nsHistory, loss)
		return
	}
	if s.p.tornProb > 0 && len(nd.pending) > 0 && s.xr.Float64() < s.p.tornProb {
		s.landPrefix(nd, nd.pending)
	}
}

// noSyncExplains is called when offset o became committed while durable on
// only n voters of set vs: if NoSync nodes of vs that lost o at a power
// loss make up the difference, the leader counted their reports of writes
// that were then lost (acks that relied on a NoSync node), and the run
// stops, tainted.
func (s *sim) noSyncExplains(o uint64, vs []protocol.Voter, n int) bool {
	for _, l := range s.nsHistory {
		if nd := s.nodes[l.node]; l.from <= o && o < l.to && hasVoter(vs, nd.id, l.dir) {
			n++
		}
	}
	if n <= len(vs)/2 {
		return false
	}
	s.res.Faults.NoSyncTainted++
	s.taint(fmt.Sprintf("offset %d, committed with reports of NoSync copies since lost", o))
	return true
}

func (s *sim) taint(why string) {
	s.tainted = true
	s.res.Tainted = true
	s.tracef("TAINT: %s; the run stops here", why)
}

// settleNoSyncLoss runs after a power loss: if a NoSync node lost a vote
// it had granted, or a committed entry is no longer durable on a majority
// of voters, the loss may explain anything that follows (two leaders in
// an epoch, a committed entry lost): the run stops there, counted as
// tainted. A loss that took neither is checked like any crash: nothing
// committed or acknowledged may be lost, so only what relied on the lost
// NoSync writes alone can go.
func (s *sim) settleNoSyncLoss() {
	losses := s.nsLost
	s.nsLost = nil
	for _, l := range losses {
		why := ""
		if l.grantsLost {
			why = "a granted vote"
		}
		// Counted against the committed voter set, each voter at the
		// directory it records (a wiped voter's lost disk counts with
		// what it held).
		for o := l.from; why == "" && s.cset != nil && o < l.to && o < uint64(len(s.committed)); o++ {
			n := 0
			for _, v := range s.cset {
				if s.holdsAt(v, o, s.committed[o]) {
					n++
				}
			}
			if n <= len(s.cset)/2 {
				why = fmt.Sprintf("committed offset %d (now durable on %d voters of %s)", o, n, fmtVoters(s.cset))
			}
		}
		if why != "" {
			s.res.Faults.NoSyncTainted++
			s.taint(s.nodes[l.node].id + " lost " + why)
			return
		}
	}
}
