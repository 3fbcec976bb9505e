package shell

import (
	"bytes"
	"hash/crc32"
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

// TestReceiveSnapshotChunk (R94, R95): a follower's chunks written in
// order, the last one installs the whole once its CRC is the sender's,
// and each outcome is the progress the core is told: the bytes held,
// Installed; a chunk that does not continue the partial, or a body whose
// CRC is not the sender's, fails (Failed, the partial dropped: the
// transfer starts over). SnapshotsHeld tells a reopened core of the
// newest snapshot and of a partial a restart left.
func TestReceiveSnapshotChunk(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "s")
	st, err := storage.OpenSnapshots(dir, storage.SnapshotOptions{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	body := bytes.Repeat([]byte("0123456789"), 50)
	crc := crc32.Checksum(body, crc32.MakeTable(crc32.Castagnoli))
	chunk := func(pos, n int, c uint32) replica.SnapshotChunk {
		return replica.SnapshotChunk{Offset: 70, Epoch: 3, Size: uint64(len(body)), CRC: c, Position: uint64(pos),
			Data: body[pos : pos+n], Last: pos+n == len(body)}
	}
	if held := SnapshotsHeld(st); len(held) != 0 {
		t.Fatalf("an empty store holds %v", held)
	}
	p, _, ok, err := ReceiveSnapshotChunk(st, chunk(0, 200, crc))
	if err != nil || ok || p.Have != 200 || p.Installed || p.Failed || p.Offset != 70 || p.Epoch != 3 {
		t.Fatalf("first chunk: %+v %t %v", p, ok, err)
	}
	// A restart: the partial is reported at its size.
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if st, err = storage.OpenSnapshots(dir, storage.SnapshotOptions{NoSync: true}); err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if held := SnapshotsHeld(st); len(held) != 1 || held[0].Have != 200 || held[0].Installed || held[0].Offset != 70 {
		t.Fatalf("after a restart: %+v", held)
	}
	// A chunk that skips bytes fails and drops the partial.
	if p, _, ok, err = ReceiveSnapshotChunk(st, chunk(300, 100, crc)); err == nil || ok || !p.Failed {
		t.Fatalf("a chunk past the partial's end: %+v %t %v", p, ok, err)
	}
	if _, held := st.Partial(); held {
		t.Fatal("the partial was kept after a failed chunk")
	}
	// A whole body whose CRC is not the sender's is refused at install.
	ReceiveSnapshotChunk(st, chunk(0, 250, crc+1))
	if p, _, ok, err = ReceiveSnapshotChunk(st, chunk(250, 250, crc+1)); err == nil || ok || !p.Failed || p.Installed {
		t.Fatalf("a body of another CRC: %+v %t %v", p, ok, err)
	}
	if _, has := st.Latest(); has {
		t.Fatal("an unverified snapshot was installed")
	}
	// The positive control: the sender's bytes install.
	ReceiveSnapshotChunk(st, chunk(0, 250, crc))
	p, info, ok, err := ReceiveSnapshotChunk(st, chunk(250, 250, crc))
	if err != nil || !ok || !p.Installed || p.Failed || p.Have != uint64(len(body)) || info.Offset != 70 || info.Size != int64(len(body)) {
		t.Fatalf("the whole body: %+v %+v %t %v", p, info, ok, err)
	}
	if held := SnapshotsHeld(st); len(held) != 1 || !held[0].Installed || held[0].Have != uint64(len(body)) || held[0].CRC != crc {
		t.Fatalf("after the install: %+v", held)
	}
}

func TestSnapshotEpochDescribesAndRetainBound(t *testing.T) {
	epochs := []protocol.EpochStart{{Epoch: 2, StartOffset: 5}, {Epoch: 4, StartOffset: 9}}
	for _, c := range []struct{ off, want uint64 }{{0, 0}, {5, 2}, {6, 2}, {9, 2}, {10, 4}, {50, 4}} {
		if got := SnapshotEpoch(epochs, c.off); got != c.want {
			t.Errorf("SnapshotEpoch(%d) = %d, want %d", c.off, got, c.want)
		}
	}
	// Log [3, 12) with the epoch map above: below the log start taken
	// (unchecked), above the end refused, at an offset tagged with its
	// entry's epoch taken and with another refused.
	for _, c := range []struct {
		off, tag uint64
		want     bool
	}{{2, 9, true}, {13, 4, false}, {12, 4, true}, {6, 2, true}, {6, 4, false}, {3, 2, true}} {
		if got, why := SnapshotDescribes(epochs, 3, 12, storage.SnapshotInfo{Offset: c.off, Epoch: c.tag}); got != c.want || got == (why != "") {
			t.Errorf("SnapshotDescribes(%d, tag %d) = %v (%q), want %v", c.off, c.tag, got, why, c.want)
		}
	}
	newest := storage.SnapshotInfo{Offset: 7}
	for _, c := range []struct {
		until, ok bool
		off, want uint64
	}{{false, false, 20, 20}, {true, false, 20, 0}, {true, true, 20, 7}, {true, true, 3, 3}} {
		if got := RetainBound(c.until, newest, c.ok, c.off); got != c.want {
			t.Errorf("RetainBound(%v, 7, %v, %d) = %d, want %d", c.until, c.ok, c.off, got, c.want)
		}
	}
}
