package replica

import (
	"slices"

	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/replica/internal/bugs"
)

// The voter set in force (docs/protocol.md R55–R58) is the one of the newest
// EntryVoters entry of the log view, committed or not; with none, the
// bootstrap set of Config.Voters, whose directories are unknown. The log
// view keeps one row per EntryVoters entry (logView.voterSets), as the
// store does, and every change of the rows goes through refreshVoters.

// addVoterRows records the voter sets among entries (appended at their
// offsets). A set that does not decode was refused before it got here (the
// fetcher drops it, a leader builds its own): it is skipped, loudly.
func (l *logView) addVoterRows(entries []protocol.Entry) bool {
	added := false
	for _, e := range entries {
		if e.Type != protocol.EntryVoters {
			continue
		}
		vs, owed, err := protocol.DecodeVoterSet(e.Data)
		if err != nil {
			continue
		}
		l.voterSets = append(l.voterSets, protocol.VotersAt{Offset: e.Offset, Voters: vs, Owed: owed})
		added = true
	}
	return added
}

// truncateVoterRows drops the rows of entries at or above to.
func (l *logView) truncateVoterRows(to uint64) bool {
	n := len(l.voterSets)
	for n > 0 && l.voterSets[n-1].Offset >= to {
		n--
	}
	changed := n != len(l.voterSets)
	l.voterSets = l.voterSets[:n:n]
	return changed
}

// pruneVoterRows drops the rows below start except the newest of them,
// the set in force at the log start, which retention must not forget, and
// the newest before it with another set (the newest change), as the store
// keeps them (protocol.KeptVoterRows).
func (l *logView) pruneVoterRows(start uint64) {
	if kept := protocol.KeptVoterRows(l.voterSets, start); len(kept) != len(l.voterSets) {
		l.voterSets = slices.Clone(kept)
	}
}

// currentVoters returns the newest row, or false if the view has none.
func (l *logView) currentVoters() (protocol.VotersAt, bool) {
	if len(l.voterSets) == 0 {
		return protocol.VotersAt{}, false
	}
	return l.voterSets[len(l.voterSets)-1], true
}

// refreshVoters makes the newest voter set of the log view the one in
// force (the voters, their directories, the majority, whether this
// replica votes). It runs after every change of the view's rows. It moves
// no role: the handler whose write changed the rows settles that through
// transitions.go (settleRole), once the write is recorded.
func (r *Replica) refreshVoters() {
	was, wasDirs := r.voter, r.voterDirs
	if row, ok := r.log.currentVoters(); ok {
		r.bootstrap = false
		r.votersOffset = row.Offset
		r.owed = row.Owed
		r.voters = r.voters[:0:0]
		r.voterDirs = make(map[string]string, len(row.Voters))
		for _, v := range row.Voters {
			r.voters = append(r.voters, v.ID)
			r.voterDirs[v.ID] = v.DirID
		}
		r.voter = r.voterDirs[r.id] == r.dirID
	} else {
		r.bootstrap = true
		r.votersOffset = 0
		r.owed = nil
		r.voters = slices.Clone(r.cfg.Voters)
		r.voterDirs = nil
		// One who was told a cluster exists waits for its set (R60).
		r.voter = slices.Contains(r.voters, r.id) && !r.clusterSeen
	}
	r.majority = len(r.voters)/2 + 1
	if ls := r.leader; ls != nil {
		for _, v := range r.voters {
			if d, ok := wasDirs[v]; !ok || d != r.voterDirs[v] {
				// A voter new to the set (or a new incarnation of one):
				// the grace every voter gets when a leadership begins,
				// else check-quorum would count it as never heard from in
				// the round that added it (and an add that the new voter
				// is needed for would make the leader resign at once).
				ls.lastFetch[v] = r.now
				if ok {
					delete(ls.remote, v)
				}
			}
		}
	}
	if r.voter != was {
		r.logger.Debug("voter set changed our membership", "voter", r.voter, "dir", r.dirID, "voters_offset", r.votersOffset)
	}
	// A leader removed from the set leads on, not counting itself, until
	// the change commits (R58: resignIfRemoved then).
}

// outgoing reports whether the newest voter set removed this replica (it
// held it at its directory the set before) and this replica does not know
// that set committed (its HW has not passed the set's entry). Such a
// replica still campaigns, counting that set and not itself, as Raft's
// removed leader does: a leader that appended its own removal and lost its
// quorum before the removal committed would otherwise observe for good,
// and a voter of the set before that lacks the removal's entry needs its
// grant, which it refuses to that voter's shorter log: nobody could ever
// be elected. Elected, it leads without
// counting itself until the removal commits, then resigns (R58).
func (r *Replica) outgoing() bool {
	if r.voter || r.bootstrap || bugs.NoOutgoing {
		return false
	}
	rows := r.log.voterSets
	n := len(rows)
	if n < 2 || rows[n-1].Offset < r.hw {
		return false
	}
	return slices.Contains(rows[n-2].Voters, protocol.Voter{ID: r.id, DirID: r.dirID})
}

// formerVoter reports whether (id, dir) is a voter of a voter set the log
// view keeps (the set in force, or one before it), outside the bootstrap
// set: a voter removed since, or still one.
func (r *Replica) formerVoter(id, dir string) bool {
	v := protocol.Voter{ID: id, DirID: dir}
	for _, row := range r.log.voterSets {
		if slices.Contains(row.Voters, v) {
			return true
		}
	}
	return false
}

// campaigns reports whether this replica may stand for election: a voter
// of the set in force, or outgoing from it.
func (r *Replica) campaigns() bool { return r.voter || r.outgoing() }

// isVoterDir reports whether (id, dir) is a voter of the set in force: in
// the bootstrap set any directory of a listed node is (nothing is recorded
// yet).
func (r *Replica) isVoterDir(id, dir string) bool {
	if r.bootstrap || bugs.IgnoreDirs {
		return slices.Contains(r.voters, id)
	}
	d, ok := r.voterDirs[id]
	return ok && d == dir
}

// voterDir is the directory the set in force records for voter id ("" in
// the bootstrap set).
func (r *Replica) voterDir(id string) string { return r.voterDirs[id] }

// electionQuorum is how many grants (its own included) a candidate needs:
// a majority of the set in force, or every bootstrap voter while the log
// holds no set (R57: before directories are recorded nobody can tell a
// wiped voter from a new one, so only all of them together may elect).
func (r *Replica) electionQuorum() int {
	if r.bootstrap {
		return len(r.voters)
	}
	return r.majority
}

// voterSetFromGrants is the set a bootstrap leader records (R57): every
// bootstrap voter with the directory its grant carried (its own for
// itself). It reports false if a directory is missing (a grant without one,
// from a node of an older version).
func (r *Replica) voterSetFromGrants() ([]protocol.Voter, bool) {
	vs := make([]protocol.Voter, 0, len(r.voters))
	for _, id := range r.voters {
		dir := r.grantDirs[id]
		if id == r.id {
			dir = r.dirID
		}
		if dir == "" {
			return nil, false
		}
		vs = append(vs, protocol.Voter{ID: id, DirID: dir})
	}
	return vs, true
}

// voterSet returns the set in force as voters (nil in the bootstrap set).
func (r *Replica) voterSet() []protocol.Voter {
	if r.bootstrap {
		return nil
	}
	vs := make([]protocol.Voter, len(r.voters))
	for i, id := range r.voters {
		vs[i] = protocol.Voter{ID: id, DirID: r.voterDirs[id]}
	}
	return vs
}

// changeCommitted reports whether a leader may append a voter change
// (R58): the set in force is committed, and so is an entry of its epoch
// (Raft's single-server change fix: a new leader's first commit settles
// any change an earlier leader left uncommitted).
func (r *Replica) changeCommitted() bool {
	return !r.bootstrap && r.votersOffset < r.hw && r.hw > r.leader.epochStartLEO
}

// leaderVoterChange is the leader's side of a voter change: it checks the
// change and appends the new set as p, or answers p with the refusal.
func (r *Replica) leaderVoterChange(p proposal, ch protocol.VoterChange) {
	if e := r.voterChangeRefusal(ch); e != protocol.AppendOK {
		r.refuseProposal(p, e)
		return
	}
	ls := r.leader
	var next []protocol.Voter
	cur := r.voterSet()
	if ch.Add {
		dir := ls.fetchDir[ch.NodeID]
		if ch.NodeID == r.id {
			dir = r.dirID // the leader never fetches from itself
		}
		if d, ok := r.voterDirs[ch.NodeID]; ok {
			if d == dir {
				// Already this voter: nothing to change.
				p.first, p.end = r.votersOffset, r.votersOffset
				ls.pending = append(ls.pending, p)
				r.ackUpTo(r.hw)
				return
			}
			// Another incarnation of it votes: remove that one first (R58,
			// one change at a time); the caller retries the add.
			r.logger.Info("replacing a voter: removing its old incarnation first", "node", ch.NodeID, "old_dir", d, "new_dir", dir)
			r.appendVoterSet(slices.DeleteFunc(cur, func(v protocol.Voter) bool { return v.ID == ch.NodeID }),
				r.owedWith(protocol.Voter{ID: ch.NodeID, DirID: d}))
			r.refuseProposal(p, protocol.AppendVoterChangePending)
			return
		}
		next = append(cur, protocol.Voter{ID: ch.NodeID, DirID: dir})
	} else {
		next = slices.DeleteFunc(cur, func(v protocol.Voter) bool { return v.ID == ch.NodeID })
	}
	r.logger.Info("voter change", "add", ch.Add, "node", ch.NodeID, "voters", next)
	if !p.local {
		// A copy of the request is answered from memory, never appended
		// again (refusals above are not remembered: a copy is judged again).
		r.memo.set(doneKey{p.from, p.requestID}, forwardMemo{state: forwardAppended, epoch: r.epoch})
	}
	owed := r.owed
	if ch.Add {
		owed = r.owedWithout(ch.NodeID)
	}
	if bugs.DropOwed {
		owed = nil
	}
	r.leaderPropose(p, protocol.EntryVoters, [][]byte{protocol.EncodeVoterSet(next, owed)})
}

// voterChangeRefusal returns why the leader cannot make change ch now, or
// AppendOK.
func (r *Replica) voterChangeRefusal(ch protocol.VoterChange) protocol.AppendError {
	if ch.NodeID == "" {
		return protocol.AppendUnknownNode
	}
	if !r.changeCommitted() {
		r.commitAnEntryOfTheEpoch()
		return protocol.AppendVoterChangePending
	}
	if x, ok := r.pendingReplacement(); ok && !(ch.Add && ch.NodeID == x) {
		return protocol.AppendVoterChangePending
	}
	ls := r.leader
	if !ch.Add {
		if _, ok := r.voterDirs[ch.NodeID]; !ok {
			return protocol.AppendUnknownNode
		}
		if len(r.voters) == 1 {
			return protocol.AppendLastVoter
		}
		return protocol.AppendOK
	}
	if ch.NodeID == r.id {
		if r.voter {
			return protocol.AppendOK // already a voter: answered as done
		}
		return protocol.AppendUnknownNode
	}
	dir, ok := ls.fetchDir[ch.NodeID]
	if !ok || dir == "" || r.now.Sub(ls.anyFetch[ch.NodeID]) >= r.cfg.FetchMaxWait+r.cfg.ElectionTimeout {
		// It must fetch from us now, so that we know which incarnation
		// of it we add, and that it is alive: a live replica's fetches
		// arrive at least every FetchMaxWait plus a round trip. Within
		// FetchTimeout, a node wiped just after its last fetch was added
		// at its dead directory, and with one more voter lost the new set
		// could never elect.
		return protocol.AppendUnknownNode
	}
	if len(r.voters) >= protocol.MaxVoters {
		return protocol.AppendUnknownNode
	}
	if ls.fetchOffset[ch.NodeID] < r.hw {
		return protocol.AppendNotCaughtUp
	}
	return protocol.AppendOK
}

// appendVoterSet appends vs, owing owed, as the new set in force, with no
// proposal waiting for it (an automatic replacement's step).
func (r *Replica) appendVoterSet(vs, owed []protocol.Voter) {
	leo := r.log.LEO()
	r.appendEntries([]protocol.Entry{{Offset: leo, Epoch: r.epoch, Time: r.now.UnixMilli(), Type: protocol.EntryVoters, Data: protocol.EncodeVoterSet(vs, owed)}})
}

// owedWith returns the owed incarnations of the set in force plus v (in
// place of another incarnation of v's node), as a new slice.
func (r *Replica) owedWith(v protocol.Voter) []protocol.Voter {
	return append(r.owedWithout(v.ID), v)
}

// owedWithout returns the owed incarnations of the set in force without
// node's, as a new slice (nil if none is left).
func (r *Replica) owedWithout(node string) []protocol.Voter {
	var out []protocol.Voter
	for _, o := range r.owed {
		if o.ID != node {
			out = append(out, o)
		}
	}
	return out
}

// owedPlace reports whether node, fetching from directory dir, is owed its
// place as a voter (R58): the set in force owes it, at another directory
// than dir (the incarnation an automatic replacement removed; that one
// never comes back).
func (r *Replica) owedPlace(node, dir string) bool {
	if dir == "" {
		return false
	}
	for _, o := range r.owed {
		if o.ID == node {
			return o.DirID != dir
		}
	}
	return false
}

// refuseProposal answers proposal p (not appended) with e.
func (r *Replica) refuseProposal(p proposal, e protocol.AppendError) {
	if p.local {
		r.acks = append(r.acks, Ack{ID: p.id, Err: appendErrorAsError(e, "")})
		return
	}
	r.send(p.from, &protocol.AppendResponse{RequestID: p.requestID, Error: e, LeaderID: r.id})
}

// autoReplace is R58's automatic replacement, run when a fetch shows node
// from fetching from directory dir: if another incarnation of it is a voter,
// silent for FetchTimeout, and this one has caught up, the old one is
// removed, and the set that removes it owes it its place; once that is
// committed, any leader adds it at its new directory, reading the debt
// from the set in force.
func (r *Replica) autoReplace(from, dir string) {
	if r.cfg.ManualVoterChanges || dir == "" || r.bootstrap {
		return
	}
	ls := r.leader
	old, isVoter := r.voterDirs[from]
	switch {
	case isVoter && old != dir:
		if ls.fetchOffset[from] < r.hw || len(r.voters) == 1 {
			return
		}
		if !r.changeCommitted() {
			r.commitAnEntryOfTheEpoch()
			return
		}
		if r.now.Sub(r.heardAt(from)) < r.cfg.FetchTimeout {
			// The old incarnation fetched within FetchTimeout (or this
			// leader is new): it may be alive, and the new directory an
			// impostor's or a misconfigured copy's. A wiped node's old
			// self never fetches again.
			return
		}
		r.logger.Info("a voter came back with a new directory: replacing it", "node", from, "old_dir", old, "new_dir", dir)
		r.appendVoterSet(slices.DeleteFunc(r.voterSet(), func(v protocol.Voter) bool { return v.ID == from }),
			r.owedWith(protocol.Voter{ID: from, DirID: old}))
	case !isVoter && r.owedPlace(from, dir):
		if r.voterChangeRefusal(protocol.VoterChange{Add: true, NodeID: from}) != protocol.AppendOK {
			return
		}
		r.logger.Info("adding the new incarnation of a replaced voter", "node", from, "dir", dir)
		r.appendVoterSet(append(r.voterSet(), protocol.Voter{ID: from, DirID: dir}), r.owedWithout(from))
	}
}

// mayLead reports whether this replica follows node as the leader of
// epoch (R42): a voter of its set in force, any node if this replica votes
// in no set of its own, or a node a voter of that set named as the leader
// of exactly that epoch (vouch). The last case is a
// voter added by entries this replica has not fetched yet: without it, a
// replica that missed the change could never follow the new voter when it
// leads, nor fetch the entries that would tell it.
func (r *Replica) mayLead(node string, epoch uint64) bool {
	if r.isVoter(node) || !r.voter {
		// A replica that votes in no set of its own (an observer, or a
		// fresh store told that a cluster exists, R60) follows whoever
		// leads: the leader's answers are fenced by epoch, and it counts
		// in no majority. Its own set may be one its log has only caught
		// up to, without the leader: a wiped sole bootstrap voter
		// fetching one entry per answer held {itself at its old
		// directory} and would drop every answer of the leader added
		// since.
		return true
	}
	e, ok := r.vouched[node]
	return ok && e == epoch
}

// vouch records that a voter of our set named node as the leader of epoch.
// Only the newest epoch is kept per node, and only epochs not below ours.
func (r *Replica) vouch(node string, epoch uint64) {
	if epoch < r.epoch || node == r.id {
		return
	}
	if r.vouched == nil {
		r.vouched = make(map[string]uint64)
	}
	for n, e := range r.vouched {
		if e < r.epoch {
			delete(r.vouched, n)
		}
	}
	if len(r.vouched) < protocol.MaxVoters {
		r.vouched[node] = max(r.vouched[node], epoch)
	}
}

// commitAnEntryOfTheEpoch makes sure a leader that must commit an entry of
// its epoch before a voter change (R58) has one to commit: one elected
// with nothing above its HW appends none at its election (R26), and a
// change, or an automatic replacement, would wait for some user's append.
func (r *Replica) commitAnEntryOfTheEpoch() {
	if r.leader != nil && !r.bootstrap && r.log.LEO() == r.leader.epochStartLEO {
		r.appendControlEntry()
	}
}

// pendingReplacement returns a node whose automatic replacement waits for
// its second step (R58): the set in force owes it its place, and another
// incarnation of it fetches from this leader now. Until it is added back
// the leader takes no other change, so that the re-add is not held up
// behind changes that keep coming (the debt itself is in the log: other
// changes carry it on, so retention pruning the history loses nothing).
func (r *Replica) pendingReplacement() (string, bool) {
	if r.cfg.ManualVoterChanges || r.leader == nil {
		return "", false
	}
	ls := r.leader
	for _, o := range r.owed {
		if d := ls.fetchDir[o.ID]; d != "" && d != o.DirID && r.now.Sub(ls.anyFetch[o.ID]) < r.cfg.FetchTimeout {
			return o.ID, true
		}
	}
	return "", false
}
