package replica

import (
	"fmt"
	"math/rand"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/replog-io/replog/protocol"
	"github.com/replog-io/replog/storage"
)

// The scenario harness: N replicas with in-memory stores, a manual network
// queue delivered step by step, manual persistence and per-node manual
// clocks. Writes a replica issues stay pending until `persist`; `crash`
// loses them (a power failure loses what was not durable).
//
// Commands (see testdata/*.txt):
//
//	cluster voters=(n1,n2) [observers=(n4)] [maxbytes=N] [name=x]
//	                         name: the log's name (Config.Name, R106)
//	campaign n1              force n1 to start an election (no pre-vote). It
//	                         stands for a won pre-vote round: the other
//	                         voters are taken to have heard nothing from a
//	                         leader for FetchTimeout (their leader contact
//	                         is forgotten), else they would disregard the
//	                         vote request (Raft §6)
//	elect n1                 campaign, then stabilize
//	stabilize [n1 n2 ...]    persist and deliver until quiet (default: all)
//	propose n1 a [b ...]     one batch of records
//	persist n1 [n2 ...]      apply the node's pending writes, report them
//	deliver n2->n1 [count=N] deliver queued messages on that link, in order
//	drop n2->n1              drop queued messages on that link
//	hold n2->n1              set queued messages on that link aside (delayed)
//	release n2->n1           queue the held messages of that link again
//	tick n2 [n3 ...] +600ms [noready]  advance those clocks (no node: every
//	                         live node); noready leaves Ready to the next
//	                         command (the shell's round: Tick, Step, Ready)
//	run [n1 ...] +3s [step=50ms]  tick in steps, stabilizing after each
//	                         step, then print status
//	crash n2 / restart n2
//	cluster/restart ... [supports=7] [hold=6]  the feature level the
//	                         node(s) support and the one a leader holds at
//	                         (Config.SupportedFeatureLevel, MaxFeatureLevel;
//	                         R68): a node of another release
//	partition n1 n2,n3       cut every link between the groups; heal
//	hint n2 failed=n1 / hint n4 leader=n1 epoch=2
//	transfer n1 [to=n2]      the leader n1 hands over (R59; "": the most
//	                         caught-up voter); outcomes print as they come
//	delete n1 before=N       the leader's DeleteBefore (R51)
//	status [n1 ...]   log [n1 ...]   msgs
type harness struct {
	t        testing.TB
	nodes    map[string]*hnode
	order    []string
	queue    []protocol.Message
	held     []protocol.Message
	cut      map[[2]string]bool
	nextProp uint64
	voters   []string
	maxBytes int
	out      *strings.Builder
	// bootstrap: the cluster starts with no voter set recorded (R57);
	// otherwise its voters are in force from before offset 0 (bound).
	bootstrap bool
}

type hnode struct {
	id       string
	cfg      Config
	store    *storage.Memory
	r        *Replica
	now      time.Time
	pending  []protocol.Write
	up       bool
	restarts int64
	seed     int64
	// wipes counts the wipes of its directory: each gives it a new DirID
	// and an empty store with no voter set (R56).
	wipes int
	// heard is the node's contact clock (Config.Contact, R98): when a
	// message from each peer was last delivered to it, or a heartbeat
	// (every run step, across every link that is not cut).
	heard map[string]time.Time
	// silent holds the peers the node reported silent to its core
	// (PeerSilent) since it last heard from them.
	silent map[string]bool
}

// LastHeard is the node's contact with peer (replica.PeerContact).
func (n *hnode) LastHeard(peer string) time.Time { return n.heard[peer] }

// heartbeats refreshes the contact of every live node with every live
// peer whose link to it is not cut: the node-level heartbeats (R98),
// which no core sees. A peer a node has not heard from for FetchTimeout
// is reported to its core once (PeerSilent, R99), as the node's contact
// timer does.
func (h *harness) heartbeats() {
	for _, a := range h.order {
		for _, b := range h.order {
			na, nb := h.nodes[a], h.nodes[b]
			if a != b && na.up && nb.up && !h.cut[[2]string{b, a}] {
				na.heard[b] = na.now
				delete(na.silent, b)
			}
		}
	}
	for _, a := range h.order {
		na := h.nodes[a]
		for _, b := range h.order {
			if a == b || !na.up || na.silent[b] || na.now.Sub(na.heard[b]) < na.cfg.FetchTimeout {
				continue
			}
			na.silent[b] = true
			na.r.PeerSilent(b)
			h.ready(na)
		}
	}
}

var t0 = time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)

func newHarness(t testing.TB) *harness {
	return &harness{t: t, nodes: map[string]*hnode{}, cut: map[[2]string]bool{}}
}

func (h *harness) printf(format string, args ...any) {
	fmt.Fprintf(h.out, format, args...)
}

func (h *harness) node(id string) *hnode {
	n, ok := h.nodes[id]
	if !ok {
		h.t.Fatalf("unknown node %q", id)
	}
	return n
}

func (h *harness) addNode(id string, seed int64) {
	n := &hnode{id: id, store: storage.NewMemory(), now: t0, up: true, seed: seed, heard: map[string]time.Time{}, silent: map[string]bool{}}
	n.cfg = Config{
		ID:              id,
		Voters:          h.voters,
		FetchTimeout:    2 * time.Second,
		ElectionTimeout: 500 * time.Millisecond,
		FetchMaxWait:    500 * time.Millisecond,
		FetchMaxBytes:   h.maxBytes,
		// A scenario's nodes support the base level unless supports= says
		// otherwise: the scenarios about other rules keep their messages
		// and logs free of level entries.
		SupportedFeatureLevel: protocol.BaseFeatureLevel,
		Contact:               n,
	}
	h.nodes[id] = n
	h.order = append(h.order, id)
}

func (h *harness) start(n *hnode) {
	cfg := n.cfg
	cfg.Rand = rand.New(rand.NewSource(n.seed*1000 + n.restarts))
	var log LogReader = bound(n.store, cfg.Voters)
	if n.wipes > 0 || h.bootstrap {
		log = n.store // a new directory: nothing recorded (R57)
	}
	r, err := New(cfg, log, n.now)
	if err != nil {
		h.t.Fatalf("New(%s): %v", n.id, err)
	}
	n.r = r
	n.up = true
	h.ready(n)
}

// ready collects what n's replica asks for: writes stay pending, messages
// go to the network, acks are printed.
func (h *harness) ready(n *hnode) bool {
	if !n.up {
		return false
	}
	rd := n.r.Ready()
	n.pending = append(n.pending, rd.Writes...)
	for _, m := range rd.Messages {
		// A message sent across a cut link is lost at once (healing later
		// does not bring it back).
		if !h.cut[[2]string{m.From, m.To}] {
			h.queue = append(h.queue, m)
		}
	}
	for _, a := range rd.Acks {
		if a.Err != nil {
			h.printf("%s: ack #%d error: %v\n", n.id, a.ID, a.Err)
		} else {
			h.printf("%s: ack #%d ok at offset %d\n", n.id, a.ID, a.FirstOffset)
		}
	}
	for _, tr := range rd.Transfers {
		h.printf("%s: transfer to %s (epoch %d): %s\n", n.id, tr.To, tr.Epoch, errOr(tr.Err, "handed over"))
	}
	return !rd.IsEmpty()
}

func (h *harness) persist(n *hnode, verbose bool) bool {
	if !n.up || len(n.pending) == 0 {
		return false
	}
	if verbose {
		for _, w := range n.pending {
			switch w.Kind {
			case protocol.WriteAppend:
				h.printf("%s: persist append %s\n", n.id, fmtEntries(w.Entries))
			case protocol.WriteTruncate:
				h.printf("%s: persist truncate to %d\n", n.id, w.Offset)
			case protocol.WriteQuorumState:
				h.printf("%s: persist quorum epoch=%d voted=%s leader=%s\n", n.id, w.Quorum.Epoch, w.Quorum.VotedFor, w.Quorum.LeaderID)
			case protocol.WriteHWCheckpoint:
				h.printf("%s: persist hw-checkpoint %d\n", n.id, w.Offset)
			}
		}
	}
	// One Apply for everything pending, as the shell's writer does.
	if err := n.store.Apply(n.pending); err != nil {
		h.t.Fatalf("%s: writes %+v: %v", n.id, n.pending, err)
	}
	last := n.pending[len(n.pending)-1].Seq
	n.pending = nil
	n.r.Persisted(last)
	h.ready(n)
	return true
}

func (h *harness) linkOK(from, to string) bool {
	n, ok := h.nodes[to]
	return ok && n.up && !h.cut[[2]string{from, to}]
}

// deliver delivers up to count queued messages on from->to ("" matches
// any), in queue order; count < 0: those queued now. Messages to a down
// node or across a cut link are dropped.
func (h *harness) deliver(from, to string, count int, verbose bool, among map[string]bool) int {
	match := func(m protocol.Message) bool {
		return (from == "" || m.From == from) && (to == "" || m.To == to) &&
			(among == nil || among[m.From] && among[m.To])
	}
	if count < 0 {
		count = 0
		for _, m := range h.queue {
			if match(m) {
				count++
			}
		}
	}
	delivered := 0
	for delivered < count {
		i := slices.IndexFunc(h.queue, match)
		if i < 0 {
			break
		}
		m := h.queue[i]
		h.queue = slices.Delete(h.queue, i, i+1)
		delivered++
		if !h.linkOK(m.From, m.To) {
			if verbose {
				h.printf("dropped %s\n", fmtMsg(m))
			}
			continue
		}
		if verbose {
			h.printf("%s\n", fmtMsg(m))
		}
		n := h.nodes[m.To]
		n.heard[m.From] = later(n.heard[m.From], n.now)
		delete(n.silent, m.From)
		n.r.Step(m)
		h.ready(n)
	}
	return delivered
}

func (h *harness) stabilize(among map[string]bool, verbose bool) {
	for range 1000 {
		progress := false
		for _, id := range h.order {
			n := h.nodes[id]
			if among != nil && !among[id] {
				continue
			}
			if h.persist(n, false) {
				progress = true
			}
		}
		if h.deliver("", "", -1, verbose, among) > 0 {
			progress = true
		}
		if !progress {
			return
		}
	}
	h.t.Fatalf("stabilize did not settle")
}

func (h *harness) campaign(n *hnode) {
	for _, o := range h.nodes {
		if o != n && o.up {
			o.r.lastLeaderContact = time.Time{}
		}
	}
	n.r.becomeCandidate()
	h.ready(n)
}

func (h *harness) status(ids []string) {
	for _, id := range ids {
		n := h.node(id)
		if !n.up {
			h.printf("%s: down\n", id)
			continue
		}
		s := n.r.Status()
		h.printf("%s: %s epoch=%d", id, s.Role, s.Epoch)
		if s.Role != RoleLeader {
			leader := s.LeaderID
			if leader == "" {
				leader = "none"
			}
			h.printf(" leader=%s", leader)
		}
		h.printf(" leo=%d", s.LEO)
		if s.DurableLEO != s.LEO {
			h.printf(" (durable %d)", s.DurableLEO)
		}
		h.printf(" hw=%d", s.HighWatermark)
		if s.Role == RoleLeader {
			var parts []string
			for _, v := range h.voters {
				if leo, ok := s.RemoteLEO[v]; ok {
					parts = append(parts, fmt.Sprintf("%s:%d", v, leo))
				}
			}
			h.printf(" remote=(%s)", strings.Join(parts, ","))
		}
		if s.FeatureLevel != protocol.BaseFeatureLevel {
			h.printf(" level=%d", s.FeatureLevel)
		}
		if s.Quiesced {
			h.printf(" quiesced")
		}
		if s.Violations > 0 {
			h.printf(" VIOLATIONS=%d", s.Violations)
		}
		if err := n.r.Err(); err != nil {
			h.printf(" HALTED: %v", err)
		}
		h.printf("\n")
	}
}

func (h *harness) printLog(ids []string) {
	for _, id := range ids {
		n := h.node(id)
		es, err := n.store.Entries(n.store.LogStart(), 0, 1<<30)
		if err != nil {
			h.t.Fatalf("%s: %v", id, err)
		}
		h.printf("%s: %s\n", id, fmtEntries(es))
	}
}

// checkInvariants compares each settled replica's view with its store and
// checks HW ≤ LEO.
func (h *harness) checkInvariants() {
	for _, id := range h.order {
		n := h.nodes[id]
		if !n.up {
			continue
		}
		s := n.r.Status()
		if s.HighWatermark > s.LEO {
			h.t.Errorf("%s: hw %d > leo %d", id, s.HighWatermark, s.LEO)
		}
		if len(n.pending) > 0 || n.r.Err() != nil {
			continue // a halted replica writes nothing more
		}
		if s.LEO != n.store.LEO() || s.DurableLEO != s.LEO {
			h.t.Errorf("%s: view leo %d (durable %d) != store leo %d", id, s.LEO, s.DurableLEO, n.store.LEO())
		}
		view := slices.Clone(n.r.log.epochs)
		for len(view) > 0 && view[len(view)-1].StartOffset >= s.LEO {
			view = view[:len(view)-1] // a leader's row without entries yet
		}
		if got := n.store.EpochMap(); !slices.Equal(view, got) {
			h.t.Errorf("%s: view epoch map %v != store %v", id, view, got)
		}
	}
}

func fmtEntries(es []protocol.Entry) string {
	if len(es) == 0 {
		return "(empty)"
	}
	var parts []string
	for _, e := range es {
		d := string(e.Data)
		switch e.Type {
		case protocol.EntryControl:
			d = "ctrl"
		case protocol.EntryFeature:
			l, err := protocol.DecodeFeatureLevel(e.Data)
			d = fmt.Sprintf("level(%d)%s", l, errOrEmpty(err))
		case protocol.EntryVoters:
			vs, owed, err := protocol.DecodeVoterSet(e.Data)
			var ids []string
			for _, v := range vs {
				ids = append(ids, v.ID+"/"+v.DirID)
			}
			owes := ""
			for i, v := range owed {
				if i == 0 {
					owes = "; owes "
				} else {
					owes += ","
				}
				owes += v.ID + "/" + v.DirID
			}
			d = fmt.Sprintf("voters(%s%s)%v", strings.Join(ids, ","), owes, errOrEmpty(err))
		}
		parts = append(parts, fmt.Sprintf("%d@e%d:%s", e.Offset, e.Epoch, d))
	}
	return strings.Join(parts, " ")
}

// errOr is err's text, or ok if err is nil.
func errOr(err error, ok string) string {
	if err == nil {
		return ok
	}
	return "error: " + err.Error()
}

func errOrEmpty(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func fmtMsg(m protocol.Message) string {
	switch b := m.Body.(type) {
	case *protocol.FetchRequest:
		s := fmt.Sprintf("%s->%s Fetch epoch=%d offset=%d lastEpoch=%d", m.From, m.To, b.CurrentEpoch, b.FetchOffset, b.LastFetchedEpoch)
		if b.FeatureLevel != 0 {
			s += fmt.Sprintf(" level=%d", b.FeatureLevel)
		}
		if b.HasDurableOffset && b.DurableOffset != b.FetchOffset {
			s += fmt.Sprintf(" durable=%d", b.DurableOffset) // only while entries are in flight (R71)
		}
		switch {
		case b.MaxWaitMs == 0 && b.MaxBytes == 1:
			s += " contact" // R77
		case b.MaxWaitMs == 0:
			s += " nowait" // the fetch after a contact fetch (R77)
		}
		if b.Quiescent {
			s += " quiescent" // R99
		}
		return s
	case *protocol.FetchResponse:
		s := fmt.Sprintf("%s->%s FetchResp epoch=%d %s hw=%d", m.From, m.To, b.Epoch, b.Error, b.HighWatermark)
		switch b.Error {
		case protocol.FetchDivergingEpoch:
			s += fmt.Sprintf(" diverging=(epoch %d, end %d)", b.DivergingEpoch, b.DivergingEndOffset)
		case protocol.FetchNotLeader, protocol.FetchFencedEpoch:
			s += " leader=" + b.LeaderID
		}
		if len(b.Entries) > 0 {
			s += " entries=" + fmtEntries(b.Entries)
		}
		if b.Quiescent {
			s += " quiescent"
		}
		return s
	case *protocol.VoteRequest:
		kind := "Vote"
		if b.PreVote {
			kind = "PreVote"
		}
		return fmt.Sprintf("%s->%s %s epoch=%d last=(%d,%d)", m.From, m.To, kind, b.Epoch, b.LastEpoch, b.LEO)
	case *protocol.VoteResponse:
		kind := "VoteResp"
		if b.PreVote {
			kind = "PreVoteResp"
		}
		return fmt.Sprintf("%s->%s %s epoch=%d granted=%t leader=%s", m.From, m.To, kind, b.Epoch, b.Granted, b.LeaderID)
	case *protocol.BeginEpoch:
		return fmt.Sprintf("%s->%s BeginEpoch epoch=%d", m.From, m.To, b.Epoch)
	case *protocol.EndEpoch:
		return fmt.Sprintf("%s->%s EndEpoch epoch=%d successor=%s", m.From, m.To, b.Epoch, b.Successor)
	case *protocol.AppendRequest:
		return fmt.Sprintf("%s->%s Append records=%d", m.From, m.To, len(b.Records))
	case *protocol.AppendResponse:
		return fmt.Sprintf("%s->%s AppendResp %s first=%d", m.From, m.To, b.Error, b.FirstOffset)
	}
	return m.String()
}

// args returns the bare (key-only) arguments.
func bareArgs(d *datadriven.TestData) []string {
	var out []string
	for _, a := range d.CmdArgs {
		if len(a.Vals) == 0 {
			out = append(out, a.Key)
		}
	}
	return out
}

func argVals(d *datadriven.TestData, key string) []string {
	for _, a := range d.CmdArgs {
		if a.Key == key {
			var out []string
			for _, v := range a.Vals {
				out = append(out, strings.Split(v, ",")...)
			}
			return out
		}
	}
	return nil
}

// setLevels applies the supports= and hold= arguments to n's config.
func (h *harness) setLevels(d *datadriven.TestData, n *hnode) {
	if v := argVals(d, "supports"); v != nil {
		n.cfg.SupportedFeatureLevel, _ = strconv.Atoi(v[0])
	}
	if v := argVals(d, "hold"); v != nil {
		n.cfg.MaxFeatureLevel, _ = strconv.Atoi(v[0])
	}
}

func (h *harness) idsOr(ids []string) []string {
	if len(ids) == 0 {
		return h.order
	}
	return ids
}

func (h *harness) handle(t testing.TB, d *datadriven.TestData) string {
	h.t = t
	var out strings.Builder
	h.out = &out
	verbose := !d.HasArg("quiet")
	args := bareArgs(d)
	args = slices.DeleteFunc(args, func(s string) bool {
		return s == "quiet" || s == "verbose" || s == "nostatus" || s == "noready" || s == "bootstrap" || s == "noheartbeats"
	})
	switch d.Cmd {
	case "cluster":
		// A new cluster replaces the previous one.
		h.nodes, h.order, h.queue, h.held = map[string]*hnode{}, nil, nil, nil
		clear(h.cut)
		h.voters = argVals(d, "voters")
		h.bootstrap = d.HasArg("bootstrap")
		h.maxBytes = 1 << 20
		if v := argVals(d, "maxbytes"); v != nil {
			h.maxBytes, _ = strconv.Atoi(v[0])
		}
		for i, id := range h.voters {
			h.addNode(id, int64(i+1))
		}
		for i, id := range argVals(d, "observers") {
			h.addNode(id, int64(100+i))
		}
		if v := argVals(d, "name"); v != nil {
			for _, id := range h.order {
				h.nodes[id].cfg.Name = v[0]
			}
		}
		for _, id := range h.order {
			h.setLevels(d, h.nodes[id])
		}
		// Every node starts knowing the others, as gossip's join tells
		// it (Config.Members, R60).
		for _, id := range h.order {
			n := h.nodes[id]
			n.cfg.Members = slices.DeleteFunc(slices.Clone(h.order), func(o string) bool { return o == id })
			h.start(n)
		}
		h.status(h.order)
	case "campaign":
		h.campaign(h.node(args[0]))
	case "elect":
		h.campaign(h.node(args[0]))
		h.stabilize(nil, d.HasArg("verbose"))
		h.status(h.order)
	case "stabilize":
		var among map[string]bool
		if len(args) > 0 {
			among = map[string]bool{}
			for _, id := range args {
				among[id] = true
			}
		}
		h.stabilize(among, d.HasArg("verbose"))
	case "change":
		// change n1 add=n4 | remove=n2: n1 proposes a voter change (R58).
		n := h.node(args[0])
		var ch protocol.VoterChange
		if v := argVals(d, "add"); v != nil {
			ch = protocol.VoterChange{NodeID: v[0], Add: true}
		} else if v := argVals(d, "remove"); v != nil {
			ch = protocol.VoterChange{NodeID: v[0]}
		} else {
			h.t.Fatalf("%s: change needs add= or remove=", d.Pos)
		}
		h.nextProp++
		what := "remove " + ch.NodeID
		if ch.Add {
			what = "add " + ch.NodeID
		}
		h.printf("%s: change #%d %s\n", n.id, h.nextProp, what)
		n.r.ProposeVoterChange(h.nextProp, ch)
		h.ready(n)
	case "propose":
		n := h.node(args[0])
		var recs [][]byte
		for _, a := range args[1:] {
			recs = append(recs, []byte(a))
		}
		h.nextProp++
		h.printf("%s: propose #%d %s\n", n.id, h.nextProp, strings.Join(args[1:], " "))
		n.r.Propose(h.nextProp, recs)
		h.ready(n)
	case "persist":
		for _, id := range h.idsOr(args) {
			h.persist(h.node(id), verbose)
		}
	case "hold", "release":
		from, to, _ := strings.Cut(args[0], "->")
		link := func(m protocol.Message) bool { return m.From == from && m.To == to }
		if d.Cmd == "hold" {
			for _, m := range h.queue {
				if link(m) {
					h.held = append(h.held, m)
				}
			}
			h.queue = slices.DeleteFunc(h.queue, link)
			break
		}
		for _, m := range h.held {
			if link(m) {
				h.queue = append(h.queue, m)
			}
		}
		h.held = slices.DeleteFunc(h.held, link)
	case "deliver", "drop":
		count := -1
		if v := argVals(d, "count"); v != nil {
			count, _ = strconv.Atoi(v[0])
		}
		var from, to string
		if len(args) > 0 {
			var ok bool
			from, to, ok = strings.Cut(args[0], "->")
			if !ok {
				to, from = args[0], ""
			}
		}
		if d.Cmd == "drop" {
			h.queue = slices.DeleteFunc(h.queue, func(m protocol.Message) bool {
				return (from == "" || m.From == from) && (to == "" || m.To == to)
			})
			break
		}
		if h.deliver(from, to, count, verbose, nil) == 0 {
			h.printf("nothing to deliver\n")
		}
	case "tick":
		var ids []string
		var delta time.Duration
		for _, a := range args {
			if strings.HasPrefix(a, "+") {
				var err error
				delta, err = time.ParseDuration(a[1:])
				if err != nil {
					t.Fatalf("%s: %v", d.Pos, err)
				}
			} else {
				ids = append(ids, a)
			}
		}
		for _, id := range h.idsOr(ids) {
			n := h.node(id)
			if !n.up {
				continue
			}
			n.now = n.now.Add(delta)
			n.r.Tick(n.now)
			if !d.HasArg("noready") {
				h.ready(n)
			}
		}
	case "run":
		// Advance the clocks of the given nodes (default: all live ones)
		// in steps, stabilizing the whole cluster after each step.
		var ids []string
		var total time.Duration
		step := 50 * time.Millisecond
		if v := argVals(d, "step"); v != nil {
			step, _ = time.ParseDuration(v[0])
		}
		for _, a := range args {
			if strings.HasPrefix(a, "+") {
				total, _ = time.ParseDuration(a[1:])
			} else {
				ids = append(ids, a)
			}
		}
		for el := time.Duration(0); el < total; el += step {
			for _, id := range h.idsOr(ids) {
				n := h.node(id)
				if !n.up {
					continue
				}
				n.now = n.now.Add(step)
				n.r.Tick(n.now)
				h.ready(n)
			}
			if !d.HasArg("noheartbeats") {
				h.heartbeats()
			}
			h.stabilize(nil, d.HasArg("verbose"))
		}
		if !d.HasArg("nostatus") {
			h.status(h.order)
		}
	case "crash":
		for _, id := range args {
			n := h.node(id)
			n.up = false
			n.pending = nil
			h.queue = slices.DeleteFunc(h.queue, func(m protocol.Message) bool { return m.To == id })
		}
	case "restart":
		for _, id := range args {
			n := h.node(id)
			n.restarts++
			h.setLevels(d, n)
			h.start(n)
		}
		h.status(args)
	case "wipe":
		// The node's directory is wiped and it starts again: an empty
		// store, a new directory ID.
		for _, id := range args {
			n := h.node(id)
			n.up = false
			n.pending = nil
			h.queue = slices.DeleteFunc(h.queue, func(m protocol.Message) bool { return m.To == id })
			n.wipes++
			n.restarts++
			n.store = storage.NewMemory()
			n.cfg.DirID = fmt.Sprintf("%s~%d", id, n.wipes)
			h.start(n)
		}
		h.status(args)
	case "voters":
		// The voter set in force on each node, each voter with its
		// directory, and the offset of its entry.
		for _, id := range h.idsOr(args) {
			n := h.node(id)
			if !n.up {
				h.printf("%s: down\n", id)
				continue
			}
			if n.r.bootstrap {
				h.printf("%s: bootstrap (%s)\n", id, strings.Join(n.r.voters, ","))
				continue
			}
			var parts []string
			for _, v := range n.r.voterSet() {
				parts = append(parts, v.ID+"/"+v.DirID)
			}
			h.printf("%s: voters=(%s) at %d", id, strings.Join(parts, ","), n.r.votersOffset)
			if !n.r.voter {
				h.printf(" (not one: dir %s)", n.r.dirID)
			}
			h.printf("\n")
		}
	case "partition":
		var groups [][]string
		for _, a := range args {
			groups = append(groups, strings.Split(a, ","))
		}
		for i, g := range groups {
			for j, o := range groups {
				if i == j {
					continue
				}
				for _, a := range g {
					for _, b := range o {
						h.cut[[2]string{a, b}] = true
					}
				}
			}
		}
		h.queue = slices.DeleteFunc(h.queue, func(m protocol.Message) bool { return h.cut[[2]string{m.From, m.To}] })
	case "heal":
		clear(h.cut)
	case "resync", "silent":
		// resync n2 n1: n2's node found a quiescent message with n1 lost
		// (R100); silent n2 n1: it heard nothing from n1 for FetchTimeout
		// (R99).
		n := h.node(args[0])
		if d.Cmd == "resync" {
			n.r.Resync(args[1])
		} else {
			n.r.PeerSilent(args[1])
		}
		h.ready(n)
	case "transfer":
		// transfer n1 [to=n2]: the leader n1 starts handing over (R59).
		n := h.node(args[0])
		var to string
		if v := argVals(d, "to"); v != nil {
			to = v[0]
		}
		if err := n.r.TransferLeadership(to); err != nil {
			h.printf("%s: transfer refused: %v\n", n.id, err)
		}
		h.ready(n)
	case "hint":
		n := h.node(args[0])
		if v := argVals(d, "failed"); v != nil {
			n.r.Hint(Hint{Kind: HintNodeFailed, Node: v[0]})
		}
		if v := argVals(d, "leader"); v != nil {
			var epoch uint64
			if e := argVals(d, "epoch"); e != nil {
				epoch, _ = strconv.ParseUint(e[0], 10, 64)
			}
			n.r.Hint(Hint{Kind: HintLeader, Node: v[0], Epoch: epoch})
		}
		if v := argVals(d, "down"); v != nil {
			n.r.PeerDown(v[0]) // the transport saw v[0]'s connection close (R69)
		}
		h.ready(n)
	case "delete":
		// delete n1 before=N: the leader's DeleteBefore (R51).
		n := h.node(args[0])
		before, _ := strconv.ParseUint(argVals(d, "before")[0], 10, 64)
		start, err := n.r.DeleteBefore(before)
		h.printf("%s: log start %d%s\n", n.id, start, errOrEmpty(err))
		h.ready(n)
	case "status":
		h.status(h.idsOr(args))
	case "log":
		h.printLog(h.idsOr(args))
	case "msgs":
		for _, m := range h.queue {
			h.printf("%s\n", fmtMsg(m))
		}
	default:
		t.Fatalf("%s: unknown command %q", d.Pos, d.Cmd)
	}
	h.checkInvariants()
	return out.String()
}

func TestScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		h := newHarness(t)
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			return h.handle(t, d)
		})
	})
}
