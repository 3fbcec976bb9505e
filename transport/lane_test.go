package transport

import (
	"testing"

	"github.com/replog-io/replog/protocol"
)

// TestLaneOf: fetches and snapshot chunks, the large messages, travel on
// the data lane; votes, appends and the rest on the control lane, which a
// large frame never holds up.
func TestLaneOf(t *testing.T) {
	for k, want := range map[protocol.Kind]uint8{
		protocol.KindFetchRequest: laneData, protocol.KindFetchResponse: laneData,
		protocol.KindSnapshotRequest: laneData, protocol.KindSnapshotResponse: laneData,
		protocol.KindVoteRequest: laneControl, protocol.KindVoteResponse: laneControl,
		protocol.KindAppendRequest: laneControl, protocol.KindBeginEpoch: laneControl,
	} {
		if got := laneOf(k); got != want {
			t.Errorf("laneOf(%s) = %d, want %d", k, got, want)
		}
	}
}
