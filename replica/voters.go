package replica

import (
	"slices"
	"time"

	"github.com/replog-io/replog/protocol"
)

// The voter set in force (docs/design.md R55–R58) is the one of the newest
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
		vs, err := protocol.DecodeVoters(e.Data)
		if err != nil {
			continue
		}
		l.voterSets = append(l.voterSets, protocol.VotersAt{Offset: e.Offset, Voters: vs})
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
// the newest before it with another set: the newest change, which an
// automatic replacement's second step reads (removedIncarnation), as the
// store keeps them (protocol.KeptVoterRows).
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
// force, and moves this replica between voter and observer if its own
// membership changed. It runs after every change of the view's rows.
func (r *Replica) refreshVoters() {
	was, wasDirs := r.voter, r.voterDirs
	if row, ok := r.log.currentVoters(); ok {
		r.bootstrap = false
		r.votersOffset = row.Offset
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
		r.logger.Info("voter set changed our membership", "voter", r.voter, "dir", r.dirID, "voters_offset", r.votersOffset)
	}
	r.settleRole()
	// A leader removed from the set leads on, not counting itself, until
	// the change commits (R58: updateLeaderHW resigns then).
}

// outgoing reports whether the newest voter set removed this replica (it
// held it at its directory the set before) and this replica does not know
// that set committed (its HW has not passed the set's entry). Such a
// replica still campaigns, counting that set and not itself, as Raft's
// removed leader does: a leader that appended its own removal and lost its
// quorum before the removal committed would otherwise observe for good,
// and a voter of the set before that lacks the removal's entry needs its
// grant, which it refuses to that voter's shorter log: nobody was ever
// elected (sim bug M, seed 85008750 x1500). Elected, it leads without
// counting itself until the removal commits, then resigns (R58).
func (r *Replica) outgoing() bool {
	if r.voter || r.bootstrap || bugNoOutgoing {
		return false
	}
	rows := r.log.voterSets
	n := len(rows)
	if n < 2 || rows[n-1].Offset < r.hw {
		return false
	}
	return slices.Contains(rows[n-2].Voters, protocol.Voter{ID: r.id, DirID: r.dirID})
}

// campaigns reports whether this replica may stand for election: a voter
// of the set in force, or outgoing from it.
func (r *Replica) campaigns() bool { return r.voter || r.outgoing() }

// settleRole moves a replica between following (it may campaign) and
// observing (it may not) after its voter sets or its HW changed; a leader
// is left to R58 (resignIfRemoved).
func (r *Replica) settleRole() {
	switch c := r.campaigns(); {
	case c && r.role == RoleObserver:
		r.logger.Info("now a voter", "dir", r.dirID, "voters_offset", r.votersOffset, "outgoing", !r.voter)
		r.role = RoleFollower
		r.resetElectionTimer()
	case !c && (r.role == RoleFollower || r.role == RoleProspective || r.role == RoleCandidate):
		r.logger.Info("no longer a voter: observing", "dir", r.dirID, "voters_offset", r.votersOffset)
		r.role = RoleObserver
		r.votes = nil
	}
}

// isVoterDir reports whether (id, dir) is a voter of the set in force: in
// the bootstrap set any directory of a listed node is (nothing is recorded
// yet).
func (r *Replica) isVoterDir(id, dir string) bool {
	if r.bootstrap || bugIgnoreDirs {
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
			r.appendVoterSet(slices.DeleteFunc(cur, func(v protocol.Voter) bool { return v.ID == ch.NodeID }))
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
	r.leaderPropose(p, protocol.EntryVoters, [][]byte{protocol.EncodeVoters(next)})
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
		// could never elect (sim seed 82044543 x1500).
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

// appendVoterSet appends vs as the new set in force, with no proposal
// waiting for it (an automatic replacement's step).
func (r *Replica) appendVoterSet(vs []protocol.Voter) {
	leo := r.log.LEO()
	r.appendEntries([]protocol.Entry{{Offset: leo, Epoch: r.epoch, Time: r.now.UnixMilli(), Type: protocol.EntryVoters, Data: protocol.EncodeVoters(vs)}})
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
// removed; once that is committed, it is added at its new directory: by
// this leader from its memory, and by any leader from the log.
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
		if r.now.Sub(ls.lastFetch[from]) < r.cfg.FetchTimeout {
			// The old incarnation fetched within FetchTimeout (or this
			// leader is new): it may be alive, and the new directory an
			// impostor's or a misconfigured copy's. A wiped node's old
			// self never fetches again.
			return
		}
		r.logger.Info("a voter came back with a new directory: replacing it", "node", from, "old_dir", old, "new_dir", dir)
		ls.replacing[from] = dir
		r.appendVoterSet(slices.DeleteFunc(r.voterSet(), func(v protocol.Voter) bool { return v.ID == from }))
	case !isVoter && (ls.replacing[from] == dir || r.removedIncarnation(from, dir)):
		if r.voterChangeRefusal(protocol.VoterChange{Add: true, NodeID: from}) != protocol.AppendOK {
			return
		}
		r.logger.Info("adding the new incarnation of a replaced voter", "node", from, "dir", dir)
		delete(ls.replacing, from)
		r.appendVoterSet(append(r.voterSet(), protocol.Voter{ID: from, DirID: dir}))
	}
}

// resignIfRemoved makes a leader that is no longer a voter step down once
// the set that removed it is committed (R58).
func (r *Replica) resignIfRemoved() {
	if r.role != RoleLeader || r.voter || r.hw <= r.votersOffset {
		return
	}
	r.logger.Info("removed from the voters and the change is committed: resigning", "epoch", r.epoch)
	r.becomeFollower(r.epoch, "")
	r.lastLeaderContact = time.Time{}
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
		// directory} and dropped every answer of the leader added since
		// (sim seed 84027860 x1500).
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

// removedIncarnation reports whether node, fetching from directory dir,
// is the new incarnation of a voter an automatic replacement removed: in
// the voter sets of the log, the newest one that holds node holds it at
// another directory than dir, and the change after it removed node alone
// (the replacement's first step). Any leader completes the replacement
// from the log, not only the one that began it (its memory,
// leaderState.replacing, is lost when leadership changes between the two
// steps), also after other changes made since (sim bug J2, seed 85200728
// x5000: the new incarnation stayed away past FetchTimeout, another voter
// was added meanwhile, and a rule reading only the newest change never
// added it back), and once the log start has passed the removal while the
// rows below it keep it (pruneVoterRows; sim bug J, seed 19702 x1500).
func (r *Replica) removedIncarnation(node, dir string) bool {
	if dir == "" {
		return false
	}
	rows := r.log.voterSets
	if n := len(rows); n == 0 || slices.ContainsFunc(rows[n-1].Voters, func(v protocol.Voter) bool { return v.ID == node }) {
		return false // a voter now: nothing owed
	}
	for i := len(rows) - 1; i > 0; i-- {
		prev := rows[i-1].Voters
		j := slices.IndexFunc(prev, func(v protocol.Voter) bool { return v.ID == node })
		if j < 0 {
			continue
		}
		// rows[i] is the first set after the newest that holds node.
		if prev[j].DirID == dir {
			return false // removed at this very directory
		}
		return slices.Equal(slices.Delete(slices.Clone(prev), j, j+1), rows[i].Voters)
	}
	return false
}

// newestRemoval returns the voter the newest change of the voter sets
// removed, if that change removed one voter and added none. Copies of the
// same set (retention's re-append above the log start, R55) are no change.
func (r *Replica) newestRemoval() (protocol.Voter, bool) {
	n := len(r.log.voterSets)
	if n < 2 {
		return protocol.Voter{}, false
	}
	cur := r.log.voterSets[n-1].Voters
	i := n - 2
	for i >= 0 && slices.Equal(r.log.voterSets[i].Voters, cur) {
		i--
	}
	if i < 0 {
		return protocol.Voter{}, false
	}
	prev := r.log.voterSets[i].Voters
	if len(prev) != len(cur)+1 {
		return protocol.Voter{}, false
	}
	for j, v := range prev {
		if slices.Equal(slices.Delete(slices.Clone(prev), j, j+1), cur) {
			return v, true
		}
	}
	return protocol.Voter{}, false
}

// pendingReplacement returns the node whose automatic replacement waits for
// its second step (R58): the newest change removed one incarnation of it,
// and another incarnation fetches from this leader now, or this leadership
// is younger than FetchTimeout (it may not have heard from it yet). Until
// the node is added back the leader takes no other change: one would make
// the removal no longer the newest change, and a later leader could not
// tell that the node is owed its place (sim bug J2, seed 70100495 x5000).
func (r *Replica) pendingReplacement() (string, bool) {
	if r.cfg.ManualVoterChanges || r.leader == nil {
		return "", false
	}
	removed, ok := r.newestRemoval()
	if !ok {
		return "", false
	}
	ls := r.leader
	if r.now.Sub(ls.since) < r.cfg.FetchTimeout {
		return removed.ID, true
	}
	d := ls.fetchDir[removed.ID]
	if d != "" && d != removed.DirID && r.now.Sub(ls.anyFetch[removed.ID]) < r.cfg.FetchTimeout {
		return removed.ID, true
	}
	return "", false
}
