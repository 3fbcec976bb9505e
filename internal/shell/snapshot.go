package shell

import (
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
