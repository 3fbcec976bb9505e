package replica

import (
	"strings"
	"testing"
	"time"

	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/storage"
)

// shippingFollower is follower f of leader L in epoch 2 (its log: epochs
// 1, 1, 2, HW 1) with Config.ShipSnapshots, answered out of range with
// the leader's log start 30 (the entry below it of epoch 2); it returns
// the first snapshot request.
func shippingFollower(t *testing.T) (*Replica, *storage.Memory, *protocol.SnapshotRequest) {
	t.Helper()
	store := newStore(t, []uint64{1, 1, 2}, protocol.QuorumState{Epoch: 2, LeaderID: "L"})
	if err := store.SetHWCheckpoint(1); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig("f", "f", "L", "x")
	cfg.ShipSnapshots = true
	r := newTestReplica(t, cfg, store)
	reqs := bodiesTo[*protocol.FetchRequest](r.Ready().Messages, "L")
	if len(reqs) != 1 {
		t.Fatalf("setup: fetches %v", reqs)
	}
	r.Step(protocol.Message{From: "L", To: "f", Body: &protocol.FetchResponse{FetchID: reqs[0].FetchID, LeaderID: "L", Epoch: 2,
		Error: protocol.FetchOffsetOutOfRange, HighWatermark: 40, LogStartOffset: 30, LogStartEpoch: 2}})
	rd := r.Ready()
	if len(rd.Writes) != 0 || len(bodiesTo[*protocol.FetchRequest](rd.Messages, "")) != 0 {
		t.Fatalf("before the snapshot: writes %v, messages %v; want none and no fetch (R92)", rd.Writes, rd.Messages)
	}
	sreqs := bodiesTo[*protocol.SnapshotRequest](rd.Messages, "L")
	if len(sreqs) != 1 || sreqs[0].Offset != 0 || sreqs[0].Position != 0 || sreqs[0].Epoch != 2 {
		t.Fatalf("snapshot requests %+v, want one asking for the newest (offset 0) from byte 0", sreqs)
	}
	return r, store, sreqs[0]
}

// chunkAnswer steps the leader's answer to req: bytes data of snapshot
// (35, 2), 10 bytes, CRC 7, at req's position; it returns the Ready.
func chunkAnswer(r *Replica, req *protocol.SnapshotRequest, data string) Ready {
	r.Step(protocol.Message{From: "L", To: "f", Body: &protocol.SnapshotResponse{RequestID: req.RequestID, LeaderID: "L", Epoch: 2,
		LogStartOffset: 30, Offset: 35, SnapshotEpoch: 2, Size: 10, CRC: 7, Position: req.Position, Data: []byte(data)}})
	return r.Ready()
}

// TestSnapshotBeforeReset (R92, R94): a follower below its leader's log
// start pulls the leader's snapshot chunk by chunk (each asked for once
// the previous one is written, a lost answer asked for again, a late
// answer to the earlier request dropped) and resets to the log start only
// once the shell reports the snapshot verified and installed: not on the
// last chunk, whose install may still fail. The reset is then the one R53
// makes (its HW rises to the log start once durable), and it fetches from
// there.
func TestSnapshotBeforeReset(t *testing.T) {
	r, store, req := shippingFollower(t)
	rd := chunkAnswer(r, req, "01234")
	if len(rd.SnapshotChunks) != 1 || len(rd.Messages) != 0 {
		t.Fatalf("after the first chunk: chunks %+v, messages %v; want the chunk and no request until it is written", rd.SnapshotChunks, rd.Messages)
	}
	if c := rd.SnapshotChunks[0]; c.Offset != 35 || c.Epoch != 2 || c.Position != 0 || string(c.Data) != "01234" || c.Last {
		t.Fatalf("first chunk %+v", c)
	}
	r.SnapshotProgress(SnapshotProgress{Offset: 35, Epoch: 2, Size: 10, CRC: 7, Have: 5})
	next := bodiesTo[*protocol.SnapshotRequest](r.Ready().Messages, "L")
	if len(next) != 1 || next[0].Offset != 35 || next[0].SnapshotEpoch != 2 || next[0].Position != 5 {
		t.Fatalf("request after the first chunk %+v, want snapshot (35, 2) from byte 5", next)
	}
	// Its answer is lost: the same chunk is asked for again.
	r.Tick(t0.Add(r.fetchRetryTimeout() + time.Millisecond))
	again := bodiesTo[*protocol.SnapshotRequest](r.Ready().Messages, "L")
	if len(again) != 1 || again[0].Position != 5 || again[0].RequestID == next[0].RequestID {
		t.Fatalf("after the retry timeout: %+v, want the same chunk under a new request ID", again)
	}
	if rd := chunkAnswer(r, next[0], "56789"); len(rd.SnapshotChunks) != 0 {
		t.Fatalf("a late answer to the earlier request was taken: %+v", rd.SnapshotChunks)
	}
	rd = chunkAnswer(r, again[0], "56789")
	if len(rd.SnapshotChunks) != 1 || !rd.SnapshotChunks[0].Last || rd.SnapshotChunks[0].Position != 5 {
		t.Fatalf("last chunk %+v", rd.SnapshotChunks)
	}
	if len(rd.Writes) != 0 || store.LogStart() != 0 {
		t.Fatalf("reset before the snapshot is installed: writes %v (R94)", rd.Writes)
	}
	r.SnapshotProgress(SnapshotProgress{Offset: 35, Epoch: 2, Size: 10, CRC: 7, Have: 10, Installed: true})
	msgs, _ := settle(t, r, store)
	if store.LogStart() != 30 || store.LEO() != 30 || r.hw != 30 {
		t.Fatalf("after the install: store [%d, %d), hw %d; want the reset to 30 (R53)", store.LogStart(), store.LEO(), r.hw)
	}
	msgs = append(msgs, r.Ready().Messages...)
	if f := bodiesTo[*protocol.FetchRequest](msgs, "L"); len(f) != 1 || f[0].FetchOffset != 30 {
		t.Fatalf("fetch after the reset: %+v, want one from 30", f)
	}
}

// TestSnapshotTransferOutcomes (R92, R93, R95): what ends or restarts a
// transfer. A snapshot that cannot describe the log the follower resets
// to (below the leader's log start, or at it with another epoch than the
// entry below it) is not pulled: the follower resets without it, as with
// none; a snapshot the leader no longer holds, or a failed write, starts
// over from byte 0; a leader change ends the transfer (fetching resumes);
// three requests in a row without an answer reset without a snapshot.
func TestSnapshotTransferOutcomes(t *testing.T) {
	resetWithout := func(t *testing.T, r *Replica, store *storage.Memory, rd Ready) {
		t.Helper()
		if len(rd.SnapshotChunks) != 0 {
			t.Fatalf("chunks %+v taken", rd.SnapshotChunks)
		}
		applyWrites(t, store, rd.Writes)
		if len(rd.Writes) > 0 {
			r.Persisted(rd.Writes[len(rd.Writes)-1].Seq)
		}
		settle(t, r, store)
		if store.LogStart() != 30 {
			t.Fatalf("log start %d, want the reset to 30", store.LogStart())
		}
	}
	offer := func(r *Replica, req *protocol.SnapshotRequest, offset, epoch uint64) Ready {
		r.Step(protocol.Message{From: "L", To: "f", Body: &protocol.SnapshotResponse{RequestID: req.RequestID, LeaderID: "L", Epoch: 2,
			LogStartOffset: 30, Offset: offset, SnapshotEpoch: epoch, Size: 3, CRC: 1, Data: []byte("abc")}})
		return r.Ready()
	}
	t.Run("below the log start", func(t *testing.T) {
		r, store, req := shippingFollower(t)
		resetWithout(t, r, store, offer(r, req, 20, 1))
	})
	t.Run("at the log start of another epoch", func(t *testing.T) {
		r, store, req := shippingFollower(t)
		resetWithout(t, r, store, offer(r, req, 30, 1))
	})
	t.Run("at the log start", func(t *testing.T) {
		r, _, req := shippingFollower(t)
		if rd := offer(r, req, 30, 2); len(rd.SnapshotChunks) != 1 {
			t.Fatalf("positive control: a snapshot at the log start of its epoch is pulled: %+v", rd.SnapshotChunks)
		}
	})
	t.Run("none", func(t *testing.T) {
		r, store, req := shippingFollower(t)
		r.Step(protocol.Message{From: "L", To: "f", Body: &protocol.SnapshotResponse{RequestID: req.RequestID, LeaderID: "L", Epoch: 2, Error: protocol.SnapshotNone}})
		resetWithout(t, r, store, r.Ready())
	})
	t.Run("gone and failed start over", func(t *testing.T) {
		r, _, req := shippingFollower(t)
		chunkAnswer(r, req, "01234")
		r.SnapshotProgress(SnapshotProgress{Offset: 35, Epoch: 2, Size: 10, CRC: 7, Have: 5})
		next := bodiesTo[*protocol.SnapshotRequest](r.Ready().Messages, "L")[0]
		r.Step(protocol.Message{From: "L", To: "f", Body: &protocol.SnapshotResponse{RequestID: next.RequestID, LeaderID: "L", Epoch: 2, Error: protocol.SnapshotGone}})
		over := bodiesTo[*protocol.SnapshotRequest](r.Ready().Messages, "L")
		if len(over) != 1 || over[0].Offset != 0 || over[0].Position != 0 {
			t.Fatalf("after gone: %+v, want a request for the newest from byte 0", over)
		}
		chunkAnswer(r, over[0], "01234")
		r.SnapshotProgress(SnapshotProgress{Offset: 35, Epoch: 2, Size: 10, CRC: 7, Failed: true})
		if again := bodiesTo[*protocol.SnapshotRequest](r.Ready().Messages, "L"); len(again) != 1 || again[0].Offset != 0 || again[0].Position != 0 {
			t.Fatalf("after a failed write: %+v, want a request from byte 0", again)
		}
	})
	t.Run("leader change", func(t *testing.T) {
		r, store, req := shippingFollower(t)
		chunkAnswer(r, req, "01234")
		r.Step(protocol.Message{From: "x", To: "f", Body: &protocol.BeginEpoch{Epoch: 3, LeaderID: "x"}})
		msgs, _ := settle(t, r, store)
		if r.snapshotFetching() || store.LogStart() != 0 {
			t.Fatalf("transfer still on (%v) or reset (log start %d) after a leader change", r.snapshotFetching(), store.LogStart())
		}
		if f := bodiesTo[*protocol.FetchRequest](msgs, "x"); len(f) != 1 {
			t.Fatalf("fetches to the new leader: %+v", f)
		}
	})
	t.Run("silence", func(t *testing.T) {
		r, store, _ := shippingFollower(t)
		now := t0
		for range snapshotMaxSilence {
			now = now.Add(r.fetchRetryTimeout() + time.Millisecond)
			r.Tick(now)
			if rd := r.Ready(); len(rd.Writes) > 0 {
				applyWrites(t, store, rd.Writes)
				r.Persisted(rd.Writes[len(rd.Writes)-1].Seq)
			}
			// Keep the leader alive meanwhile: the election timer is not
			// what this checks.
			r.lastLeaderContact, r.electionDeadline = now, now.Add(time.Hour)
		}
		settle(t, r, store)
		if r.snapshotFetching() || store.LogStart() != 30 {
			t.Fatalf("after %d unanswered requests: fetching %v, log start %d; want the reset to 30", snapshotMaxSilence, r.snapshotFetching(), store.LogStart())
		}
	})
	t.Run("diverging below the log start", func(t *testing.T) {
		// The reset of a diverging answer below the leader's log start
		// (R53) waits for the snapshot too, and then truncates first.
		store := newStore(t, []uint64{1, 1, 2}, protocol.QuorumState{Epoch: 2, LeaderID: "L"})
		cfg := testConfig("f", "f", "L", "x")
		cfg.ShipSnapshots = true
		r := newTestReplica(t, cfg, store)
		req := bodiesTo[*protocol.FetchRequest](r.Ready().Messages, "L")[0]
		r.Step(protocol.Message{From: "L", To: "f", Body: &protocol.FetchResponse{FetchID: req.FetchID, LeaderID: "L", Epoch: 2,
			Error: protocol.FetchDivergingEpoch, DivergingEpoch: 0, DivergingEndOffset: 30, HighWatermark: 40, LogStartOffset: 30, LogStartEpoch: 2}})
		rd := r.Ready()
		s := bodiesTo[*protocol.SnapshotRequest](rd.Messages, "L")
		if len(s) != 1 || len(rd.Writes) != 0 {
			t.Fatalf("diverging below the log start: requests %+v, writes %v; want a snapshot request and no reset yet", s, rd.Writes)
		}
		r.Step(protocol.Message{From: "L", To: "f", Body: &protocol.SnapshotResponse{RequestID: s[0].RequestID, LeaderID: "L", Epoch: 2, Error: protocol.SnapshotNone}})
		rd = r.Ready()
		if len(rd.Writes) != 2 || rd.Writes[0].Kind != protocol.WriteTruncate || rd.Writes[1].Kind != protocol.WriteDeletePrefix {
			t.Fatalf("reset writes %v, want the truncation then the deletion", rd.Writes)
		}
	})
	t.Run("resume a partial", func(t *testing.T) {
		store := newStore(t, []uint64{1, 1, 2}, protocol.QuorumState{Epoch: 2, LeaderID: "L"})
		cfg := testConfig("f", "f", "L", "x")
		cfg.ShipSnapshots = true
		r := newTestReplica(t, cfg, store)
		r.SnapshotProgress(SnapshotProgress{Offset: 35, Epoch: 2, Size: 10, CRC: 7, Have: 6})
		req := bodiesTo[*protocol.FetchRequest](r.Ready().Messages, "L")[0]
		r.Step(protocol.Message{From: "L", To: "f", Body: &protocol.FetchResponse{FetchID: req.FetchID, LeaderID: "L", Epoch: 2,
			Error: protocol.FetchOffsetOutOfRange, HighWatermark: 40, LogStartOffset: 30, LogStartEpoch: 2}})
		s := bodiesTo[*protocol.SnapshotRequest](r.Ready().Messages, "L")
		if len(s) != 1 || s[0].Offset != 35 || s[0].SnapshotEpoch != 2 || s[0].Position != 6 {
			t.Fatalf("after a restart with 6 bytes of (35, 2) kept: %+v, want a request from byte 6", s)
		}
	})
}

// TestSnapshotTransferKeepsContact (R92, R77): a follower pulling a
// snapshot sends no fetch that could append, but a contact fetch every
// FetchMaxWait, so that its leader hears from it (check-quorum) and it
// from its leader while its requests go unanswered (a leader of a release
// without snapshot transfer never answers them). The contact answer (out
// of range: the log start is still above it) is contact only: nothing is
// appended or reset, the transfer goes on, and the follower never
// campaigns; after three unanswered requests it resets as before. Teeth:
// replog_bug_snapshot_no_contact.
func TestSnapshotTransferKeepsContact(t *testing.T) {
	r, store, _ := shippingFollower(t)
	// Ticked only at NextDeadline, as the shell does (R97): the contact
	// fetches must be among its terms.
	lastContact, contacts := t0, 0
	for i := 0; i < 1000 && r.snapshotFetching(); i++ {
		now := r.NextDeadline()
		if now.IsZero() {
			t.Fatalf("no deadline while pulling")
		}
		r.Tick(now)
		rd := r.Ready()
		if r.role != RoleFollower {
			t.Fatalf("at %v: %s while pulling from a live leader that answers its fetches", now.Sub(t0), r.role)
		}
		applyWrites(t, store, rd.Writes)
		if len(rd.Writes) > 0 {
			r.Persisted(rd.Writes[len(rd.Writes)-1].Seq)
			if r.snapshotFetching() {
				t.Fatalf("writes while pulling: %v", rd.Writes)
			}
			break // the reset after the silence
		}
		for _, f := range bodiesTo[*protocol.FetchRequest](rd.Messages, "L") {
			if f.MaxWaitMs != 0 || f.MaxBytes != 1 || f.FetchOffset != 3 || !f.HasDurableOffset || f.DurableOffset != 3 {
				t.Fatalf("a fetch while pulling that is not a contact fetch from the durable end: %+v", f)
			}
			if gap := now.Sub(lastContact); gap > r.cfg.FetchMaxWait {
				t.Fatalf("a contact fetch %v after the last, want at most FetchMaxWait %v", gap, r.cfg.FetchMaxWait)
			}
			lastContact = now
			contacts++
			r.Step(protocol.Message{From: "L", To: "f", Body: &protocol.FetchResponse{FetchID: f.FetchID, LeaderID: "L", Epoch: 2,
				Error: protocol.FetchOffsetOutOfRange, HighWatermark: 40, LogStartOffset: 30, LogStartEpoch: 2}})
			if rd := r.Ready(); len(rd.Writes) != 0 || len(rd.SnapshotChunks) != 0 {
				t.Fatalf("a contact answer moved the transfer: writes %v, chunks %v", rd.Writes, rd.SnapshotChunks)
			}
			if !r.lastLeaderContact.Equal(now) {
				t.Fatalf("a contact answer is not leader contact: last %v, now %v", r.lastLeaderContact, now)
			}
		}
	}
	if contacts < int(snapshotMaxSilence) {
		t.Fatalf("%d contact fetches while pulling, want one every FetchMaxWait (%v)", contacts, r.cfg.FetchMaxWait)
	}
	settle(t, r, store)
	if r.snapshotFetching() || store.LogStart() != 30 {
		t.Fatalf("after %d unanswered requests: fetching %v, log start %d; want the reset to 30", snapshotMaxSilence, r.snapshotFetching(), store.LogStart())
	}
}

// TestLeaderChecksSnapshotRequests (R92): a leader hands a member's
// request of its epoch to the shell (its log start with it, the bytes
// bounded by FetchMaxBytes) only at FeatureLevelSnapshotTransfer; below
// it, it answers none itself; another epoch's request is answered
// not-leader with its own; a stranger's is dropped.
func TestLeaderChecksSnapshotRequests(t *testing.T) {
	store := newStore(t, nil, protocol.QuorumState{})
	cfg := testConfig("L", "L")
	cfg.FetchMaxBytes = 4096
	r := newTestReplica(t, cfg, store)
	settle(t, r, store)
	if r.role != RoleLeader {
		t.Fatalf("setup: role %v", r.role)
	}
	// "o" fetched: a member (an observer's fetch session).
	r.Step(protocol.Message{From: "o", To: "L", Body: &protocol.FetchRequest{FetchID: 1, ReplicaID: "o", CurrentEpoch: r.epoch}})
	settle(t, r, store)
	ask := func(from string, epoch uint64) Ready {
		r.Step(protocol.Message{From: from, To: "L", Body: &protocol.SnapshotRequest{RequestID: 9, Epoch: epoch, MaxBytes: 1 << 20}})
		return r.Ready()
	}
	r.level = protocol.FeatureLevelSnapshotTransfer - 1
	rd := ask("o", r.epoch)
	if s := bodiesTo[*protocol.SnapshotResponse](rd.Messages, "o"); len(rd.SnapshotReads) != 0 || len(s) != 1 || s[0].Error != protocol.SnapshotNone {
		t.Fatalf("below the level: reads %+v, answers %+v; want none to read and a none answer", rd.SnapshotReads, s)
	}
	r.level = protocol.FeatureLevelSnapshotTransfer
	rd = ask("o", r.epoch)
	if len(rd.SnapshotReads) != 1 || rd.SnapshotReads[0].To != "o" || rd.SnapshotReads[0].MaxBytes >= 4096 ||
		rd.SnapshotReads[0].LogStart != r.log.logStart || rd.SnapshotReads[0].Epoch != r.epoch || rd.SnapshotReads[0].LeaderID != "L" {
		t.Fatalf("at the level: reads %+v", rd.SnapshotReads)
	}
	// A full answer, with the longest log name, is within FetchMaxBytes
	// (what a frame carries), as a fetch answer is.
	full := protocol.Message{From: "L", To: "o", Log: strings.Repeat("n", protocol.MaxLogNameLength), Body: &protocol.SnapshotResponse{LeaderID: "L", Epoch: r.epoch,
		Offset: 1 << 60, Size: 1 << 60, Position: 1 << 59, Data: make([]byte, rd.SnapshotReads[0].MaxBytes)}}
	if n := protocol.EncodedSize(full); n > 4096 {
		t.Fatalf("a full snapshot answer takes %d bytes, above FetchMaxBytes 4096", n)
	}
	rd = ask("o", r.epoch-1)
	if s := bodiesTo[*protocol.SnapshotResponse](rd.Messages, "o"); len(rd.SnapshotReads) != 0 || len(s) != 1 || s[0].Error != protocol.SnapshotNotLeader || s[0].Epoch != r.epoch {
		t.Fatalf("an older epoch's request: reads %+v, answers %+v", rd.SnapshotReads, s)
	}
	if rd = ask("stranger", r.epoch); len(rd.SnapshotReads) != 0 || len(rd.Messages) != 0 {
		t.Fatalf("a stranger's request: %+v %v", rd.SnapshotReads, rd.Messages)
	}
}
