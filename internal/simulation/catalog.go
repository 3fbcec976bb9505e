package simulation

import (
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/replog-io/replog/internal/shell"
	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/replica"
)

// The catalog of named logs (docs/protocol.md R80–R82): the workload asks
// random nodes to create and delete a few names through the shell's
// LogChange event, as the root's CreateLog and DeleteLog do, each keyed by
// its node's catalog producer and retried with the same key after an
// unknown outcome or a not-leader answer. The checks:
//
//   - as the committed log grows, its log changes are replayed into the
//     reference catalog: a create of a name it holds, or a delete of one it
//     does not, is two changes both committed where the leader had to
//     refuse one (R80); a leader's copy (R81) must repeat the reference's
//     entry exactly (spec and creating offset);
//   - after every round, a node whose catalog is known publishes the
//     reference catalog as of the readable HW it says it is as of
//     (replica.LogsAsOf), which never moves back, and it is known only
//     with the readable HW covering it (R82); Output.LogsChanged says
//     exactly when the version moved;
//   - a change acknowledged at an offset is the change at that offset of
//     the acking node's log, and every try of one change names the same
//     offset; a leader writes a log change only at the level of named logs
//     (R68);
//   - after convergence every node's catalog is known and is the whole
//     committed log's.
//
// The workload draws from its own random stream, and is off in classic
// runs.

// catalogNames are the names the workload creates and deletes.
var catalogNames = [...]string{"l0", "l1", "l2"}

// catalogMaxTries bounds the tries of one change.
const catalogMaxTries = 6

// catalogState is the catalog workload's part of a run.
type catalogState struct {
	rng   *rand.Rand
	on    bool
	every time.Duration
	// inflight: each catalog producer's unanswered sequence numbers.
	inflight map[uint64]map[uint64]bool
	// ref is the catalog the committed log makes, up to refEnd; hist its
	// digest after each change, by the offset after the change.
	ref    map[string]refLog
	refEnd uint64
	hist   []catalogAt
	// acked: changes acknowledged beyond the committed log, by offset.
	acked map[uint64][]ackedChange
}

type refLog struct {
	spec    string
	created uint64
}

type catalogAt struct {
	end    uint64
	digest string
}

// logChange is a proposal's log change: its name, spec ("" deletes), key,
// and, for a retry, its first try.
type logChange struct {
	name, spec string
	key        protocol.Key
	root       *proposal
	tries      int
}

// chooseCatalog sets the catalog workload's knobs for a run.
func chooseCatalog(c *catalogState, r *rand.Rand) {
	c.on = r.Intn(2) == 0
	c.every = ms(10 + 90*r.Float64())
}

func (s *sim) setupCatalog() {
	s.cat.ref = map[string]refLog{}
	s.cat.inflight = map[uint64]map[uint64]bool{}
	s.cat.acked = map[uint64][]ackedChange{}
	if !s.cat.on {
		return
	}
	s.schedule(s.catalogDelay(), event{kind: evLogChange})
}

func (s *sim) catalogDelay() time.Duration {
	return time.Duration(s.cat.rng.Int63n(int64(2*s.cat.every) + 1))
}

// catalogProducer is nd's catalog producer in this incarnation: apart
// from the exactly-once workload's.
func catalogProducer(nd *node) uint64 { return 1<<62 | producerOf(nd) }

// catalogKey is the key of a try of root's change on nd: its sequence
// number is root's ID, its low the lowest one still unanswered.
func (s *sim) catalogKey(nd *node, root *proposal) protocol.Key {
	return inflightKey(s.cat.inflight, catalogProducer(nd), root.id)
}

// catalogEvent is the timer (ev.id 0: ask a random node for a change) or a
// retry of the change whose first try is proposal ev.id.
func (s *sim) catalogEvent(ev event) {
	if ev.id != 0 {
		s.catalogRetry(ev)
		return
	}
	if s.phase == phaseQuiesce || s.phase == phaseStable {
		return
	}
	s.schedule(s.catalogDelay(), event{kind: evLogChange})
	nd := s.randomUpFrom(s.cat.rng)
	if nd == nil || len(s.cat.inflight[catalogProducer(nd)]) >= 2 {
		return
	}
	name := catalogNames[s.cat.rng.Intn(len(catalogNames))]
	// Mostly what the node's catalog makes sensible, sometimes not (a
	// refusal must be as sound as a success).
	_, held := s.cat.ref[name]
	if s.cat.rng.Intn(4) == 0 {
		held = !held
	}
	p := &proposal{id: uint64(len(s.proposals) + 1), node: nd.idx, inc: nd.inc, committedAt: -1}
	p.logChange = &logChange{name: name}
	if !held {
		p.logChange.spec = fmt.Sprintf("spec-%d", p.id)
	}
	p.logChange.key = s.catalogKey(nd, p)
	s.proposals = append(s.proposals, p)
	s.catalogPropose(nd, p)
}

func (s *sim) catalogPropose(nd *node, p *proposal) {
	c := p.logChange
	s.hash.byte(0xC3)
	s.hash.u64(p.id)
	s.hash.str(c.name)
	s.hash.str(c.spec)
	s.tracef("%s log change id=%d name=%s spec=%q key=%+v", nd.id, p.id, c.name, c.spec, c.key)
	s.input(nd, shell.LogChange(p.id, c.key, c.name, []byte(c.spec)))
}

// catalogRetry tries the change of proposal ev.id again on its node's
// same incarnation, with the same key (as the root does), else never.
func (s *sim) catalogRetry(ev event) {
	root := s.proposals[ev.id-1]
	nd := s.nodes[root.node]
	prod := root.logChange.key.Producer
	if !nd.up || nd.inc != root.inc || root.committedAt >= 0 || s.phase == phaseQuiesce {
		delete(s.cat.inflight[prod], root.id)
		return
	}
	if s.now < nd.pausedUntil {
		s.schedule(nd.pausedUntil-s.now, ev)
		return
	}
	root.logChange.tries++
	p := &proposal{id: uint64(len(s.proposals) + 1), node: nd.idx, inc: nd.inc, committedAt: -1}
	p.logChange = &logChange{name: root.logChange.name, spec: root.logChange.spec, key: s.catalogKey(nd, root), root: root}
	s.proposals = append(s.proposals, p)
	s.catalogPropose(nd, p)
}

// logChangeAcked handles the answer to a log change (from onAck).
func (s *sim) logChangeAcked(nd *node, p *proposal, a replica.Ack) {
	c := p.logChange
	root := p
	if c.root != nil {
		root = c.root
	}
	prod := c.key.Producer
	switch {
	case a.Err == nil:
		delete(s.cat.inflight[prod], root.id)
		s.tracef("%s log change id=%d (change %d) OK at %d", nd.id, p.id, root.id, a.FirstOffset)
		if root.committedAt >= 0 && uint64(root.committedAt) != a.FirstOffset {
			s.fail("%s: log change %d acknowledged at %d, an earlier try at %d", nd.id, root.id, a.FirstOffset, root.committedAt)
			return
		}
		root.committedAt = int64(a.FirstOffset)
		// A follower's ack may come before its log holds the entry: the
		// committed log checks it, now or once it reaches the offset.
		if a.FirstOffset < uint64(len(s.committed)) {
			s.checkLogChangeAt(nd, root, a.FirstOffset, s.committed[a.FirstOffset])
		} else {
			s.cat.acked[a.FirstOffset] = append(s.cat.acked[a.FirstOffset], ackedChange{nd.idx, root})
		}
	case errors.Is(a.Err, replica.ErrLogExists), errors.Is(a.Err, replica.ErrUnknownLog), errors.Is(a.Err, replica.ErrFeatureLevelTooLow):
		// Refused, nothing appended (what the leader's newest table said:
		// the reference checks that no two changes contradict).
		delete(s.cat.inflight[prod], root.id)
		s.tracef("%s log change id=%d (change %d) refused: %v", nd.id, p.id, root.id, a.Err)
	case notAppended(a.Err) || errors.Is(a.Err, replica.ErrUnknownOutcome):
		s.tracef("%s log change id=%d (change %d) err=%v", nd.id, p.id, root.id, a.Err)
		if root.logChange.tries >= catalogMaxTries {
			delete(s.cat.inflight[prod], root.id)
			return
		}
		s.schedule(5*time.Millisecond+time.Duration(s.cat.rng.Int63n(int64(200*time.Millisecond))), event{kind: evLogChange, id: int(root.id)})
	default:
		s.fail("%s answers log change %d with unexpected error %v", nd.id, p.id, a.Err)
	}
}

// ackedChange is a change acknowledged by node at an offset beyond the
// committed log as the checker saw it then.
type ackedChange struct {
	node int
	p    *proposal
}

// checkLogChangeAt checks that committed entry k at o is p's change.
func (s *sim) checkLogChangeAt(nd *node, p *proposal, o uint64, k entryKey) {
	c := p.logChange
	rec, keyed, ok := logRecordOf(k)
	if !ok || !keyed || rec.Name != c.name || string(rec.Data) != c.spec {
		s.fail("%s: log change %d (%s=%q) acknowledged at %d, where the committed log holds %v", nd.id, p.id, c.name, c.spec, o, k)
	}
}

// logRecordOf returns the StateLog record of an EntryState entry, and
// whether it is a proposal's (keyed) or a leader's copy.
func logRecordOf(k entryKey) (protocol.StateRecord, bool, bool) {
	if k.typ != protocol.EntryState {
		return protocol.StateRecord{}, false, false
	}
	h, rest, err := protocol.SplitKeyed([]byte(k.data))
	if err != nil {
		return protocol.StateRecord{}, false, false
	}
	rs, err := protocol.DecodeStateRecords(rest)
	if err != nil {
		return protocol.StateRecord{}, false, false
	}
	for _, r := range rs {
		if r.Kind == protocol.StateLog {
			return r, len(h) > 0, true
		}
	}
	return protocol.StateRecord{}, false, false
}

// catalogCommitted replays the committed entry at o into the reference
// catalog (from extend, in offset order).
func (s *sim) catalogCommitted(nd *node, o uint64, k entryKey) {
	s.cat.refEnd = o + 1
	if acks, ok := s.cat.acked[o]; ok {
		delete(s.cat.acked, o)
		for _, a := range acks {
			s.checkLogChangeAt(s.nodes[a.node], a.p, o, k)
		}
	}
	if k.typ != protocol.EntryState {
		return
	}
	h, rest, err := protocol.SplitKeyed([]byte(k.data))
	if err != nil {
		return
	}
	rs, err := protocol.DecodeStateRecords(rest)
	if err != nil {
		s.fail("%s: committed state entry at %d does not decode: %v", nd.id, o, err)
		return
	}
	changed := false
	for _, r := range rs {
		if r.Kind != protocol.StateLog {
			continue
		}
		cur, held := s.cat.ref[r.Name]
		switch {
		case len(h) == 0: // a leader's copy (R81)
			if !held || cur.spec != string(r.Data) || cur.created != r.First {
				s.fail("%s: committed copy of log %s at %d (spec %q, created at %d), but the committed catalog holds %+v (held %v)",
					nd.id, r.Name, o, r.Data, r.First, cur, held)
				return
			}
		case len(r.Data) > 0 && held:
			s.fail("%s: log %s created at %d, and again at %d with no delete between (R80)", nd.id, r.Name, cur.created, o)
			return
		case len(r.Data) == 0 && !held:
			s.fail("%s: log %s deleted at %d, but the committed catalog does not hold it (R80)", nd.id, r.Name, o)
			return
		case len(r.Data) > 0:
			s.cat.ref[r.Name] = refLog{spec: string(r.Data), created: o}
			changed = true
		default:
			delete(s.cat.ref, r.Name)
			changed = true
		}
	}
	if changed {
		s.res.LogChanges++
		s.cat.hist = append(s.cat.hist, catalogAt{end: o + 1, digest: s.refDigest()})
	}
}

func (s *sim) refDigest() string {
	names := make([]string, 0, len(s.cat.ref))
	for n := range s.cat.ref {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		l := s.cat.ref[n]
		fmt.Fprintf(&b, "%s@%d=%s;", n, l.created, l.spec)
	}
	return b.String()
}

// refAt is the reference catalog's digest as of readable HW hw.
func (s *sim) refAt(hw uint64) string {
	i := sort.Search(len(s.cat.hist), func(i int) bool { return s.cat.hist[i].end > hw })
	if i == 0 {
		return ""
	}
	return s.cat.hist[i-1].digest
}

func catalogDigest(ls []replica.LogRecord) string {
	var b strings.Builder
	for _, l := range ls {
		fmt.Fprintf(&b, "%s@%d=%s;", l.Name, l.Offset, l.Spec)
	}
	return b.String()
}

// checkCatalog checks what nd's round published of the catalog (after the
// round's checks extended the committed log).
func (s *sim) checkCatalog(nd *node, out shell.Output) {
	if s.err != nil || !nd.up {
		return
	}
	v := nd.r.LogsVersion()
	if out.LogsChanged != (v != nd.logsVersion) {
		s.fail("%s: the catalog's version went from %d to %d, but the shell says changed=%v", nd.id, nd.logsVersion, v, out.LogsChanged)
		return
	}
	nd.logsVersion = v
	at, known := nd.r.LogsAsOf()
	if !known {
		return
	}
	if at < nd.logsAt || at > nd.r.ReadableHW() || at > s.cat.refEnd {
		s.fail("%s: the catalog is as of %d: back from %d, or above the readable HW %d or the committed log %d",
			nd.id, at, nd.logsAt, nd.r.ReadableHW(), s.cat.refEnd)
		return
	}
	nd.logsAt = at
	ls := nd.r.Logs()
	if !slices.IsSortedFunc(ls, func(a, b replica.LogRecord) int { return strings.Compare(a.Name, b.Name) }) {
		s.fail("%s: the catalog is not sorted by name: %v", nd.id, ls)
		return
	}
	if got, want := catalogDigest(ls), s.refAt(at); got != want {
		s.fail("%s: catalog as of %d is %q; the committed log makes it %q", nd.id, at, got, want)
	}
}

// checkCatalogWrites: a leader writes a log change or a copy of one only
// once the level of named logs is finalized (R68).
func (s *sim) checkCatalogWrites(nd *node, ws []protocol.Write) {
	st := nd.r.Status()
	if st.Role != replica.RoleLeader {
		return
	}
	for _, w := range ws {
		if w.Kind != protocol.WriteAppend {
			continue
		}
		for _, e := range w.Entries {
			if e.Epoch != st.Epoch || e.Type != protocol.EntryState {
				continue
			}
			if _, _, ok := logRecordOf(keyOf(e)); ok && st.FeatureLevel < protocol.FeatureLevelNamedLogs {
				s.fail("%s wrote a log change at %d at level %d", nd.id, e.Offset, st.FeatureLevel)
				return
			}
		}
	}
}

// finalCatalog: after convergence, every node knows the whole committed
// log's catalog.
func (s *sim) finalCatalog() {
	for o := range s.cat.acked {
		s.fail("log change acknowledged at %d, beyond the converged committed log %d", o, len(s.committed))
		return
	}
	want := s.refAt(uint64(len(s.committed)))
	for _, nd := range s.nodes {
		if !nd.up {
			continue
		}
		at, known := nd.r.LogsAsOf()
		if !known || at != uint64(len(s.committed)) {
			s.fail("%s: converged with the catalog as of %d (known %v), the committed log ends at %d", nd.id, at, known, len(s.committed))
			return
		}
		if got := catalogDigest(nd.r.Logs()); got != want {
			s.fail("%s: converged with catalog %q, the committed log makes %q", nd.id, got, want)
			return
		}
	}
}
