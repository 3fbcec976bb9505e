package replog

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/storage"
)

// groupLog is one log of a groupWriter test: its store, writer and what
// the writer reported.
type groupLog struct {
	store *storage.DirStore
	w     *writer

	mu        sync.Mutex
	persisted []uint64
	failed    error
}

func (l *groupLog) last() (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.persisted) == 0 {
		return 0, l.failed
	}
	return l.persisted[len(l.persisted)-1], l.failed
}

// groupLogs opens n stores on one shared journal of the given size and a
// groupWriter for them, its goroutine not started yet: the test queues
// first, so that the first pass takes every log's writes. start starts
// it.
func groupLogs(t *testing.T, n int, bytes int64) (j *storage.Journal, g *groupWriter, logs []*groupLog, start func()) {
	t.Helper()
	root := t.TempDir()
	j, err := storage.OpenJournal(filepath.Join(root, "shared.journal"), storage.JournalOptions{Bytes: bytes})
	if err != nil {
		t.Fatal(err)
	}
	g = &groupWriter{j: j, logger: hclog.NewNullLogger(), wake: make(chan struct{}, 1), done: make(chan struct{})}
	started := false
	start = func() {
		started = true
		go g.run()
	}
	for i := range n {
		s, _, err := storage.OpenDir(filepath.Join(root, fmt.Sprint(i)), storage.Identity{ClusterID: "c", NodeID: "n1"},
			storage.DirOptions{SharedJournal: j, JournalLogID: uint32(i + 1)})
		if err != nil {
			t.Fatal(err)
		}
		l := &groupLog{store: s}
		l.w = g.writerFor(s, hclog.NewNullLogger(), func(seq uint64) {
			l.mu.Lock()
			l.persisted = append(l.persisted, seq)
			l.mu.Unlock()
		}, func(err error) {
			l.mu.Lock()
			l.failed = err
			l.mu.Unlock()
		})
		if l.w.group != g {
			t.Fatal("a DirStore on the journal got a writer of its own")
		}
		logs = append(logs, l)
	}
	t.Cleanup(func() {
		for _, l := range logs {
			l.w.stop()
		}
		if !started {
			start()
		}
		g.stop()
		for _, l := range logs {
			_ = l.store.Close()
		}
		_ = j.Close()
	})
	return j, g, logs, start
}

// appendAt is a write appending n entries of size bytes at offset from.
func appendAt(seq, from uint64, n, size int) protocol.Write {
	es := make([]protocol.Entry, n)
	for i := range es {
		es[i] = protocol.Entry{Offset: from + uint64(i), Epoch: 1, Type: protocol.EntryData, Data: make([]byte, size)}
	}
	return protocol.Write{Seq: seq, Kind: protocol.WriteAppend, Entries: es}
}

// A node's writer commits every log's queued writes in one journal round
// (one record, one fdatasync) and reports each log's last Seq; a log
// whose batch is invalid fails alone, the others in the same round are
// applied, and it takes nothing more of the failed log.
func TestGroupWriterOneRoundForEveryLog(t *testing.T) {
	const n = 8
	j, _, logs, start := groupLogs(t, n, 1<<20)
	for i, l := range logs {
		l.w.enqueue([]protocol.Write{
			{Seq: 1, Kind: protocol.WriteQuorumState, Quorum: protocol.QuorumState{Epoch: 1}},
			appendAt(2, 0, 1+i, 100),
		})
		l.w.enqueue([]protocol.Write{appendAt(3, uint64(1+i), 2, 100), {Seq: 4, Kind: protocol.WriteHWCheckpoint, Offset: 1}})
	}
	before := j.Stats()
	start()
	for i, l := range logs {
		waitFor(t, fmt.Sprintf("log %d persisted", i), 10*time.Second, func() bool { s, _ := l.last(); return s == 4 })
	}
	after := j.Stats()
	if rec, b, f := after.Records-before.Records, after.Batches-before.Batches, after.Fsyncs-before.Fsyncs; rec != 1 || b != n || f != 1 {
		t.Fatalf("%d logs' writes queued at once: %d records, %d batches, %d fsyncs; want 1, %d, 1", n, rec, b, f, n)
	}
	for i, l := range logs {
		l.mu.Lock()
		p := fmt.Sprint(l.persisted)
		l.mu.Unlock()
		if p != "[4]" {
			t.Fatalf("log %d persisted %s, want [4]: one report for its part of the round", i, p)
		}
		if leo := l.store.LEO(); leo != uint64(3+i) {
			t.Fatalf("log %d: LEO %d, want %d", i, leo, 3+i)
		}
		if h, _ := l.w.commits.snapshot(); h.Count != 1 {
			t.Fatalf("log %d: %d commits timed, want 1", i, h.Count)
		}
	}

	// Log 0's next batch does not start at its LEO: it fails, alone.
	for i, l := range logs {
		from := l.store.LEO()
		if i == 0 {
			from += 3
		}
		l.w.enqueue([]protocol.Write{appendAt(5, from, 1, 10)})
	}
	waitFor(t, "log 0 failed", 10*time.Second, func() bool { _, err := logs[0].last(); return err != nil })
	if _, err := logs[0].last(); !errors.Is(err, storage.ErrInvalidAppend) {
		t.Fatalf("log 0 failed with %v, want ErrInvalidAppend", err)
	}
	for i, l := range logs[1:] {
		waitFor(t, fmt.Sprintf("log %d persisted", i+1), 10*time.Second, func() bool { s, _ := l.last(); return s == 5 })
		if _, err := l.last(); err != nil {
			t.Fatalf("log %d failed with log 0: %v", i+1, err)
		}
	}
	logs[0].w.enqueue([]protocol.Write{appendAt(6, logs[0].store.LEO(), 1, 10)})
	logs[1].w.enqueue([]protocol.Write{appendAt(6, logs[1].store.LEO(), 1, 10)})
	waitFor(t, "log 1 persisted", 10*time.Second, func() bool { s, _ := logs[1].last(); return s == 6 })
	if s, _ := logs[0].last(); s != 4 || logs[0].store.LEO() != 3 {
		t.Fatalf("the failed log's writer went on: persisted %d, LEO %d", s, logs[0].store.LEO())
	}
}

// A batch the journal hands back (ApplyGroup's Deferred: too large for
// the journal, as here, or needing room in a full one) is applied by its
// store's own Apply on a goroutine of its own, which may wait (for its
// checkpoint and the segments' commit, or for a cut): the group commits
// the other logs meanwhile, here while that Apply is held inside the
// store, and the log's later batch waits behind it (Seq order).
func TestGroupWriterDirectApplyDoesNotStallOthers(t *testing.T) {
	j, g, logs, start := groupLogs(t, 2, 256<<10)
	gate := make(chan struct{})
	inside := make(chan struct{}, 1)
	big := logs[0]
	held := &heldStore{DirStore: big.store, gate: gate, inside: inside}
	big.w = g.writerFor(held, hclog.NewNullLogger(), big.w.persist, big.w.fail)
	start()
	big.w.enqueue([]protocol.Write{appendAt(1, 0, 14, 10<<10)}) // 140 KiB: over half the journal
	<-inside
	big.w.enqueue([]protocol.Write{appendAt(2, 14, 1, 10)})
	small := logs[1]
	for k := range 5 {
		small.w.enqueue([]protocol.Write{appendAt(uint64(k+1), uint64(k), 1, 100)})
		waitFor(t, "a batch committed beside the direct apply", 10*time.Second, func() bool { s, _ := small.last(); return s == uint64(k+1) })
	}
	if s, _ := big.last(); s != 0 {
		t.Fatalf("persisted %d while its Apply was held", s)
	}
	close(gate)
	waitFor(t, "the direct apply and the batch behind it persisted", 10*time.Second, func() bool { s, _ := big.last(); return s == 2 })
	if d := big.store.Stats().DirectApplies; d != 1 || big.store.LEO() != 15 {
		t.Fatalf("%d direct applies, LEO %d; want 1 and 15", d, big.store.LEO())
	}
	if st := j.Stats(); st.Batches < 6 {
		t.Fatalf("journal %+v: want the other log's 5 batches and the one behind the direct apply", st)
	}
}

// heldStore is a DirStore whose own Apply calls wait for gate (saying
// so on inside); the group commits through the DirStore.
type heldStore struct {
	*storage.DirStore
	gate   chan struct{}
	inside chan struct{}
}

func (s *heldStore) Apply(ws []protocol.Write) error {
	select {
	case s.inside <- struct{}{}:
	default:
	}
	<-s.gate
	return s.DirStore.Apply(ws)
}

func (s *heldStore) groupStore() (*storage.DirStore, func()) { return s.DirStore, nil }

// A log of a node's writer keeps the guarantees of a writer of its own: a
// change of how its store commits runs between two of its Applies, and
// stop waits for the batch in flight (here one held inside its store's
// Apply) and drops the writes queued behind it, never applied.
func TestGroupWriterChangeAndStop(t *testing.T) {
	_, g, logs, start := groupLogs(t, 2, 256<<10)
	start()
	l := logs[1]
	l.w.enqueue([]protocol.Write{appendAt(1, 0, 2, 10)})
	waitFor(t, "the first batch persisted", 10*time.Second, func() bool { s, _ := l.last(); return s == 1 })
	var changedAt []uint64
	l.w.switchBetweenApplies(func() error {
		changedAt = append(changedAt, l.store.LEO())
		return nil
	})
	l.w.enqueue([]protocol.Write{appendAt(2, 2, 1, 10)})
	waitFor(t, "the second batch persisted", 10*time.Second, func() bool { s, _ := l.last(); return s == 2 })
	if fmt.Sprint(changedAt) != "[2]" {
		t.Fatalf("the change ran at LEOs %v, want once, between the two batches (at 2)", changedAt)
	}

	gate, inside := make(chan struct{}), make(chan struct{}, 1)
	big := logs[0]
	big.w = g.writerFor(&heldStore{DirStore: big.store, gate: gate, inside: inside}, hclog.NewNullLogger(), big.w.persist, big.w.fail)
	big.w.enqueue([]protocol.Write{appendAt(1, 0, 14, 10<<10)}) // deferred: over half the journal
	<-inside
	big.w.enqueue([]protocol.Write{appendAt(2, 14, 1, 10)})
	stopped := make(chan struct{})
	go func() {
		big.w.stop()
		close(stopped)
	}()
	l.w.enqueue([]protocol.Write{appendAt(3, 3, 1, 10)}) // the group goes on meanwhile
	waitFor(t, "the other log's batch persisted", 10*time.Second, func() bool { s, _ := l.last(); return s == 3 })
	select {
	case <-stopped:
		t.Fatal("stop returned with a batch in flight")
	default:
	}
	close(gate)
	<-stopped
	if s, _ := big.last(); s != 1 || big.store.LEO() != 14 {
		t.Fatalf("after stop: persisted %d, LEO %d; want the batch in flight (1, LEO 14) and not the one queued behind it", s, big.store.LEO())
	}
	big.w.enqueue([]protocol.Write{appendAt(3, 14, 1, 10)})
	l.w.enqueue([]protocol.Write{appendAt(4, 4, 1, 10)})
	waitFor(t, "the other log's batch persisted", 10*time.Second, func() bool { s, _ := l.last(); return s == 4 })
	if big.store.LEO() != 14 {
		t.Fatalf("a stopped writer's writes were applied: LEO %d", big.store.LEO())
	}
}
