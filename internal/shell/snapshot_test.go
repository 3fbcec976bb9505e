package shell

import (
	"bytes"
	"io"
	"path/filepath"
	"testing"

	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/replica"
	"github.com/replog-io/replog/storage"
)

// TestServeSnapshot (R92, R93): the leader's answer from its snapshot
// store: the newest snapshot at or above its log start from byte 0 when
// the request names none, the named one from its position (bounded by
// MaxBytes), gone when the named one is not held, none when no snapshot
// is at or above the log start (or there is no store).
func TestServeSnapshot(t *testing.T) {
	st, err := storage.OpenSnapshots(filepath.Join(t.TempDir(), "s"), storage.SnapshotOptions{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	body := bytes.Repeat([]byte("abcdefgh"), 100)
	for _, off := range []uint64{40, 60} {
		if _, err := st.Save(off, 2, func(w io.Writer) error { _, err := w.Write(body); return err }); err != nil {
			t.Fatal(err)
		}
	}
	read := func(req protocol.SnapshotRequest, logStart uint64, src SnapshotSource) *protocol.SnapshotResponse {
		m := ServeSnapshot(replica.SnapshotRead{To: "f", Request: req, LeaderID: "L", Epoch: 3, LogStart: logStart, MaxBytes: 300}, src)
		if m.From != "L" || m.To != "f" {
			t.Fatalf("answer addressed %s->%s", m.From, m.To)
		}
		resp := m.Body.(*protocol.SnapshotResponse)
		if resp.RequestID != req.RequestID || resp.Epoch != 3 || resp.LogStartOffset != logStart {
			t.Fatalf("answer %+v does not answer %+v", resp, req)
		}
		return resp
	}
	r := read(protocol.SnapshotRequest{RequestID: 1}, 50, st)
	if r.Error != protocol.SnapshotOK || r.Offset != 60 || r.Position != 0 || r.Size != 800 || !bytes.Equal(r.Data, body[:300]) {
		t.Fatalf("newest: %v", r)
	}
	r = read(protocol.SnapshotRequest{RequestID: 2, Offset: 60, SnapshotEpoch: 2, Position: 600}, 50, st)
	if r.Error != protocol.SnapshotOK || r.Position != 600 || !bytes.Equal(r.Data, body[600:]) {
		t.Fatalf("named, from 600: %v", r)
	}
	if r = read(protocol.SnapshotRequest{RequestID: 3, Offset: 60, SnapshotEpoch: 1}, 50, st); r.Error != protocol.SnapshotGone {
		t.Fatalf("another epoch's: %v", r)
	}
	if r = read(protocol.SnapshotRequest{RequestID: 4, Offset: 40, SnapshotEpoch: 2}, 50, st); r.Error != protocol.SnapshotGone {
		t.Fatalf("one below the log start: %v", r)
	}
	if r = read(protocol.SnapshotRequest{RequestID: 5}, 61, st); r.Error != protocol.SnapshotNone {
		t.Fatalf("none at or above the log start: %v", r)
	}
	if r = read(protocol.SnapshotRequest{RequestID: 6}, 0, nil); r.Error != protocol.SnapshotNone {
		t.Fatalf("no store: %v", r)
	}
}
