package replica

import (
	"slices"
	"time"

	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/replica/internal/bugs"
)

// Snapshot transfer (docs/protocol.md 3.14, R92-R95). A follower whose
// fetch offset is below its leader's log start would reset to it (R53) and
// hold nothing from which a service can rebuild the state of the deleted
// prefix. With Config.ShipSnapshots it first pulls the leader's newest snapshot at or above the leader's log
// start, one chunk per request: the core decides (which chunk to ask
// for, whether an answer continues the transfer, when to install and
// reset), the shell does the I/O (the leader's reads of snapshot bytes,
// SnapshotReads; the follower's writes, SnapshotChunks, and its install,
// reported back with SnapshotProgress). The leader ships only once the
// cluster runs at FeatureLevelSnapshotTransfer (below it, it answers
// SnapshotNone); the follower cannot know the level (a wiped or reset log
// holds none of the entries that record it) and asks anyway: a leader of
// an older release never receives the request (no wire version it speaks
// carries it), and after snapshotMaxSilence requests without an answer
// the follower resets without a snapshot, as it did before. No fetch goes out while the
// transfer runs, so nothing is appended here meanwhile; the leader's loop
// only checks each request, and its appends never wait for it.

// SnapshotRead is a snapshot request this leader checked (it leads the
// request's epoch; the sender is a member): the shell answers it from its
// snapshot store off the loop (internal/shell.ServeSnapshot).
type SnapshotRead struct {
	To       string
	Request  protocol.SnapshotRequest
	LeaderID string
	Epoch    uint64
	// LogStart is this leader's log start: only a snapshot at or above it
	// is shipped (R93).
	LogStart uint64
	// MaxBytes bounds the answer's data: the request's MaxBytes, at most
	// Config.FetchMaxBytes, less what the rest of the answer takes
	// (snapshotAnswerOverhead), so that the whole answer is within
	// FetchMaxBytes and fits the transport's frame as a fetch answer does.
	MaxBytes int
}

// SnapshotChunk is a chunk of a snapshot for the shell to write to its
// partial snapshot (storage.SnapshotStore.Receive) at Position; with Last,
// the body is whole and the shell verifies it against CRC and installs
// it (storage.SnapshotStore.Install). Either way it reports the outcome
// with SnapshotProgress. Data is the shell's.
type SnapshotChunk struct {
	Offset, Epoch uint64
	Size          uint64
	CRC           uint32
	Position      uint64
	Data          []byte
	Last          bool
}

// SnapshotProgress is the shell's word on the snapshot it is receiving,
// or holds: at start (the partial snapshot it kept, Have bytes of it; or,
// with Installed, its newest stored snapshot), and after each chunk.
type SnapshotProgress struct {
	Offset, Epoch uint64
	Size          uint64
	CRC           uint32
	// Have is how many bytes of the body the partial holds.
	Have uint64
	// Installed: the snapshot is verified and in the snapshot store.
	Installed bool
	// Failed: the write or the install failed (a damaged body among
	// them); the shell dropped the partial, and the transfer starts over.
	Failed bool
}

// snapshotFetch is a follower's transfer in progress.
type snapshotFetch struct {
	active bool
	// leader and epoch: whom it pulls from, in which epoch; a change of
	// either ends it (a new leader's snapshot may differ).
	leader string
	epoch  uint64
	// reset is the out-of-range answer that started it: the log start,
	// voter rows and epoch the follower resets to once it is done.
	reset protocol.FetchResponse
	// truncate: the reset truncates what the log holds at or above the
	// log start first (a diverging answer below the leader's log start).
	truncate bool
	// The snapshot being pulled (offset 0: not known yet) and the bytes
	// the shell holds of it.
	offset, tag, size uint64
	crc               uint32
	pos               uint64
	// id, sentAt: the outstanding request (waiting), if any; writing: a
	// chunk is with the shell.
	id      uint64
	sentAt  time.Time
	waiting bool
	writing bool
	// silent counts the requests in a row that went unanswered.
	silent int
	// partial is what the shell said it held when nothing was active
	// (a restart): a transfer of that snapshot resumes at its size.
	partial SnapshotProgress
	// installed is the newest snapshot known stored here: one the
	// leader offers again is not pulled again.
	installedOffset, installedTag uint64
}

// SnapshotProgress takes the shell's word on its snapshot store (see the
// type). A halted replica ignores it.
func (r *Replica) SnapshotProgress(p SnapshotProgress) {
	if r.err != nil {
		return
	}
	sf := &r.snap
	if p.Installed {
		sf.installedOffset, sf.installedTag = p.Offset, p.Epoch
	}
	if !sf.active || !sf.writing || p.Offset != sf.offset || p.Epoch != sf.tag {
		if !sf.active && !p.Installed && !p.Failed {
			sf.partial = p
		}
		return
	}
	sf.writing = false
	switch {
	case p.Failed:
		r.logger.Warn("snapshot transfer: the chunk could not be kept; starting over", "offset", p.Offset)
		sf.offset, sf.tag, sf.size, sf.crc, sf.pos = 0, 0, 0, 0, 0
		r.sendSnapshotRequest()
	case p.Installed:
		r.logger.Info("snapshot transfer: installed", "offset", p.Offset, "epoch", p.Epoch, "bytes", p.Size)
		r.finishSnapshotFetch()
	default:
		sf.pos = p.Have
		r.sendSnapshotRequest()
	}
}

// snapshotFirst starts a transfer in place of the reset that resp (an
// out-of-range answer of our leader) asks for, and reports whether it
// did: only with Config.ShipSnapshots.
// An answer while one runs changes nothing (the transfer goes on).
func (r *Replica) snapshotFirst(from string, resp *protocol.FetchResponse, truncate bool) bool {
	if !r.cfg.ShipSnapshots || from != r.leaderID {
		return false
	}
	sf := &r.snap
	if sf.active {
		return true
	}
	*sf = snapshotFetch{
		active: true, leader: from, epoch: r.epoch, reset: *resp, truncate: truncate, partial: sf.partial,
		installedOffset: sf.installedOffset, installedTag: sf.installedTag,
	}
	sf.reset.Entries = nil
	sf.reset.LogStartVoters = slices.Clone(resp.LogStartVoters)
	if p := sf.partial; p.Offset >= resp.LogStartOffset && p.Have <= p.Size {
		// A partial kept across a restart: ask for the rest of it; a
		// leader that no longer holds it answers gone, and it starts over.
		sf.offset, sf.tag, sf.size, sf.crc, sf.pos = p.Offset, p.Epoch, p.Size, p.CRC, p.Have
	}
	r.logger.Info("fetch offset below the leader's log start: asking for its snapshot before resetting",
		"leo", r.log.LEO(), "leader_log_start", resp.LogStartOffset, "resume_at", sf.pos)
	r.sendSnapshotRequest()
	return true
}

// sendSnapshotRequest asks the leader for the next chunk (or, offset 0,
// for its newest snapshot).
func (r *Replica) sendSnapshotRequest() {
	sf := &r.snap
	r.nextRequestID++
	sf.id, sf.sentAt, sf.waiting = r.nextRequestID, r.now, true
	r.send(sf.leader, &protocol.SnapshotRequest{
		RequestID: sf.id, Epoch: sf.epoch, Offset: sf.offset, SnapshotEpoch: sf.tag, Position: sf.pos,
		MaxBytes: uint32(r.cfg.FetchMaxBytes),
	})
}

// snapshotRound ends a transfer whose leader or epoch changed, or that
// this replica no longer follows, and asks again for a chunk whose answer
// did not come in the fetch retry timeout. It runs in Ready, before the
// fetch is built: no fetch goes out while a transfer runs.
func (r *Replica) snapshotRound() {
	sf := &r.snap
	if !sf.active {
		return
	}
	if (r.role != RoleFollower && r.role != RoleObserver) || r.leaderID != sf.leader || r.epoch != sf.epoch {
		r.logger.Info("snapshot transfer ended: the leader changed", "leader", sf.leader, "epoch", sf.epoch)
		r.endSnapshotFetch()
		return
	}
	if sf.waiting && r.now.Sub(sf.sentAt) >= r.fetchRetryTimeout() {
		if sf.silent++; sf.silent >= snapshotMaxSilence {
			r.logger.Warn("snapshot transfer: the leader does not answer (an older release?); resetting without a snapshot",
				"leader", sf.leader, "requests", sf.silent)
			r.finishSnapshotFetch()
			return
		}
		r.sendSnapshotRequest() // the answer was lost: the same chunk again
	}
}

// snapshotContact keeps leader contact both ways while a transfer runs:
// the follower sends no fetch that could append, but a contact fetch
// (R77) every FetchMaxWait, so that its leader still hears from it (a
// leader whose other voter is down would otherwise lose check-quorum to
// a voter that is only pulling, R27) and it from its leader while its
// snapshot requests go unanswered (a leader of a release without snapshot
// transfer never answers them: three retry timeouts without contact would
// pass FetchTimeout, and the follower would campaign against a live
// leader). A contact fetch's answer is contact only: it appends nothing
// and an out-of-range answer is left to the transfer.
func (r *Replica) snapshotContact() {
	if bugs.SnapshotNoContact {
		return // deliberately silent while pulling (a test-only bug)
	}
	r.maybeContactFetch()
}

// snapshotMaxSilence is how many snapshot requests in a row may go
// unanswered before a follower resets without the snapshot: a leader of a
// release before snapshot transfer never answers, and one lost answer
// must not cost the state.
const snapshotMaxSilence = 3

// endSnapshotFetch forgets the transfer; the partial the shell holds is
// remembered, so that a transfer of the same snapshot resumes it.
func (r *Replica) endSnapshotFetch() {
	sf := &r.snap
	if sf.offset != 0 && !sf.writing {
		sf.partial = SnapshotProgress{Offset: sf.offset, Epoch: sf.tag, Size: sf.size, CRC: sf.crc, Have: sf.pos}
	}
	sf.active, sf.waiting, sf.writing = false, false, false
}

// snapshotFetching reports whether a transfer runs (no fetch goes out).
func (r *Replica) snapshotFetching() bool { return r.snap.active }

// finishSnapshotFetch ends the transfer with the reset it stood in for
// (R53): the snapshot, if any, is installed by now (R94).
func (r *Replica) finishSnapshotFetch() {
	sf := &r.snap
	reset, truncate := sf.reset, sf.truncate
	r.endSnapshotFetch()
	sf.partial = SnapshotProgress{}
	if !truncate && reset.LogStartOffset <= r.log.LEO() {
		return
	}
	r.logger.Info("resetting the log to the leader's log start",
		"leo", r.log.LEO(), "log_start", r.log.logStart, "leader_log_start", reset.LogStartOffset)
	r.resetLog(reset.LogStartOffset, truncate, reset.LogStartVoters, reset.LogStartEpoch)
	r.settleRole()
}

// handleSnapshotResponse is the follower's side of a chunk's answer: only
// the answer to its outstanding request, from the leader it pulls from,
// counts.
func (r *Replica) handleSnapshotResponse(from string, resp *protocol.SnapshotResponse) {
	sf := &r.snap
	if !sf.active || !sf.waiting || from != sf.leader || resp.RequestID != sf.id {
		r.logger.Trace("dropping a snapshot answer", "from", from, "resp", resp)
		return
	}
	sf.waiting, sf.silent = false, 0
	if resp.Epoch > r.epoch {
		r.becomeFollower(resp.Epoch, resp.LeaderID) // the round ends the transfer
		return
	}
	switch resp.Error {
	case protocol.SnapshotNotLeader:
		r.endSnapshotFetch()
		r.becomeFollower(r.epoch, "")
		r.fetchBackoff = r.now.Add(r.fetchRetryBackoff())
		return
	case protocol.SnapshotNone:
		r.leaderContact()
		r.logger.Info("snapshot transfer: the leader holds no snapshot at or above its log start")
		r.finishSnapshotFetch()
		return
	case protocol.SnapshotGone:
		r.leaderContact()
		sf.offset, sf.tag, sf.size, sf.crc, sf.pos = 0, 0, 0, 0, 0
		r.sendSnapshotRequest()
		return
	case protocol.SnapshotOK:
	default:
		r.logger.Warn("snapshot transfer: unknown answer", "from", from, "resp", resp)
		return // asked again at the retry timeout
	}
	r.leaderContact()
	if !r.describesLeaderLog(resp) {
		r.logger.Warn("snapshot transfer: the offered snapshot does not describe the leader's log at its log start; resetting without it",
			"offset", resp.Offset, "epoch", resp.SnapshotEpoch, "leader_log_start", sf.reset.LogStartOffset)
		r.finishSnapshotFetch()
		return
	}
	if sf.offset == 0 && resp.Offset == sf.installedOffset && resp.SnapshotEpoch == sf.installedTag {
		// Installed before (a reset that a crash undid, or a leader whose
		// log start moved on): nothing to pull.
		r.finishSnapshotFetch()
		return
	}
	same := resp.Offset == sf.offset && resp.SnapshotEpoch == sf.tag && resp.Size == sf.size && resp.CRC == sf.crc
	switch {
	case sf.offset == 0 || !same && resp.Position == 0:
		// The start of a transfer (or the leader answered with another
		// snapshot from its start): take it from byte 0.
		if resp.Position != 0 {
			return
		}
		sf.offset, sf.tag, sf.size, sf.crc, sf.pos = resp.Offset, resp.SnapshotEpoch, resp.Size, resp.CRC, 0
	case !same || resp.Position != sf.pos:
		r.logger.Debug("snapshot transfer: an answer that does not continue the transfer", "resp", resp)
		sf.offset, sf.tag, sf.size, sf.crc, sf.pos = 0, 0, 0, 0, 0
		r.sendSnapshotRequest()
		return
	}
	n := uint64(len(resp.Data))
	if n > sf.size-sf.pos || n == 0 && sf.pos < sf.size {
		r.logger.Warn("snapshot transfer: a chunk that does not fit the snapshot", "resp", resp)
		return // asked again at the retry timeout
	}
	sf.writing = true
	r.snapChunks = append(r.snapChunks, SnapshotChunk{
		Offset: sf.offset, Epoch: sf.tag, Size: sf.size, CRC: sf.crc, Position: sf.pos,
		Data: resp.Data, Last: sf.pos+n == sf.size,
	})
	if bugs.SnapshotResetFirst && sf.pos+n == sf.size {
		r.finishSnapshotFetch() // deliberately resets before the install is verified (a test-only bug)
	}
}

// describesLeaderLog is R93: a snapshot is pulled only if it is of the
// leader's committed log at or above the log start this follower resets
// to, so that the log it then fetches goes on from below the snapshot's
// offset; at exactly the log start its tag must be the epoch of the
// leader's entry below it (LogStartEpoch), which the reset records.
func (r *Replica) describesLeaderLog(resp *protocol.SnapshotResponse) bool {
	start := r.snap.reset.LogStartOffset
	if bugs.SnapshotAnyOffset {
		return true // deliberately ships what cannot describe the log (a test-only bug)
	}
	if resp.Offset < start || resp.Offset == 0 {
		return false
	}
	if resp.Offset == start && r.snap.reset.LogStartEpoch != 0 && resp.SnapshotEpoch != r.snap.reset.LogStartEpoch {
		return false
	}
	return resp.SnapshotEpoch <= r.epoch
}

// serveSnapshotRequest is the leader's side: a request in this leader's
// epoch from a member goes to the shell, which reads the bytes off the
// loop; one naming another epoch is answered not-leader with ours.
func (r *Replica) serveSnapshotRequest(from string, req *protocol.SnapshotRequest) {
	if req.Epoch != r.epoch {
		r.send(from, &protocol.SnapshotResponse{RequestID: req.RequestID, LeaderID: r.id, Epoch: r.epoch, Error: protocol.SnapshotNotLeader})
		return
	}
	if !r.isVoter(from) && !r.fetchSession(from) {
		r.logger.Debug("dropping a snapshot request from a non-member", "from", from)
		return
	}
	if r.level < protocol.FeatureLevelSnapshotTransfer {
		// Not before the whole cluster runs at the level (R68): the
		// follower resets as a release before it would.
		r.send(from, &protocol.SnapshotResponse{RequestID: req.RequestID, LeaderID: r.id, Epoch: r.epoch,
			Error: protocol.SnapshotNone, LogStartOffset: r.log.logStart})
		return
	}
	maxBytes := r.cfg.FetchMaxBytes
	if req.MaxBytes > 0 && int(req.MaxBytes) < maxBytes {
		maxBytes = int(req.MaxBytes)
	}
	maxBytes = max(maxBytes-snapshotAnswerOverhead(r.id, from), 1)
	r.snapReads = append(r.snapReads, SnapshotRead{
		To: from, Request: *req, LeaderID: r.id, Epoch: r.epoch, LogStart: r.log.logStart, MaxBytes: maxBytes,
	})
}

// snapshotAnswerOverhead is what a snapshot answer from id to to takes
// beyond its data, with room for the longest log name the shell stamps on
// it (a named log's name and incarnation).
func snapshotAnswerOverhead(id, to string) int {
	return protocol.EncodedSize(protocol.Message{From: id, To: to, Body: &protocol.SnapshotResponse{LeaderID: id}}) + maxWireLogName
}

// maxWireLogName bounds the bytes a message's log name takes on the wire:
// its length and the name (with its incarnation, at most
// protocol.MaxLogNameLength).
const maxWireLogName = 4 + protocol.MaxLogNameLength

// refuseSnapshotRequest answers a snapshot request reaching a replica
// that does not lead: not-leader, naming the leader it knows.
func (r *Replica) refuseSnapshotRequest(from string, req *protocol.SnapshotRequest) {
	r.send(from, &protocol.SnapshotResponse{RequestID: req.RequestID, LeaderID: r.leaderID, Epoch: r.epoch, Error: protocol.SnapshotNotLeader})
}
