package protocol

import "fmt"

// Snapshot transfer (docs/protocol.md 3.14, R92-R95): a follower whose
// fetch offset is below its leader's log start pulls the leader's newest
// snapshot of the service's state, one chunk per request, before it resets
// its log to the leader's log start.

// Body kinds of snapshot transfer, from SnapshotTransferVersion on.
const (
	KindSnapshotRequest  Kind = 10
	KindSnapshotResponse Kind = 11
)

// SnapshotTransferVersion is the wire version that brought
// SnapshotRequest and SnapshotResponse: below it they cannot be encoded
// (AppendMessageAt fails with ErrVersion), and a follower asks for a
// snapshot only at FeatureLevelSnapshotTransfer, which every node then
// supports.
const SnapshotTransferVersion = 9

// FeatureLevelSnapshotTransfer is the cluster level from which a follower
// below its leader's log start asks for a snapshot before it resets (R92):
// level 9 brings both named logs (FeatureLevelNamedLogs) and snapshot
// transfer.
const FeatureLevelSnapshotTransfer = 9

// SnapshotRequest asks the leader of Epoch for Size bytes at most of a
// snapshot, from byte Position of its body. Offset 0 asks for the
// leader's newest snapshot at or above its log start (the start of a
// transfer: Position is then 0); otherwise Offset and SnapshotEpoch name
// the snapshot being pulled (its offset and the epoch of the entry at
// Offset-1), which the leader must still hold, else it answers
// SnapshotGone.
type SnapshotRequest struct {
	// RequestID ties the answer to this request: a follower takes only the
	// answer to its outstanding one.
	RequestID     uint64
	Epoch         uint64
	Offset        uint64
	SnapshotEpoch uint64
	Position      uint64
	MaxBytes      uint32
}

// SnapshotError is the outcome carried by a SnapshotResponse.
type SnapshotError uint8

// Snapshot outcomes. Values are part of the wire format.
const (
	SnapshotOK SnapshotError = 0
	// SnapshotNotLeader: the receiver does not lead the request's epoch;
	// LeaderID and Epoch are its view.
	SnapshotNotLeader SnapshotError = 1
	// SnapshotNone: the leader holds no snapshot at or above its log start
	// (LogStartOffset): the follower resets without one (R53).
	SnapshotNone SnapshotError = 2
	// SnapshotGone: the snapshot the request names is no longer held (a
	// newer one replaced it): the follower starts over.
	SnapshotGone SnapshotError = 3
)

// String names the outcome.
func (e SnapshotError) String() string {
	switch e {
	case SnapshotOK:
		return "ok"
	case SnapshotNotLeader:
		return "not-leader"
	case SnapshotNone:
		return "none"
	case SnapshotGone:
		return "gone"
	}
	return fmt.Sprintf("snapshot-error(%d)", uint8(e))
}

// SnapshotResponse answers a SnapshotRequest. With SnapshotOK, Data is
// the body's bytes from Position on (empty only when Position is Size),
// and Offset, SnapshotEpoch, Size and CRC (CRC-32C of the whole body)
// describe the snapshot they are of.
type SnapshotResponse struct {
	RequestID      uint64
	LeaderID       string
	Epoch          uint64
	Error          SnapshotError
	LogStartOffset uint64
	Offset         uint64
	SnapshotEpoch  uint64
	Size           uint64
	CRC            uint32
	Position       uint64
	Data           []byte
}

// Kind implements Body.
func (*SnapshotRequest) Kind() Kind  { return KindSnapshotRequest }
func (*SnapshotResponse) Kind() Kind { return KindSnapshotResponse }

func (*SnapshotRequest) isBody()  {}
func (*SnapshotResponse) isBody() {}

func (m *SnapshotRequest) String() string {
	return fmt.Sprintf("SnapshotReq{id=%d epoch=%d snap=(%d,%d) pos=%d max=%d}",
		m.RequestID, m.Epoch, m.Offset, m.SnapshotEpoch, m.Position, m.MaxBytes)
}

func (m *SnapshotResponse) String() string {
	return fmt.Sprintf("SnapshotResp{id=%d leader=%s epoch=%d %s start=%d snap=(%d,%d) size=%d pos=%d bytes=%d}",
		m.RequestID, m.LeaderID, m.Epoch, m.Error, m.LogStartOffset, m.Offset, m.SnapshotEpoch, m.Size, m.Position, len(m.Data))
}

// snapshotRequestSize and snapshotResponseSize are the bodies' encoded
// sizes beyond their strings and data.
const (
	snapshotRequestSize  = 8 + 8 + 8 + 8 + 8 + 4
	snapshotResponseSize = 8 + 4 + 8 + 1 + 8 + 8 + 8 + 8 + 4 + 8 + 4
)
