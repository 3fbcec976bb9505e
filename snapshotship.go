package replog

import (
	"errors"

	"github.com/replog-io/replog/internal/shell"
	"github.com/replog-io/replog/replica"
	"github.com/replog-io/replog/storage"
)

// Snapshot shipping (docs/protocol.md 3.14, R92-R95; docs/storage.md
// section 12): the core decides, internal/shell answers a request
// (ServeSnapshot) and writes a chunk (ReceiveSnapshotChunk), this file
// runs those off the loop. A leader answers
// each snapshot request the core checked on a goroutine of its own (a read
// of the snapshot file never runs on the loop, and appends never wait for
// it); a follower's chunks go to one receiver goroutine, which writes them
// to the partial snapshot, installs the whole once its checksum is the
// sender's, and reports each outcome back into the loop.

// maxSnapshotServes bounds the snapshot reads a leader runs at once: more
// requests wait for one to end (each is one chunk, one file read; a
// follower has one request out at a time, so few ever wait).
const maxSnapshotServes = 4

// shipState is the Log's side of snapshot shipping.
type shipState struct {
	// progress carries the receiver's reports into the loop.
	progress chan replica.SnapshotProgress
	// chunks carries the core's chunks to the receiver (the core has one
	// outstanding at a time).
	chunks chan replica.SnapshotChunk
	// serves bounds the leader's concurrent reads.
	serves chan struct{}
}

// startShipping starts the receiver and queues, for the loop's first
// round, what the snapshot store holds: the newest snapshot (not pulled
// again) and a partial one a restart interrupted (resumed at its size).
func (l *Log) startShipping() {
	l.ship = shipState{
		progress: make(chan replica.SnapshotProgress, 4),
		chunks:   make(chan replica.SnapshotChunk, 4),
		serves:   make(chan struct{}, maxSnapshotServes),
	}
	for _, p := range shell.SnapshotsHeld(l.snap.store) {
		l.ship.progress <- p
	}
	l.wg.Add(1)
	go l.receiveSnapshots()
}

// shipOut carries out a round's snapshot work: the reads on goroutines,
// the chunks to the receiver.
func (l *Log) shipOut(out *shell.Output) {
	for _, sr := range out.SnapshotReads {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			select {
			case l.ship.serves <- struct{}{}:
			case <-l.closing:
				return
			}
			defer func() { <-l.ship.serves }()
			m := shell.ServeSnapshot(sr, shipSource{l})
			if l.tr == nil {
				return
			}
			if err := l.tr.Send(m); err != nil {
				l.logger.Trace("send", "to", m.To, "error", err)
			}
		}()
	}
	for _, ch := range out.SnapshotChunks {
		select {
		case l.ship.chunks <- ch:
		case <-l.closing:
			return
		}
	}
}

// receiveSnapshots writes the chunks the core hands out, in order, and
// reports each outcome.
func (l *Log) receiveSnapshots() {
	defer l.wg.Done()
	st := l.snap.store
	for {
		var ch replica.SnapshotChunk
		select {
		case <-l.closing:
			return
		case ch = <-l.ship.chunks:
		}
		p, info, installed, err := shell.ReceiveSnapshotChunk(st, ch)
		if installed {
			l.logger.Info("snapshot received and installed", "offset", info.Offset, "bytes", info.Size)
		}
		if err != nil && !errors.Is(err, storage.ErrClosed) {
			l.logger.Warn("snapshot transfer: the received chunk could not be kept", "offset", ch.Offset, "position", ch.Position, "error", err)
		}
		select {
		case l.ship.progress <- p:
		case <-l.closing:
			return
		}
	}
}

// shipSource is the Log's snapshot store as a leader ships from it: only
// the snapshots that describe this log (R88, R93).
type shipSource struct{ l *Log }

func (s shipSource) List() []storage.SnapshotInfo {
	var out []storage.SnapshotInfo
	for _, i := range s.l.snap.store.List() {
		if ok, _ := s.l.describes(i); ok {
			out = append(out, i)
		}
	}
	return out
}

func (s shipSource) ReadChunk(info storage.SnapshotInfo, pos int64, max int) ([]byte, error) {
	return s.l.snap.store.ReadChunk(info, pos, max)
}
