package simulation

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand"
	"slices"
	"time"

	"github.com/replog-io/replog/internal/kvstate"
	"github.com/replog-io/replog/internal/shell"
	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/replica"
	"github.com/replog-io/replog/storage"
)

// Snapshots of the service's state (docs/protocol.md R87, R88) and their
// transfer (3.14, R92–R95) in the simulation.
//
// The state: every node runs a service whose state is the count and a
// running hash of the committed data records without an entry key below
// an offset (stateVal: compaction never removes those), and the KV's state
// (kvsim.go).
// It restores the newest snapshot that describes its log when it starts
// (or starts from nothing at log start 0), and applies the entries its
// reader view (shell.ReadBatch) gives below its readable HW after every
// round. A log start that passes the state (a reset, or following the
// leader's deletion) stops it until a snapshot it can restore is there,
// as the root's KV does.
//
// Workload: now and then a random live node saves its state as a
// snapshot at the offset it reached (shell.SnapshotEpoch tags it). In
// some runs retention is bounded by each node's newest snapshot
// (shell.RetainBound, RetainUntilSnapshot).
//
// Shipping: every core runs with Config.ShipSnapshots. A leader's
// snapshot reads are answered by shell.ServeSnapshot and a follower's
// chunks written by shell.ReceiveSnapshotChunk into an in-memory store
// (snapStore, the shell's SnapshotSource and SnapshotSink), each after a
// disk delay, in order (the nemesis crashes a receiver now and then in
// the middle of a transfer); shell.SnapshotsHeld feeds a restarted core what
// its store holds. A crash keeps a random prefix of the partial snapshot
// (its chunks are not synced, as storage.SnapshotStore's are not), and
// sometimes damages a byte of it, which the install must refuse; a
// chunk's write fails now and then while faults run (a disk error: the
// transfer starts over); saved and installed snapshots are durable.
//
// Checks:
//   - A node's state at offset o is the state of the committed log below
//     o (the reference, replayed from the committed log): whether it
//     replayed everything or restored a snapshot and read on.
//   - A snapshot saved at (offset, tag) has the body every other saved at
//     it has, and its tag is the committed entry's epoch at offset-1.
//   - No node installs a body that no node saved at its offset and tag
//     (nothing unverified is installed, R94), nor one below the log start
//     its reset then goes to (R93), and no reset is issued while the last
//     chunk of a snapshot at or above it is still being written (R94).
//   - Under RetainUntilSnapshot a leader's deletion never passes the
//     newest snapshot any node has saved or installed (R87).

// snapKeep is how many snapshots a node's store keeps (as
// storage.SnapshotOptions.Keep's default).
const snapKeep = 2

// stateVal is the simulated service's state as of offset at.
type stateVal struct {
	at, count, hash uint64
}

// applyState applies one entry to v: a data entry without an entry key
// counts (one with a key is the KV's, or one a compaction pass may remove).
func applyState(v stateVal, k entryKey) stateVal {
	v.at++
	if k.typ == protocol.EntryData && k.key == "" {
		v.count++
		h := v.hash ^ 0x9e3779b97f4a7c15
		for i := 0; i < len(k.data); i++ {
			h = (h ^ uint64(k.data[i])) * 0x100000001b3
		}
		v.hash = h*31 + uint64(len(k.data))
	}
	return v
}

// snapBody encodes a state as a snapshot body: at, count and hash, then a
// padding of a length and content the state fixes (so that equal states
// make equal bodies), 24 to 71 bytes in all, so that transfers take
// several chunks (one byte each at the smallest FetchMaxBytes).
func snapBody(v stateVal) []byte {
	b := binary.BigEndian.AppendUint64(nil, v.at)
	b = binary.BigEndian.AppendUint64(b, v.count)
	b = binary.BigEndian.AppendUint64(b, v.hash)
	for i, n := 0, int(v.hash%48); i < n; i++ {
		b = append(b, byte(v.hash>>(8*(i%8)))^byte(i))
	}
	return b
}

// serviceBody is the snapshot body of a service's state: snapBody's, then
// the KV state's (kvBody: empty when the KV holds nothing).
func serviceBody(v stateVal, kv kvstate.State) []byte {
	return append(snapBody(v), kvBody(kv)...)
}

// decodeSnapBody is serviceBody's inverse; ok is false for a body it did
// not make.
func decodeSnapBody(b []byte) (stateVal, kvstate.State, bool) {
	if len(b) < 24 {
		return stateVal{}, nil, false
	}
	v := stateVal{at: binary.BigEndian.Uint64(b), count: binary.BigEndian.Uint64(b[8:]), hash: binary.BigEndian.Uint64(b[16:])}
	head := snapBody(v)
	if !bytes.HasPrefix(b, head) {
		return stateVal{}, nil, false
	}
	kv, ok := decodeKVBody(b[len(head):])
	return v, kv, ok
}

// snapStore is a node's snapshot store in memory: the shell's
// SnapshotSource and SnapshotSink, as storage.SnapshotStore is in the
// root.
type snapStore struct {
	files []snapFile // highest offset first
	part  *snapPartial
	// saves counts the snapshots stored, for their Time.
	saves int
	// failNext: the next Receive fails (a disk error).
	failNext bool
}

type snapFile struct {
	info storage.SnapshotInfo
	body []byte
}

type snapPartial struct {
	p    storage.PartialSnapshot
	body []byte
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errSnapDisk is a simulated write error of a chunk.
var errSnapDisk = errors.New("simulated disk error writing a snapshot chunk")

func (m *snapStore) Latest() (storage.SnapshotInfo, bool) {
	if len(m.files) == 0 {
		return storage.SnapshotInfo{}, false
	}
	return m.files[0].info, true
}

func (m *snapStore) List() []storage.SnapshotInfo {
	var out []storage.SnapshotInfo
	for _, f := range m.files {
		out = append(out, f.info)
	}
	return out
}

func (m *snapStore) file(info storage.SnapshotInfo) (snapFile, bool) {
	for _, f := range m.files {
		if f.info.Offset == info.Offset && f.info.Epoch == info.Epoch && f.info.CRC == info.CRC && f.info.Size == info.Size {
			return f, true
		}
	}
	return snapFile{}, false
}

func (m *snapStore) ReadChunk(info storage.SnapshotInfo, pos int64, max int) ([]byte, error) {
	f, ok := m.file(info)
	if !ok {
		return nil, storage.ErrNoSnapshot
	}
	if pos < 0 || pos > info.Size {
		return nil, storage.ErrOutOfRange
	}
	return slices.Clone(f.body[pos:min(info.Size, pos+int64(max))]), nil
}

func (m *snapStore) Partial() (storage.PartialSnapshot, bool) {
	if m.part == nil {
		return storage.PartialSnapshot{}, false
	}
	p := m.part.p
	p.Have = int64(len(m.part.body))
	return p, true
}

func (m *snapStore) Receive(p storage.PartialSnapshot, pos int64, data []byte) (int64, error) {
	if m.failNext {
		m.failNext = false
		return 0, errSnapDisk
	}
	if pos < 0 || p.Size < 0 || pos+int64(len(data)) > p.Size {
		return 0, storage.ErrPartialMismatch
	}
	if pos == 0 {
		p.Have = 0
		m.part = &snapPartial{p: p}
	} else if h, ok := m.Partial(); !ok || h.Offset != p.Offset || h.Epoch != p.Epoch || h.Size != p.Size || h.CRC != p.CRC || h.Have != pos {
		return 0, storage.ErrPartialMismatch
	}
	m.part.body = append(m.part.body, data...)
	return int64(len(m.part.body)), nil
}

func (m *snapStore) Install() (storage.SnapshotInfo, error) {
	p, ok := m.Partial()
	if !ok || p.Have != p.Size {
		return storage.SnapshotInfo{}, storage.ErrNoSnapshot
	}
	body := m.part.body
	if crc32.Checksum(body, castagnoli) != p.CRC {
		m.part = nil
		return storage.SnapshotInfo{}, fmt.Errorf("%w: received snapshot at %d: body checksum is not the sender's", storage.ErrCorrupt, p.Offset)
	}
	m.part = nil
	return m.add(p.Offset, p.Epoch, body), nil
}

func (m *snapStore) DropPartial() { m.part = nil }

// save stores a snapshot the node's service took.
func (m *snapStore) save(offset, epoch uint64, body []byte) storage.SnapshotInfo {
	return m.add(offset, epoch, body)
}

// add stores a whole snapshot and keeps the snapKeep of highest offset.
func (m *snapStore) add(offset, epoch uint64, body []byte) storage.SnapshotInfo {
	m.saves++
	info := storage.SnapshotInfo{Offset: offset, Epoch: epoch, Size: int64(len(body)), CRC: crc32.Checksum(body, castagnoli),
		Time: simBase.Add(time.Duration(m.saves) * time.Millisecond), Path: fmt.Sprintf("snapshot-%d", offset)}
	m.files = slices.DeleteFunc(m.files, func(f snapFile) bool { return f.info.Offset == offset })
	m.files = append(m.files, snapFile{info: info, body: slices.Clone(body)})
	slices.SortFunc(m.files, func(a, b snapFile) int { return cmp.Compare(b.info.Offset, a.info.Offset) })
	if len(m.files) > snapKeep {
		m.files = m.files[:snapKeep]
	}
	return info
}

// crash models a process crash on the partial snapshot: its chunks were
// never synced, so a random prefix survives, and sometimes a byte of it
// is damaged (a torn write's garbage).
func (m *snapStore) crash(r *rand.Rand) (lost int, damaged bool) {
	if m.part == nil {
		return 0, false
	}
	n := len(m.part.body)
	keep := r.Intn(n + 1)
	m.part.body = m.part.body[:keep]
	if keep > 0 && r.Intn(4) == 0 {
		m.part.body[r.Intn(keep)] ^= byte(1 + r.Intn(255))
		damaged = true
	}
	return n - keep, damaged
}

// snapNode is a node's side of snapshots: its store (durable, replaced
// only by a wipe), its service's state, and the snapshot I/O waiting for
// its disk, in order.
type snapNode struct {
	store *snapStore
	// app is the service's state; ok false: it has none (the log start
	// passed it and no snapshot can restore it).
	app   stateVal
	appOK bool
	// kv is the service's KV state (kvsim.go); kvSkip holds the KV keys
	// whose holes its reader passed over since a Put or Delete of theirs
	// last made their state whole.
	kv     kvstate.State
	kvSkip map[string]bool
	// serves and chunks wait for evSnapshot events of this incarnation.
	serves []replica.SnapshotRead
	chunks []replica.SnapshotChunk
	// installed is the snapshot a transfer installed since the node's
	// last reset (nil: none).
	installed *storage.SnapshotInfo
}

// snapParams are the snapshot workload's knobs for one run.
type snapParams struct {
	on bool
	// saveEvery: the mean gap between two saves.
	saveEvery time.Duration
	// until: retention requests are bounded by the asking node's newest
	// snapshot (RetainUntilSnapshot, R87).
	until bool
}

// snapSim is the run's snapshot state: the reference states, the bodies
// saved, the highest snapshot offset any node held.
type snapSim struct {
	p   snapParams
	rng *rand.Rand
	// ref[o] is the state of the committed log below o.
	ref []stateVal
	// saved: every body saved, by offset and tag.
	saved map[[2]uint64][]byte
	// maxHeld: the highest offset of a snapshot any node saved or
	// installed.
	maxHeld uint64
	// kv is the KV's reference (kvsim.go).
	kv kvRef
}

// The kinds of evSnapshot (event.id).
const (
	snapSaveTimer = iota // the workload: a save on a random live node
	snapServe            // a leader's read of a chunk is done
	snapWrite            // a follower's write of a chunk is done
)

// chooseSnapshots draws the snapshot workload's knobs from its own
// stream: saves in three runs of four that are not classic; the bound in
// two of three of those with retention.
func chooseSnapshots(s *sim) {
	r := s.snap.rng
	if s.opts.Classic || r.Intn(4) == 0 {
		return
	}
	s.snap.p.on = true
	s.snap.p.saveEvery = ms(3 + 60*r.Float64())
	s.snap.p.until = s.p.ret.on && r.Intn(3) != 0
}

// setupSnapshots starts the save timer.
func (s *sim) setupSnapshots() {
	s.snap.saved = map[[2]uint64][]byte{}
	s.snap.ref = []stateVal{{}}
	s.snap.kv = newKVRef()
	if s.snap.p.on {
		s.schedule(s.snapBetween(0, 2*s.snap.p.saveEvery), event{kind: evSnapshot, id: snapSaveTimer})
	}
}

func (s *sim) snapBetween(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(s.snap.rng.Int63n(int64(hi-lo)+1))
}

// stateRefAt is the reference state at offset o (o at most the committed
// log's length).
func (s *sim) stateRefAt(o uint64) stateVal {
	for uint64(len(s.snap.ref)) <= o {
		n := len(s.snap.ref)
		s.snap.ref = append(s.snap.ref, applyState(s.snap.ref[n-1], s.committed[n-1]))
	}
	return s.snap.ref[o]
}

// snapEvent handles evSnapshot.
func (s *sim) snapEvent(ev event) {
	if ev.id == snapSaveTimer {
		if s.phase >= phaseQuiesce {
			return
		}
		var up []*node
		for _, nd := range s.nodes {
			if nd.up && s.now >= nd.pausedUntil {
				up = append(up, nd)
			}
		}
		// The leader half the time: its snapshots are the ones shipped.
		if l := s.upLeader(); l != nil && s.now >= l.pausedUntil && s.snap.rng.Intn(2) == 0 {
			s.saveSnapshot(l)
		} else if len(up) > 0 {
			s.saveSnapshot(up[s.snap.rng.Intn(len(up))])
		}
		s.schedule(s.snapBetween(0, 2*s.snap.p.saveEvery), event{kind: evSnapshot, id: snapSaveTimer})
		return
	}
	nd := s.nodes[ev.node]
	if !nd.up || nd.inc != ev.inc {
		return
	}
	sn := &nd.snap
	switch ev.id {
	case snapServe:
		sr := sn.serves[0]
		sn.serves = sn.serves[1:]
		m := shell.ServeSnapshot(sr, snapSource{nd})
		s.hash.byte(0xD1)
		s.hash.msg(m)
		s.send(nd, m)
	case snapWrite:
		ch := sn.chunks[0]
		sn.chunks = sn.chunks[1:]
		if s.phase == phaseFaults && s.snap.rng.Intn(30) == 0 {
			sn.store.failNext = true
		}
		p, info, ok, err := shell.ReceiveSnapshotChunk(sn.store, ch)
		s.hash.byte(0xD2)
		s.hash.u64(p.Have)
		s.hash.bool(ok)
		s.hash.bool(p.Failed)
		if s.tracing() {
			s.tracef("%s snapshot chunk (%d,%d) at %d+%d of %d: have %d installed=%v err=%v", nd.id, ch.Offset, ch.Epoch, ch.Position, len(ch.Data), ch.Size, p.Have, ok, err)
		}
		if err != nil {
			s.res.Faults.SnapshotChunksFailed++
		}
		if ok {
			s.installed(nd, info)
		}
		s.input(nd, shell.SnapshotProgress(p))
		if !ok && s.faulting() && s.snap.rng.Intn(20) == 0 {
			// The nemesis: a crash in the middle of a transfer (the
			// partial kept, or part of it).
			s.res.Faults.SnapshotTransferCrashes++
			s.crash(nd, "in a snapshot transfer")
		}
	}
}

// installed checks a snapshot nd's store installed from a transfer: its
// body is one some node saved at its offset and tag (R94: nothing
// unverified counts).
func (s *sim) installed(nd *node, info storage.SnapshotInfo) {
	f, _ := nd.snap.store.file(info)
	want, ok := s.snap.saved[[2]uint64{info.Offset, info.Epoch}]
	if !ok || !bytes.Equal(f.body, want) {
		s.fail("%s: installed a snapshot at %d (tag %d) whose body no node saved there (R94: only a verified snapshot is installed)", nd.id, info.Offset, info.Epoch)
		return
	}
	s.res.Faults.SnapshotsInstalled++
	s.snap.maxHeld = max(s.snap.maxHeld, info.Offset)
	nd.snap.installed = &info
	s.tracef("%s INSTALLED snapshot (%d,%d) %d bytes", nd.id, info.Offset, info.Epoch, info.Size)
}

// saveSnapshot saves nd's state as a snapshot, where SaveSnapshot would
// take it: at an offset between the log start and the readable HW, not
// below the newest snapshot's.
func (s *sim) saveSnapshot(nd *node) {
	sn := &nd.snap
	if !sn.appOK || sn.app.at == 0 || sn.app.at < nd.store.LogStart() || sn.app.at > nd.r.ReadableHW() || len(sn.kvSkip) > 0 {
		return // (with keys left unknown by holes, the KV state is not the one to save)
	}
	if l, ok := sn.store.Latest(); ok && sn.app.at < l.Offset {
		return
	}
	off := sn.app.at
	tag := shell.SnapshotEpoch(nd.store.EpochMap(), off)
	if want := s.committed[off-1].epoch; tag != want {
		s.fail("%s: a snapshot at %d is tagged %d; the committed entry at %d is of epoch %d (R88)", nd.id, off, tag, off-1, want)
		return
	}
	body := serviceBody(sn.app, sn.kv)
	key := [2]uint64{off, tag}
	if b, ok := s.snap.saved[key]; ok && !bytes.Equal(b, body) {
		s.fail("%s: its state's snapshot at %d (tag %d) differs from one saved there before", nd.id, off, tag)
		return
	}
	s.snap.saved[key] = body
	sn.store.save(off, tag, body)
	s.snap.maxHeld = max(s.snap.maxHeld, off)
	s.res.Faults.SnapshotsSaved++
	s.hash.byte(0xD3)
	s.hash.u64(uint64(nd.idx))
	s.hash.u64(off)
	s.tracef("%s SAVE snapshot at %d (tag %d, %d bytes)", nd.id, off, tag, len(body))
}

// snapSource is what a leader ships from: its store's snapshots that
// describe its log (R88), as the root's shipSource.
type snapSource struct{ nd *node }

func (src snapSource) List() []storage.SnapshotInfo {
	var out []storage.SnapshotInfo
	for _, i := range src.nd.snap.store.List() {
		if describes(src.nd.store, i) {
			out = append(out, i)
		}
	}
	return out
}

func (src snapSource) ReadChunk(info storage.SnapshotInfo, pos int64, max int) ([]byte, error) {
	return src.nd.snap.store.ReadChunk(info, pos, max)
}

// describes is shell.SnapshotDescribes on st: whether snapshot i can be
// restored on st's log (R88).
func describes(st storage.Store, i storage.SnapshotInfo) bool {
	ok, _ := shell.SnapshotDescribes(st.EpochMap(), st.LogStart(), st.LEO(), i)
	return ok
}

// snapStart is a (re)started node's snapshot side: nothing waits for its
// disk any more, the core is told what the store holds before its first
// round, and the service restores its state.
func (s *sim) snapStart(nd *node) {
	sn := &nd.snap
	if sn.store == nil {
		sn.store = &snapStore{}
	}
	sn.serves, sn.chunks, sn.installed = nil, nil, nil
	sn.appOK = false
	for _, p := range shell.SnapshotsHeld(sn.store) {
		nd.inbox = append(nd.inbox, shell.SnapshotProgress(p))
	}
	s.restoreState(nd)
}

// snapCrash is a crash's effect on nd's snapshot store.
func (s *sim) snapCrash(nd *node) {
	if nd.snap.store == nil {
		return
	}
	lost, damaged := nd.snap.store.crash(s.snap.rng)
	if lost > 0 || damaged {
		s.res.Faults.SnapshotPartialsTorn++
		s.tracef("%s: the crash lost %d bytes of the partial snapshot (damaged=%v)", nd.id, lost, damaged)
	}
}

// snapWipe gives a wiped node an empty snapshot store.
func (s *sim) snapWipe(nd *node) { nd.snap.store = &snapStore{} }

// restoreState restores nd's service from its newest snapshot that
// describes its log (as Log.OpenSnapshot picks it), or from nothing at
// log start 0, and checks what it restored against the reference.
func (s *sim) restoreState(nd *node) {
	sn := &nd.snap
	ls := nd.store.LogStart()
	for _, f := range sn.store.files {
		i := f.info
		if i.Offset < ls {
			break // the log after it is gone here
		}
		if !describes(nd.store, i) || i.Offset > nd.r.ReadableHW() {
			continue
		}
		v, kv, ok := decodeSnapBody(f.body)
		if !ok || v.at != i.Offset {
			s.fail("%s: its snapshot at %d holds no state of that offset", nd.id, i.Offset)
			return
		}
		if i.Offset <= uint64(len(s.committed)) {
			if ref := s.stateRefAt(i.Offset); v != ref {
				s.fail("%s: the snapshot it restores at %d holds state %+v; the committed log below it makes %+v", nd.id, i.Offset, v, ref)
				return
			}
			if kvDigest(kv) != s.kvRefAt(i.Offset) {
				s.fail("%s: the snapshot it restores at %d holds a KV state the committed log below it does not make", nd.id, i.Offset)
				return
			}
		}
		sn.app, sn.appOK = v, true
		sn.kv, sn.kvSkip = kv, nil
		s.res.Faults.SnapshotRestores++
		s.tracef("%s RESTORE snapshot at %d", nd.id, i.Offset)
		return
	}
	if ls == 0 {
		sn.app, sn.appOK = stateVal{}, true
		sn.kv, sn.kvSkip = kvstate.State{}, nil
	}
}

// snapOutput carries out a round's snapshot work: each read and each
// chunk after a disk delay, in order.
func (s *sim) snapOutput(nd *node, out shell.Output) {
	sn := &nd.snap
	for _, sr := range out.SnapshotReads {
		sn.serves = append(sn.serves, sr)
		s.schedule(s.between(0, s.p.diskMax), event{kind: evSnapshot, id: snapServe, node: nd.idx, inc: nd.inc})
	}
	for _, ch := range out.SnapshotChunks {
		sn.chunks = append(sn.chunks, ch)
		s.schedule(s.between(0, s.p.diskMax), event{kind: evSnapshot, id: snapWrite, node: nd.idx, inc: nd.inc})
	}
}

// snapAdvance runs nd's service after a round: restored if it has no
// state or the log start passed it, then reading on to the readable HW;
// its state is checked against the reference.
func (s *sim) snapAdvance(nd *node) {
	if s.err != nil || !nd.up {
		return
	}
	sn := &nd.snap
	if sn.appOK && sn.app.at < nd.store.LogStart() {
		sn.appOK = false
		s.res.Faults.SnapshotStatesLost++
	}
	if !sn.appOK {
		s.restoreState(nd)
		if !sn.appOK {
			return
		}
	}
	limit := nd.r.ReadableHW()
	for sn.app.at < limit {
		b, err := shell.ReadBatch(nd.store, sn.app.at, limit, 64, 1<<20)
		if err != nil || b.Next <= sn.app.at || b.Next > limit {
			s.fail("%s: its service reads at %d below its readable HW %d: next %d, error %v", nd.id, sn.app.at, limit, b.Next, err)
			return
		}
		for i, e := range b.Entries {
			if e.Offset < sn.app.at || e.Offset >= b.Next {
				s.fail("%s: its service reads offset %d outside [%d, %d)", nd.id, e.Offset, sn.app.at, b.Next)
				return
			}
			// Control entries, which readers do not see, change nothing;
			// holes leave KV keys unknown.
			s.kvPassed(nd, sn.app.at, e.Offset)
			sn.app.at = e.Offset
			sn.app = applyState(sn.app, readKey(&b, i))
			s.kvApply(nd, e, b.Key(i))
		}
		s.kvPassed(nd, sn.app.at, b.Next)
		sn.app.at = b.Next
	}
	if sn.app.at <= uint64(len(s.committed)) {
		if ref := s.stateRefAt(sn.app.at); sn.app != ref {
			s.fail("%s: its service's state at %d is %+v; the committed log below it makes %+v", nd.id, sn.app.at, sn.app, ref)
			return
		}
		s.kvCheck(nd)
	}
}

// snapReset checks a reset of nd's log to off (R53) against its
// transfer: never while the last chunk of a snapshot at or above off is
// still being written (R94: the reset only after the install), and never
// after installing a snapshot below off (R93).
func (s *sim) snapReset(nd *node, off uint64) bool {
	sn := &nd.snap
	for _, ch := range sn.chunks {
		if ch.Last && ch.Offset >= off {
			s.fail("%s: resets its log to %d before the snapshot at %d it is receiving is installed (R94)", nd.id, off, ch.Offset)
			return false
		}
	}
	if i := sn.installed; i != nil && i.Offset < off {
		s.fail("%s: resets its log to %d after installing a snapshot at %d below it (R93)", nd.id, off, i.Offset)
		return false
	}
	sn.installed = nil
	return true
}

// snapLeaderDelete checks a leader's deletion to off under
// RetainUntilSnapshot (R87): some node holds a snapshot at or above off.
func (s *sim) snapLeaderDelete(nd *node, off uint64) bool {
	if !s.snap.p.until || off <= s.snap.maxHeld {
		return true
	}
	s.fail("%s: deletes the entries below %d under RetainUntilSnapshot, but no node ever held a snapshot above %d (R87)", nd.id, off, s.snap.maxHeld)
	return false
}

// retainBound is R87's bound on a retention request nd makes.
func (s *sim) retainBound(nd *node, off uint64) uint64 {
	var newest storage.SnapshotInfo
	ok := false
	for _, i := range nd.snap.store.List() {
		if describes(nd.store, i) {
			newest, ok = i, true
			break
		}
	}
	return shell.RetainBound(s.snap.p.until, newest, ok, off)
}
