package simulation

import (
	"errors"
	"math/rand"
	"time"

	"github.com/replog-io/replog/internal/shell"
	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/replica"
)

// The version mix (docs/protocol.md R68): nodes of two releases in one
// cluster, one that supports feature level 9 (named logs, R79: the
// previous release) and one that supports 10 (quiescent fetches and
// heartbeats, R98-R100; entry keys, R102), each a config of the same core (replica.Config's
// SupportedFeatureLevel).
// Upgrades and rollbacks are restarts, interleaved with every other fault;
// some runs start with every node holding the level at 9 (MaxFeatureLevel)
// and release the hold node by node. A rollback is the operator's: it goes
// ahead only while no level entry above 9 has been written anywhere (what
// Status.FeatureLevel and the log show); else the node comes back on the
// new release. A node that finds a committed level it cannot run at halts
// (ErrFeatureLevel) and is rolled forward, as an operator would. The
// network speaks each pair's wire version (atWire), the lower of the two
// releases' highest: a fetch or its answer carries the quiescent flag
// only at 10 or above, and a heartbeat crosses only at 10 (the checker
// fails a run whose node sends either to a node of 9: quiescence.go). The
// mix exercises the level's negotiation: a leader raises to 10 only once
// every voter fetched saying it supports 10, and no node quiesces before.
//
// Invariants: the levels in the committed log never go down; a node's
// finalized level never goes down while it runs and never exceeds what it
// supports; a node whose HW passed a committed level entry above its
// support has halted; a leader writes a level only up to what it supports
// and its hold, only once every other voter of its set told it within
// FetchTimeout that it supports the level, and never while a voter of its
// set has run a release that does not support it for long enough that no
// fetch of an earlier incarnation can still speak for it.

// versionParams are a run's version-mix knobs (chooseVersions).
type versionParams struct {
	on bool
	// every is the mean time between upgrade or rollback decisions;
	// rollbackProb the chance that one rolls a new-release node back.
	every        time.Duration
	rollbackProb float64
	// init is each node's starting level (levelOld or levelNew), hold
	// whether the nodes start holding the level at levelOld.
	init []int
	hold bool
}

// The two releases.
const (
	levelOld = protocol.FeatureLevelNamedLogs
	levelNew = protocol.FeatureLevelQuiescence
)

// atWire is m as it reaches node to from node from: encoded at the wire
// version both ends speak (a release's highest wire version is its
// level), or false if that version cannot carry it. Below
// protocol.DurableOffsetVersion a fetch has no durable offset; below
// protocol.LogNameVersion a message of a named log cannot be encoded, and
// the transport drops it; below protocol.QuiescenceVersion neither can a
// heartbeat.
func (s *sim) atWire(m protocol.Message, from, to int) (protocol.Message, bool) {
	if !s.p.ver.on {
		return m, true
	}
	wire := min(s.ver.nodes[from].supported, s.ver.nodes[to].supported)
	if m.Log != "" && wire < protocol.LogNameVersion {
		return m, false
	}
	if k := m.Body.Kind(); (k == protocol.KindSnapshotRequest || k == protocol.KindSnapshotResponse) && wire < protocol.SnapshotTransferVersion {
		return m, false // no wire version it speaks carries the kind
	}
	if f, ok := m.Body.(*protocol.FetchRequest); ok && f.HasDurableOffset && wire < protocol.DurableOffsetVersion {
		c := *f
		c.HasDurableOffset, c.DurableOffset = false, 0
		m.Body = &c
	}
	if _, ok := m.Body.(*protocol.Heartbeat); ok && wire < protocol.QuiescenceVersion {
		return m, false // it cannot be encoded: the transport never sends it
	}
	return m, true
}

// chooseVersions draws the version mix from its own stream, so that runs
// without it draw what they did before it existed.
func chooseVersions(p *params, r *rand.Rand) {
	if r.Intn(3) != 0 {
		return
	}
	p.ver.on = true
	p.ver.every = ms(50 + 400*r.Float64())
	p.ver.rollbackProb = 0.4 * r.Float64()
	p.ver.hold = r.Intn(4) == 0
	p.ver.init = make([]int, p.voters+p.observers)
	allNew := r.Intn(4) == 0
	for i := range p.ver.init {
		p.ver.init[i] = levelOld
		if allNew || r.Intn(2) == 0 {
			p.ver.init[i] = levelNew
		}
	}
}

// nodeVersion is one node's release and what the checks remember of it.
type nodeVersion struct {
	supported, hold int
	// want (a release to run, 0: no change) and release (the hold is
	// lifted) apply at the next start.
	want     int
	release  bool
	upSince  time.Duration
	level    int // Status.FeatureLevel last seen in this incarnation
	upgrades int
}

// versionState is the run's version-mix state.
type versionState struct {
	nodes []nodeVersion
	// written is the highest level any node has written an entry of.
	written int
	// seen marks the level entries already checked (epoch, offset).
	seen map[[2]uint64]bool
	// committed is the highest level in the committed log, committedAt
	// the offsets of its level entries.
	committed   int
	committedAt []levelAt
	// heard[l-levelOld][to][from] is when a fetch of from saying level l
	// or above last reached to, and to's incarnation then.
	heard [levelNew - levelOld + 1][][]heard
}

type heard struct {
	at  time.Time // the receiver's clock
	inc int
}

type levelAt struct {
	off   uint64
	level int
}

func (s *sim) setupVersions() {
	if !s.p.ver.on {
		return
	}
	s.ver.nodes = make([]nodeVersion, len(s.nodes))
	s.ver.seen = map[[2]uint64]bool{}
	s.ver.written, s.ver.committed = protocol.BaseFeatureLevel, protocol.BaseFeatureLevel
	for l := range s.ver.heard {
		s.ver.heard[l] = make([][]heard, len(s.nodes))
		for i := range s.ver.heard[l] {
			s.ver.heard[l][i] = make([]heard, len(s.nodes))
		}
	}
	for i := range s.ver.nodes {
		s.ver.nodes[i].supported = s.p.ver.init[i]
		if s.p.ver.hold {
			s.ver.nodes[i].hold = levelOld
		}
	}
	s.schedule(s.verBetween(0, 2*s.p.ver.every), event{kind: evVersion})
}

// verBetween is between, drawn from the version mix's stream.
func (s *sim) verBetween(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(s.wr.Int63n(int64(hi-lo)+1))
}

// versionConfig sets cfg's levels for nd's start, carrying out a pending
// upgrade, rollback or release of the hold.
func (s *sim) versionConfig(nd *node, cfg *replica.Config) {
	if !s.p.ver.on {
		return
	}
	v := &s.ver.nodes[nd.idx]
	if v.release {
		v.hold, v.release = 0, false
	}
	switch {
	case v.want == levelOld && s.ver.written > levelOld:
		// Too late: the level was raised; the operator keeps the new
		// release.
		s.res.RollbacksRefused++
		s.tracef("%s rollback refused: level %d written", nd.id, s.ver.written)
	case v.want != 0:
		v.supported = v.want
	}
	v.want = 0
	v.upSince, v.level = s.now, 0
	cfg.SupportedFeatureLevel, cfg.MaxFeatureLevel = v.supported, v.hold
	s.hash.u64(uint64(v.supported<<8 | v.hold))
	s.tracef("%s release supports=%d hold=%d", nd.id, v.supported, v.hold)
}

// versionEvent is an upgrade, a rollback or a release of the hold of a
// random node: a restart onto the other release (a down node changes at
// its next start).
func (s *sim) versionEvent(ev event) {
	if ev.id == verRollForward {
		nd := s.nodes[ev.node]
		if nd.up && nd.inc == ev.inc {
			s.ver.nodes[nd.idx].want = levelNew
			s.crash(nd, "rolled forward after a level halt")
		}
		return
	}
	if s.phase != phaseFaults {
		return
	}
	s.schedule(s.verBetween(s.p.ver.every/2, 3*s.p.ver.every/2), event{kind: evVersion})
	nd := s.nodes[s.wr.Intn(len(s.nodes))]
	v := &s.ver.nodes[nd.idx]
	switch {
	case v.hold != 0 && s.wr.Intn(3) == 0:
		v.release = true
	case v.supported == levelOld:
		v.want = levelNew
		v.upgrades++
		s.res.Upgrades++
	case s.wr.Float64() < s.p.ver.rollbackProb:
		v.want = levelOld
		s.res.Rollbacks++
	default:
		return
	}
	if nd.up {
		s.crash(nd, "a new release")
	}
}

// The kinds of evVersion (event.id).
const (
	verTimer       = iota // an upgrade, rollback or release of a random node
	verRollForward        // event.node halted at a level it cannot run: upgrade it
)

// levelHalt reports whether err, a halt of nd's core, is the one R68
// prescribes: a committed level above what nd supports. Then nd is rolled
// forward at once.
func (s *sim) levelHalt(nd *node, err error) bool {
	if !s.p.ver.on || !errors.Is(err, replica.ErrFeatureLevel) {
		return false
	}
	v := &s.ver.nodes[nd.idx]
	if l := levelBelow(nd.shadow, nd.r.Status().HighWatermark); l <= v.supported {
		s.fail("%s halted at a level it supports (%d; its log's committed level is %d): %v", nd.id, v.supported, l, err)
		return true
	}
	if v.want == 0 {
		s.res.LevelHalts++
		s.tracef("%s LEVEL HALT: %v", nd.id, err)
		s.schedule(0, event{kind: evVersion, id: verRollForward, node: nd.idx, inc: nd.inc})
		v.want = levelNew
	}
	return true
}

// noteFetchLevels records the fetches saying levelOld or above among a
// round's inputs, at the round's clock (the time the core sees them at).
func (s *sim) noteFetchLevels(nd *node, evs []shell.Event) {
	if !s.p.ver.on {
		return
	}
	for _, ev := range evs {
		if f, ok := ev.Message.Body.(*protocol.FetchRequest); ok && ev.Kind == shell.EventMessage && int(f.FeatureLevel) >= levelOld {
			if from, ok := s.byID[ev.Message.From]; ok {
				for l := levelOld; l <= min(int(f.FeatureLevel), levelNew); l++ {
					s.ver.heard[l-levelOld][nd.idx][from] = heard{at: nd.clock(s.now), inc: nd.inc}
				}
			}
		}
	}
}

// levelBelow is the level of the newest level entry of log below end
// (the base level if none).
func levelBelow(log []entryKey, end uint64) int {
	for i := min(uint64(len(log)), end); i > 0; i-- {
		if k := log[i-1]; k.typ == protocol.EntryFeature {
			if l, err := protocol.DecodeFeatureLevel([]byte(k.data)); err == nil {
				return int(l)
			}
		}
	}
	return protocol.BaseFeatureLevel
}

// checkLevelWrites checks the level entries among nd's writes the first
// time any node writes them (the leader that appends one writes it first).
func (s *sim) checkLevelWrites(nd *node, ws []protocol.Write) {
	if !s.p.ver.on {
		return
	}
	for _, w := range ws {
		if w.Kind != protocol.WriteAppend {
			continue
		}
		for _, e := range w.Entries {
			if e.Type != protocol.EntryFeature || s.ver.seen[[2]uint64{e.Epoch, e.Offset}] {
				continue
			}
			s.ver.seen[[2]uint64{e.Epoch, e.Offset}] = true
			l, err := protocol.DecodeFeatureLevel(e.Data)
			if err != nil {
				s.fail("%s wrote a malformed level entry at %d: %v", nd.id, e.Offset, err)
				return
			}
			s.ver.written = max(s.ver.written, int(l))
			s.checkRaise(nd, e, int(l))
		}
	}
}

// checkRaise checks a level entry at its first write: by the leader of its
// epoch, never below the level its log had; a raise (above it, not a copy
// above the log start) within that leader's support and hold, and not
// while a voter of its set has long run a release that cannot run at it.
func (s *sim) checkRaise(nd *node, e protocol.Entry, l int) {
	st := nd.r.Status()
	// The leader the checker recorded for the epoch (it may have stepped
	// down later in the same round), or, in its first round, itself now.
	if l, ok := s.leaders[e.Epoch]; ok && l != nd.idx || !ok && (st.Role != replica.RoleLeader || st.Epoch != e.Epoch) {
		s.fail("%s first wrote level entry %d@e%d but did not lead that epoch", nd.id, e.Offset, e.Epoch)
		return
	}
	prev := levelBelow(nd.shadow, e.Offset)
	switch {
	case l < prev:
		s.fail("%s lowered the level from %d to %d at offset %d", nd.id, prev, l, e.Offset)
		return
	case l == prev:
		return // a copy above the log start
	}
	v := s.ver.nodes[nd.idx]
	if l > v.supported || v.hold != 0 && l > v.hold {
		s.fail("%s (supports %d, hold %d) raised the level to %d", nd.id, v.supported, v.hold, l)
		return
	}
	s.res.LevelRaises++
	if !s.opts.SafetyOnly {
		// The rule itself: every other voter of its set told this
		// leader process, within FetchTimeout by its clock, that it
		// supports the level.
		now := nd.clock(s.now)
		for _, vt := range st.Voters {
			i, ok := s.byID[vt.ID]
			if !ok || s.nodes[i] == nd {
				continue
			}
			if h := s.ver.heard[l-levelOld][nd.idx][i]; h.inc != nd.inc || h.at.IsZero() || now.Sub(h.at) >= s.p.fetchTimeout {
				s.fail("%s raised the level to %d, but voter %s has not told it it supports %d within FetchTimeout", nd.id, l, vt.ID, l)
				return
			}
		}
	}
	// The consequence: no voter of the set runs a release that cannot
	// run at the level, unless its restart was so recent that a fetch of
	// its earlier incarnation may still speak for it (one can arrive as
	// late as a duplicate held in a lane, and counts for a fetch
	// timeout).
	settled := s.p.netMax + s.p.slowMax + s.p.downMax + 2*s.p.fetchTimeout + ms(20)
	for _, vt := range st.Voters {
		i, ok := s.byID[vt.ID]
		if !ok {
			continue
		}
		o := s.nodes[i]
		ov := s.ver.nodes[o.idx]
		if o == nd || !o.up || o.dirID != vt.DirID || ov.supported >= l || s.now-ov.upSince < settled {
			continue
		}
		s.fail("%s raised the level to %d while voter %s has supported only %d since %v", nd.id, l, o.id, ov.supported, ov.upSince)
		return
	}
}

// committedLevel checks a level entry becoming committed at offset o: the
// committed levels never go down.
func (s *sim) committedLevel(nd *node, o uint64, k entryKey) {
	if !s.p.ver.on {
		return
	}
	l, err := protocol.DecodeFeatureLevel([]byte(k.data))
	if err != nil {
		s.fail("%s: committed a malformed level entry at %d: %v", nd.id, o, err)
		return
	}
	if int(l) < s.ver.committed {
		s.fail("%s: the committed level goes down from %d to %d at offset %d", nd.id, s.ver.committed, l, o)
		return
	}
	s.ver.committed = int(l)
	s.ver.committedAt = append(s.ver.committedAt, levelAt{o, int(l)})
}

// checkLevel is the per-round check of a running node: its finalized
// level never goes down while it runs and never exceeds what it supports,
// and a committed level above its support below its HW (and at or above
// its log start) has halted it.
func (s *sim) checkLevel(nd *node, st replica.Status) {
	if !s.p.ver.on {
		return
	}
	v := &s.ver.nodes[nd.idx]
	if st.FeatureLevel < v.level {
		s.fail("%s: feature level went down from %d to %d", nd.id, v.level, st.FeatureLevel)
		return
	}
	v.level = st.FeatureLevel
	if st.FeatureLevel > v.supported {
		s.fail("%s runs at level %d but supports %d", nd.id, st.FeatureLevel, v.supported)
		return
	}
	if st.SupportedLevels != [2]int{protocol.MinVersion, v.supported} {
		s.fail("%s reports supported levels %v, its release %d", nd.id, st.SupportedLevels, v.supported)
		return
	}
	for i := len(s.ver.committedAt) - 1; i >= 0; i-- {
		c := s.ver.committedAt[i]
		if c.level <= v.supported || c.off < st.LogStart {
			break
		}
		if c.off < st.HighWatermark {
			s.fail("%s (supports %d) passed committed level %d at offset %d (HW %d) without halting", nd.id, v.supported, c.level, c.off, st.HighWatermark)
			return
		}
	}
}
