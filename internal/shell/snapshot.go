package shell

import (
	"fmt"

	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/replica"
	"github.com/replog-io/replog/storage"
)

// SnapshotSource is the read side of a snapshot store that a leader ships
// from (storage.SnapshotStore has it). List is newest first, and holds
// only snapshots of this log (the root leaves out one that does not
// describe it, R88).
type SnapshotSource interface {
	List() []storage.SnapshotInfo
	ReadChunk(info storage.SnapshotInfo, pos int64, max int) ([]byte, error)
}

// ServeSnapshot answers a snapshot request the core checked (R92, R93):
// with the newest snapshot at or above the leader's log start when the
// request names none (Offset 0), else with the one it names, from its
// position; SnapshotNone when there is none to ship (src nil: no store),
// SnapshotGone when the one named is no longer held. It reads the store:
// the caller runs it off its loop. A read error is answered gone (the
// follower starts over, and asks again).
func ServeSnapshot(sr replica.SnapshotRead, src SnapshotSource) protocol.Message {
	req := sr.Request
	resp := &protocol.SnapshotResponse{RequestID: req.RequestID, LeaderID: sr.LeaderID, Epoch: sr.Epoch, LogStartOffset: sr.LogStart}
	msg := protocol.Message{From: sr.LeaderID, To: sr.To, Body: resp}
	var list []storage.SnapshotInfo
	if src != nil {
		list = src.List()
	}
	var info storage.SnapshotInfo
	found := false
	for _, i := range list {
		if i.Offset < sr.LogStart || i.Offset == 0 {
			break // newest first: the rest are lower
		}
		if req.Offset == 0 || i.Offset == req.Offset && i.Epoch == req.SnapshotEpoch && uint64(i.Size) >= req.Position {
			info, found = i, true
			break
		}
	}
	switch {
	case !found && req.Offset == 0:
		resp.Error = protocol.SnapshotNone
		return msg
	case !found:
		resp.Error = protocol.SnapshotGone
		return msg
	}
	pos := req.Position
	if req.Offset == 0 {
		pos = 0
	}
	data, err := src.ReadChunk(info, int64(pos), sr.MaxBytes)
	if err != nil {
		resp.Error = protocol.SnapshotGone
		return msg
	}
	resp.Offset, resp.SnapshotEpoch, resp.Size, resp.CRC = info.Offset, info.Epoch, uint64(info.Size), info.CRC
	resp.Position, resp.Data = pos, data
	return msg
}

// SnapshotSink is the side of a snapshot store that a follower receives
// a shipped snapshot into (storage.SnapshotStore has it; the simulation
// keeps one in memory): the newest snapshot, the partial one a transfer
// left, the chunks written in order, the install once whole.
type SnapshotSink interface {
	Latest() (storage.SnapshotInfo, bool)
	Partial() (storage.PartialSnapshot, bool)
	Receive(p storage.PartialSnapshot, pos int64, data []byte) (int64, error)
	Install() (storage.SnapshotInfo, error)
	DropPartial()
}

// SnapshotsHeld is what the core is told of sink at Open, before its
// first round (R95): the newest snapshot, as installed (not pulled
// again), and a partial one a restart interrupted (resumed at its size).
func SnapshotsHeld(sink SnapshotSink) []replica.SnapshotProgress {
	var out []replica.SnapshotProgress
	if i, ok := sink.Latest(); ok {
		out = append(out, replica.SnapshotProgress{Offset: i.Offset, Epoch: i.Epoch, Size: uint64(i.Size), CRC: i.CRC, Have: uint64(i.Size), Installed: true})
	}
	if p, ok := sink.Partial(); ok {
		out = append(out, replica.SnapshotProgress{Offset: p.Offset, Epoch: p.Epoch, Size: uint64(p.Size), CRC: p.CRC, Have: uint64(p.Have)})
	}
	return out
}

// ReceiveSnapshotChunk writes one chunk the core handed out to sink's
// partial snapshot and, after the last, installs the whole (which checks
// its CRC against the sender's, R94); it returns the progress to report
// to the core, the snapshot installed (ok: the last chunk's install
// succeeded) and the error that failed the chunk, if any: the partial is
// then dropped and the progress Failed, so that the transfer starts over
// (R95). It writes the store: the caller runs it off its loop.
func ReceiveSnapshotChunk(sink SnapshotSink, ch replica.SnapshotChunk) (p replica.SnapshotProgress, installed storage.SnapshotInfo, ok bool, err error) {
	p = replica.SnapshotProgress{Offset: ch.Offset, Epoch: ch.Epoch, Size: ch.Size, CRC: ch.CRC}
	have, err := sink.Receive(storage.PartialSnapshot{Offset: ch.Offset, Epoch: ch.Epoch, Size: int64(ch.Size), CRC: ch.CRC}, int64(ch.Position), ch.Data)
	if err == nil && ch.Last {
		if installed, err = sink.Install(); err == nil {
			p.Installed, ok = true, true
		}
	}
	p.Have = uint64(have)
	if err != nil {
		sink.DropPartial()
		p.Failed, p.Installed, ok = true, false, false
	}
	return p, installed, ok, err
}

// SnapshotEpoch is the epoch tag of a snapshot at offset (R88): the epoch
// of the entry at offset-1 by the epoch map of a log whose log start is
// at most offset (0 for offset 0). When offset is the log start the entry
// is deleted, and the first row covers it: a deletion keeps the epoch of
// the entry below the log start (R51, R52), and a reset records it (R53).
func SnapshotEpoch(epochs []protocol.EpochStart, offset uint64) uint64 {
	if offset == 0 || len(epochs) == 0 {
		return 0
	}
	for i := len(epochs) - 1; i >= 0; i-- {
		if epochs[i].StartOffset <= offset-1 {
			return epochs[i].Epoch
		}
	}
	return epochs[0].Epoch
}

// SnapshotDescribes says whether snapshot i can be restored on a log
// with this epoch map, log start and end (R88): its offset is within the
// log and the entry at offset-1 has the epoch it was tagged with; if not,
// why. A snapshot below the log start cannot be checked (the entry is
// gone) and is taken: its offset below the log start tells the caller
// that the log no longer holds what follows it. The root's OpenSnapshot
// and shipping, and the simulation's service, judge by it.
func SnapshotDescribes(epochs []protocol.EpochStart, logStart, leo uint64, i storage.SnapshotInfo) (bool, string) {
	switch {
	case i.Offset < logStart:
		return true, ""
	case i.Offset > leo:
		return false, fmt.Sprintf("its offset %d is above the log end %d", i.Offset, leo)
	}
	if e := SnapshotEpoch(epochs, i.Offset); e != i.Epoch {
		return false, fmt.Sprintf("the log's entry at %d is of epoch %d, the snapshot's of %d", i.Offset-1, e, i.Epoch)
	}
	return true, ""
}

// RetainBound bounds a request to move the log start by R87: under
// RetainUntilSnapshot (until), at the offset of the node's newest
// snapshot that describes its log (newest, ok; 0 with none, so that
// nothing is deleted). The core knows nothing of it: the root and the
// simulation apply it where the requests are made.
func RetainBound(until bool, newest storage.SnapshotInfo, ok bool, offset uint64) uint64 {
	if !until {
		return offset
	}
	if ok {
		return min(offset, newest.Offset)
	}
	return 0
}
