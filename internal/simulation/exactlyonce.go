package simulation

import (
	"errors"
	"fmt"
	"math/rand"
	"time"

	"github.com/replog-io/replog/internal/shell"
	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/replica"
)

// The exactly-once workload (Options.ExactlyOnce; docs/protocol.md R61-R67):
// every append is keyed by its node's producer (one per incarnation, as a
// Log is one per Open) and a sequence number, a quarter also carry a
// caller ID, and an append that ends with an unknown outcome or
// ErrNotLeader is tried again later with the same key, as Log.Append does:
// across leader changes and lost answers on the same incarnation, and by
// its ID alone on the node's next incarnation (a request re-delivered
// across a restart) while within the deduplication window. Now and then a
// new append reuses the ID of an append committed long past the window:
// it must be appended, not answered as a duplicate. The checks: no record
// is committed at two offsets (checker.go), every ack of an append or of
// its retries names the same offset (declareCommitted), and a duplicate's
// answer names the offset its records are at.

// eoDedupWindow is the core's DedupWindow in these runs: short enough that
// IDs pass it within a run (runs cover a few simulated seconds).
const eoDedupWindow = time.Second

// The window is judged by a leader's clock against the time another
// leader's clock stamped on the entry (R64): it assumes clocks that agree
// well within the window. These runs start the nodes' clocks within 50 ms
// of each other, running within 1% of each other (eoClock; other runs let
// them differ by up to an hour), and make ID retries and ID reuses only
// while no clock was made to jump or stall (clocksTrusted): within a fifth
// of the window, and two windows after, which covers that.
func (s *sim) eoClock(nd *node) {
	nd.clockBase = simBase.Add(time.Duration(s.eo.rng.Int63n(int64(50 * time.Millisecond))))
	nd.clockRate = 0.995 + 0.01*s.eo.rng.Float64()
}

func (s *sim) clocksTrusted() bool {
	return s.res.Faults.ClockJumps == 0 && s.res.Faults.ClockStalls == 0
}

// eoMaxTries bounds the tries of one append.
const eoMaxTries = 8

// eoState is the workload's producer bookkeeping, with a random stream of
// its own (the plain workload's draws stay as they were).
type eoState struct {
	rng      *rand.Rand
	inflight map[uint64]map[uint64]bool // producer → its unanswered sequence numbers
	withID   []*proposal                // appends with an ID, in proposal order
}

// eoFields are a proposal's exactly-once fields.
type eoFields struct {
	key protocol.Key
	// root is the first try of a retried append (nil: this is the first);
	// tries counts a root's tries.
	root  *proposal
	tries int
	// unknown: a try of the root ended with an unknown outcome.
	unknown bool
	// at is when the root was proposed, done when its success was
	// acknowledged; reused is the committed append whose ID this one
	// reuses past the window.
	at, done time.Duration
	reused   *proposal
	idReused bool // a later append reused this one's ID
	// idTried: a try carried the ID alone (another producer), at idAt.
	// Only the ID can then tell the leader that the root's own producer
	// retries the same append: those retries stop half a window after it.
	idTried bool
	idAt    time.Duration
}

func (s *sim) eoInit() {
	s.eo = eoState{rng: rand.New(rand.NewSource(s.opts.Seed ^ 0x5eed0e0)), inflight: map[uint64]map[uint64]bool{}}
}

func producerOf(nd *node) uint64 { return uint64(nd.idx+1)<<32 | uint64(nd.inc+1) }

// eoKey is the key of a try on nd of root's append, with caller ID id.
func (s *sim) eoKey(nd *node, root *proposal, id string, withProducer bool) protocol.Key {
	k := protocol.Key{ID: id}
	if !withProducer {
		return k
	}
	pk := inflightKey(s.eo.inflight, producerOf(nd), root.id)
	k.Producer, k.Seq, k.Low = pk.Producer, pk.Seq, pk.Low
	return k
}

// inflightKey is the producer key of a try of the change or append whose
// first try is proposal seq: it notes seq among prod's unanswered ones in
// inflight, and its low is the lowest of them (R63).
func inflightKey(inflight map[uint64]map[uint64]bool, prod, seq uint64) protocol.Key {
	fl := inflight[prod]
	if fl == nil {
		fl = map[uint64]bool{}
		inflight[prod] = fl
	}
	fl[seq] = true
	low := seq
	for s := range fl {
		low = min(low, s)
	}
	return protocol.Key{Producer: prod, Seq: seq, Low: low}
}

// eoDone records that root's append is answered at producer prod: never
// tried again there.
func (s *sim) eoDone(prod uint64, root *proposal) {
	delete(s.eo.inflight[prod], root.id)
}

// proposeEvent is the event of the workload's proposal p on nd: keyed in
// exactly-once runs.
func (s *sim) proposeEvent(nd *node, p *proposal, recs [][]byte) shell.Event {
	if !s.opts.ExactlyOnce || p.tooLarge {
		return shell.Propose(p.id, recs)
	}
	p.eo.at = s.now
	id := ""
	switch r := s.eo.rng.Intn(20); {
	case r == 0:
		// Reuse the ID of an append committed far past the window.
		for _, old := range s.eo.withID {
			if s.clocksTrusted() && old.committedAt >= 0 && old.eo.done > 0 && s.now-old.eo.done > 2*eoDedupWindow && !old.eo.idReused {
				id, p.eo.reused, old.eo.idReused = old.eo.key.ID, old, true
				break
			}
		}
	case r < 6:
		id = fmt.Sprintf("id-%d", p.id)
	}
	p.eo.key = s.eoKey(nd, p, id, true)
	if id != "" && p.eo.reused == nil {
		s.eo.withID = append(s.eo.withID, p)
	}
	s.tracef("%s keyed id=%d key=%+v", nd.id, p.id, p.eo.key)
	return shell.ProposeKeyed(p.id, p.eo.key, recs)
}

// eoAck handles the ack of a keyed proposal; it reports whether it did.
func (s *sim) eoAck(nd *node, p *proposal, a replica.Ack) bool {
	if !s.opts.ExactlyOnce || p.eo.key.IsZero() {
		return false
	}
	root := p
	if p.eo.root != nil {
		root = p.eo.root
	}
	switch {
	case a.Err == nil:
		s.eoDone(p.eo.key.Producer, root)
		s.tracef("%s ack id=%d (append %d) OK at %d", nd.id, p.id, root.id, a.FirstOffset)
		root.eo.done = s.now
		s.declareCommitted(nd, root, a.FirstOffset, "keyed ack")
	case errors.Is(a.Err, replica.ErrDuplicate):
		s.eoDone(p.eo.key.Producer, root)
		if root.eo.reused != nil {
			s.fail("%s: append %d reuses the ID %q of append %d, proposed %v earlier (the window is %v), and is answered as a duplicate",
				nd.id, root.id, root.eo.key.ID, root.eo.reused.id, s.now-root.eo.reused.eo.at, eoDedupWindow)
			return true
		}
		s.tracef("%s ack id=%d (append %d) duplicate of %d", nd.id, p.id, root.id, a.FirstOffset)
		root.eo.done = s.now
		s.declareCommitted(nd, root, a.FirstOffset, "duplicate ack")
	case notAppended(a.Err) || errors.Is(a.Err, replica.ErrUnknownOutcome):
		s.tracef("%s ack id=%d (append %d) err=%v", nd.id, p.id, root.id, a.Err)
		if notAppended(a.Err) {
			if p.appended {
				s.fail("%s answers proposal %d with %v, but its records were appended", nd.id, p.id, a.Err)
				return true
			}
			// Until the retry nothing of that try may be appended (unless
			// an earlier try's outcome was unknown).
			root.notLeader = !root.eo.unknown
		} else {
			root.eo.unknown = true
		}
		if root.eo.tries >= eoMaxTries || s.phase == phaseQuiesce {
			s.eoDone(p.eo.key.Producer, root)
			return true
		}
		// As Log.Append: again later, with the same key; or, for an append
		// with an ID, now and then by another node with the ID alone (a
		// client retrying its request through another server).
		at := nd
		if root.eo.key.ID != "" && s.eo.rng.Intn(3) == 0 {
			at = s.nodes[s.eo.rng.Intn(len(s.nodes))]
		}
		s.schedule(s.between(5*time.Millisecond, 200*time.Millisecond), event{kind: evRetry, node: at.idx, inc: at.inc, id: int(root.id)})
	default:
		s.fail("%s acks keyed proposal %d with unexpected error %v", nd.id, p.id, a.Err)
	}
	return true
}

// eoRetry tries root's append again on its node: with the same key on the
// same incarnation, by its ID alone on a later one or another node within
// a fifth of the window
// (a request re-delivered across a restart), else not at all.
func (s *sim) eoRetry(ev event) {
	root := s.proposals[ev.id-1]
	nd := s.nodes[ev.node]
	if root.committedAt >= 0 {
		s.eoDone(root.eo.key.Producer, root)
		return
	}
	key := root.eo.key
	switch {
	case !nd.up || s.now < nd.pausedUntil:
		if root.eo.tries < eoMaxTries {
			root.eo.tries++
			s.schedule(s.between(50*time.Millisecond, 500*time.Millisecond), ev)
		}
		return
	case nd.idx == root.node && nd.inc == root.inc:
		if root.eo.idTried && s.now-root.eo.idAt >= eoDedupWindow/2 {
			// The ID-only try may have been appended, and its ID is about
			// to leave the window: a retry now could append it again,
			// as a client retrying through two servers past the window
			// would (R64's limit, not a core bug).
			s.eoDone(key.Producer, root)
			return
		}
		key = s.eoKey(nd, root, key.ID, true) // its producer: the same key
	case key.ID != "" && s.now-root.eo.at < eoDedupWindow/5 && s.clocksTrusted():
		key = protocol.Key{ID: key.ID}
		root.eo.idTried, root.eo.idAt = true, s.now
	default:
		return
	}
	root.eo.tries++
	root.notLeader = false // that try appended nothing; this one may
	p := &proposal{id: uint64(len(s.proposals) + 1), node: nd.idx, inc: nd.inc, committedAt: -1, records: root.records}
	p.eo = eoFields{key: key, root: root}
	s.proposals = append(s.proposals, p)
	nd.inflight++
	recs := make([][]byte, len(root.records))
	for i, r := range root.records {
		recs[i] = []byte(r)
	}
	s.res.Retries++
	s.tracef("%s retry id=%d of append %d (try %d) key=%+v", nd.id, p.id, root.id, root.eo.tries, key)
	s.input(nd, shell.ProposeKeyed(p.id, key, recs))
}

// keyedPartEntry reports whether e is an entry of a keyed batch before its
// last (R61, R102).
func keyedPartEntry(e *protocol.Entry) bool {
	return e.Type == protocol.EntryKeyed && protocol.KeyedPart(e.Data)
}

// checkFetchSize checks a fetch answer against FetchMaxBytes (R9), each
// entry counted as its data plus protocol.EntryOverhead: the first entry
// always goes whole, and so does a keyed batch that starts the answer
// (R61); an answer never ends inside a keyed batch.
func (s *sim) checkFetchSize(nd *node, b *protocol.FetchResponse) {
	es := b.Entries
	if n := len(es); n > 0 && keyedPartEntry(&es[n-1]) {
		s.fail("%s: fetch answer ends inside a keyed batch at offset %d", nd.id, es[n-1].Offset)
		return
	}
	overhead := protocol.EntryOverhead
	first := 1 // the entries that go whole
	for first < len(es) && keyedPartEntry(&es[first-1]) {
		first++
	}
	whole, total := 0, 0
	for i, e := range es {
		total += len(e.Data) + overhead
		if i < first {
			whole = total
		}
	}
	if len(es) > first && total > max(s.p.fetchMaxBytes, whole) {
		s.fail("%s: fetch response with %d entries costs %d bytes (%d per entry), FetchMaxBytes is %d",
			nd.id, len(es), total, overhead, s.p.fetchMaxBytes)
	}
}
