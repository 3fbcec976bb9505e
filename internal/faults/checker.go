package faults

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// Anomaly kinds the checker reports.
//
// Retention: entries below a node's log start are gone from it by design
// (deleted once committed), so an acknowledged append or a read below a
// node's final log start is not looked for there, and a reader may skip
// the offsets below the log start a node named to it (a Reset read).
// Nothing else may be missing.
const (
	// LostWrite: an append acknowledged at offset o is missing at o, or
	// something else is there, on some node's final log that starts at or
	// below o.
	LostWrite = "lost-write"
	// InconsistentOffset: two nodes showed different entries at one
	// committed offset (in their final logs or to readers).
	InconsistentOffset = "inconsistent-offset"
	// NonMonotonicRead: a reader's offsets went back (or repeated), or
	// skipped an offset that holds a committed data entry.
	NonMonotonicRead = "non-monotonic-read"
	// UncommittedRead: a reader saw an entry that is not at that offset in
	// every node's final log.
	UncommittedRead = "uncommitted-read"
	// Duplicate: one payload at two offsets, although no append of it was
	// retried after an unknown outcome without an idempotency key: every
	// attempt carried the same Idempotency-Key (the node must append it
	// at most once: R63, R64), or none was retried after an unknown one.
	Duplicate = "duplicate"
	// DuplicateRetried: one payload at two offsets after an append
	// without an idempotency key, whose try had an unknown outcome, was
	// retried: at-least-once is all a client that does not ask for
	// deduplication gets (counted apart, tolerated).
	DuplicateRetried = "duplicate-retried"
	// FailedPresent: a payload all of whose appends failed is in the log
	// (a "failed" outcome must mean "definitely not appended").
	FailedPresent = "failed-write-present"
	// Phantom: a payload no client ever appended is in the log.
	Phantom = "phantom-write"
	// RealTimeOrder: an append invoked after another was acknowledged got
	// a lower offset (a committed entry must precede every later append).
	RealTimeOrder = "realtime-order"
	// TwoLeaders: two nodes said they led the same epoch (election
	// safety).
	TwoLeaders = "two-leaders"
	// EpochRegression: a node's epoch went down (its quorum state is
	// durable, so not even a restart may do that).
	EpochRegression = "epoch-regression"
	// HWRegression: a node's HW went down within one process lifetime, or
	// a node showed HW > LEO.
	HWRegression = "hw-regression"
	// NotConverged: after healing, a node's final log or HW differs from
	// the others' (on the offsets both still hold).
	NotConverged = "not-converged"
	// LogStartViolation: a node's log start went down (it is durable:
	// only a wiped data directory starts over), or above its LEO; a
	// leader's log start above its HW (it deletes only committed
	// entries); or a reader was reset to a log start not above the offset
	// it asked for, or above every final HW.
	LogStartViolation = "log-start"
)

// AnomalyKinds lists every kind, in report order.
var AnomalyKinds = []string{LostWrite, InconsistentOffset, NonMonotonicRead, UncommittedRead,
	Duplicate, DuplicateRetried, FailedPresent, Phantom, RealTimeOrder,
	TwoLeaders, EpochRegression, HWRegression, NotConverged, LogStartViolation}

// Anomaly is one violation found by Check, with the operations involved.
type Anomaly struct {
	Kind    string
	Offset  uint64
	Payload string
	// Ops are the appends involved (all attempts of the payload).
	Ops []Op
	// Reads are the reads involved (at most a few).
	Reads []Read
	// Detail says what was seen where.
	Detail string
}

func (a Anomaly) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s @%d", a.Kind, a.Offset)
	if a.Payload != "" {
		fmt.Fprintf(&b, " %q", a.Payload)
	}
	if a.Detail != "" {
		fmt.Fprintf(&b, ": %s", a.Detail)
	}
	for _, o := range a.Ops {
		fmt.Fprintf(&b, "\n    %v", o)
	}
	for _, r := range a.Reads {
		fmt.Fprintf(&b, "\n    %v", r)
	}
	return b.String()
}

// Result is the checker's verdict.
type Result struct {
	Anomalies []Anomaly
	// Counts counts anomalies per kind.
	Counts map[string]int
}

// Merge adds more anomalies (e.g. from CheckStatuses) to r.
func (r *Result) Merge(as []Anomaly) {
	if r.Counts == nil {
		r.Counts = map[string]int{}
	}
	for _, a := range as {
		r.Anomalies = append(r.Anomalies, a)
		r.Counts[a.Kind]++
	}
}

// Tolerated lists the kinds that are reported but are not violations of
// replog's contract: a client that retries an append whose outcome was
// unknown without an idempotency key gets at-least-once. With one (runs
// with RunConfig.Idempotent) a duplicate is the violation Duplicate.
var Tolerated = map[string]bool{DuplicateRetried: true}

// OK reports whether no anomaly other than the Tolerated kinds was found.
func (r Result) OK() bool { return r.Violations() == 0 }

// Violations counts the anomalies that are not Tolerated.
func (r Result) Violations() int {
	n := 0
	for _, a := range r.Anomalies {
		if !Tolerated[a.Kind] {
			n++
		}
	}
	return n
}

// Summary is a one-line count of every kind.
func (r Result) Summary() string {
	var parts []string
	for _, k := range AnomalyKinds {
		parts = append(parts, fmt.Sprintf("%s=%d", k, r.Counts[k]))
	}
	return strings.Join(parts, " ")
}

// Print writes the summary and up to perKind anomalies of each kind (one
// of each tolerated kind).
func (r Result) Print(w io.Writer, perKind int) {
	fmt.Fprintf(w, "anomalies: %d, violations: %d (%s)\n", len(r.Anomalies), r.Violations(), r.Summary())
	shown := map[string]int{}
	for _, a := range r.Anomalies {
		limit := perKind
		if Tolerated[a.Kind] {
			limit = min(perKind, 1)
		}
		if shown[a.Kind] >= limit {
			continue
		}
		shown[a.Kind]++
		fmt.Fprintf(w, "  %v\n", a)
	}
}

type nodeLog struct {
	node  string
	hw    uint64
	start uint64 // log start: nothing below it is looked for
	at    map[uint64]LogEntry
}

// Check looks for anomalies in a run: the client ops, the readers' reads
// (in the order each reader saw them) and the final logs of every node
// taken after the cluster was healed and quiet. Unknown-outcome appends
// may be present once or absent; acknowledged ones must be at their offset
// on every node whose log starts at or below it; failed ones must be
// absent.
func Check(ops []Op, reads []Read, finals []FinalLog) Result {
	res := Result{Counts: map[string]int{}}
	add := func(a Anomaly) {
		res.Anomalies = append(res.Anomalies, a)
		res.Counts[a.Kind]++
	}

	byPayload := map[string][]Op{}
	ackedAt := map[uint64]Op{} // the acknowledged append at each offset
	for _, o := range ops {
		byPayload[o.Payload] = append(byPayload[o.Payload], o)
		if o.Outcome == OK {
			ackedAt[o.Offset] = o
		}
	}
	logs := make([]nodeLog, len(finals))
	dataAt := map[uint64]bool{} // offsets holding a data entry on some node
	var maxHW uint64
	for off := range ackedAt {
		dataAt[off] = true // committed, wherever it went since
	}
	for i, f := range finals {
		maxHW = max(maxHW, f.HW)
		l := nodeLog{node: f.Node, hw: f.HW, start: f.LogStart, at: map[uint64]LogEntry{}}
		for _, e := range f.Entries {
			l.at[e.Offset] = e
			dataAt[e.Offset] = true
		}
		logs[i] = l
	}
	describe := func(l nodeLog, off uint64) string {
		if e, ok := l.at[off]; ok {
			return fmt.Sprintf("%s has %q", l.node, e.Payload)
		}
		if l.start > 0 {
			return fmt.Sprintf("%s has no data entry (log start %d, hw=%d)", l.node, l.start, l.hw)
		}
		if off >= l.hw {
			return fmt.Sprintf("%s has nothing (hw=%d)", l.node, l.hw)
		}
		return fmt.Sprintf("%s has no data entry", l.node)
	}

	// Convergence: every final log equals the first one.
	for _, l := range logs[min(1, len(logs)):] {
		ref := logs[0]
		if d := diffLogs(ref, l); d != "" {
			add(Anomaly{Kind: NotConverged, Detail: fmt.Sprintf("%s vs %s: %s", ref.node, l.node, d)})
		}
	}

	// Lost writes: each acknowledged append at its offset on every node
	// that still holds that offset.
	for _, o := range ops {
		if o.Outcome != OK {
			continue
		}
		var bad []string
		for _, l := range logs {
			if o.Offset < l.start {
				continue // deleted by retention
			}
			if e, ok := l.at[o.Offset]; !ok || e.Payload != o.Payload {
				bad = append(bad, describe(l, o.Offset))
			}
		}
		if len(bad) > 0 {
			add(Anomaly{Kind: LostWrite, Offset: o.Offset, Payload: o.Payload, Ops: byPayload[o.Payload],
				Detail: "acked here, but " + strings.Join(bad, "; ")})
		}
	}

	// Inconsistent offsets: per offset, which nodes showed which payload.
	type shown struct {
		nodes map[string]bool
		reads []Read
	}
	at := map[uint64]map[string]*shown{}
	see := func(off uint64, payload, node string, r *Read) {
		m := at[off]
		if m == nil {
			m = map[string]*shown{}
			at[off] = m
		}
		s := m[payload]
		if s == nil {
			s = &shown{nodes: map[string]bool{}}
			m[payload] = s
		}
		s.nodes[node] = true
		if r != nil && len(s.reads) < 3 {
			s.reads = append(s.reads, *r)
		}
	}
	for _, l := range logs {
		for off, e := range l.at {
			see(off, e.Payload, l.node, nil)
		}
	}
	for i := range reads {
		if !reads[i].Reset {
			see(reads[i].Offset, reads[i].Payload, reads[i].Node, &reads[i])
		}
	}
	for _, off := range sortedKeys(at) {
		m := at[off]
		if len(m) < 2 || !differentNodes(m, func(s *shown) map[string]bool { return s.nodes }) {
			continue
		}
		a := Anomaly{Kind: InconsistentOffset, Offset: off}
		var parts []string
		for _, p := range sortedKeys(m) {
			parts = append(parts, fmt.Sprintf("%q on %s", p, strings.Join(sortedKeys(m[p].nodes), ",")))
			a.Ops = append(a.Ops, byPayload[p]...)
			a.Reads = append(a.Reads, m[p].reads...)
		}
		a.Detail = strings.Join(parts, " vs ")
		add(a)
	}

	// Reader order and uncommitted reads.
	var readers []int
	byReader := map[int][]Read{}
	for _, r := range reads {
		if _, ok := byReader[r.Reader]; !ok {
			readers = append(readers, r.Reader)
		}
		byReader[r.Reader] = append(byReader[r.Reader], r)
	}
	sort.Ints(readers)
	for _, id := range readers {
		var next uint64
		var prev *Read
		for i, r := range byReader[id] {
			if r.Reset {
				// The node said next is below its log start r.Offset:
				// the reader may skip to it, and only to it.
				switch {
				case r.From != next || r.Offset <= r.From:
					add(Anomaly{Kind: LogStartViolation, Offset: r.Offset, Reads: []Read{r},
						Detail: fmt.Sprintf("reader at %d was reset from %d to log start %d", next, r.From, r.Offset)})
				case r.Offset > maxHW:
					add(Anomaly{Kind: LogStartViolation, Offset: r.Offset, Reads: []Read{r},
						Detail: fmt.Sprintf("%s named log start %d, above every final HW (max %d): it deleted uncommitted offsets", r.Node, r.Offset, maxHW)})
				}
				next = max(next, r.Offset)
				prev = &byReader[id][i]
				continue
			}
			switch {
			case r.Offset < next:
				a := Anomaly{Kind: NonMonotonicRead, Offset: r.Offset, Payload: r.Payload,
					Detail: fmt.Sprintf("reader went back from %d to %d", next-1, r.Offset)}
				if prev != nil {
					a.Reads = append(a.Reads, *prev)
				}
				a.Reads = append(a.Reads, r)
				add(a)
			case r.Offset > next:
				var skipped []string
				for o := next; o < r.Offset; o++ {
					if dataAt[o] {
						skipped = append(skipped, fmt.Sprint(o))
						if len(skipped) == 10 {
							skipped = append(skipped, "...")
							break
						}
					}
				}
				if len(skipped) > 0 {
					a := Anomaly{Kind: NonMonotonicRead, Offset: r.Offset, Payload: r.Payload,
						Detail: fmt.Sprintf("reader skipped committed offsets %s", strings.Join(skipped, ","))}
					if prev != nil {
						a.Reads = append(a.Reads, *prev)
					}
					a.Reads = append(a.Reads, r)
					add(a)
				}
			}
			next = max(next, r.Offset+1)
			prev = &byReader[id][i]

			// What a reader saw at an acknowledged offset is that append,
			// also where retention deleted it from every final log since.
			if o, ok := ackedAt[r.Offset]; ok && o.Payload != r.Payload {
				add(Anomaly{Kind: LostWrite, Offset: r.Offset, Payload: o.Payload, Ops: byPayload[o.Payload], Reads: []Read{r},
					Detail: fmt.Sprintf("acked here, but r%d read %q from %s", r.Reader, r.Payload, r.Node)})
			}

			var bad []string
			for _, l := range logs {
				if r.Offset < l.start {
					continue // deleted since
				}
				if e, ok := l.at[r.Offset]; !ok || e.Payload != r.Payload {
					bad = append(bad, describe(l, r.Offset))
				}
			}
			if len(bad) > 0 {
				add(Anomaly{Kind: UncommittedRead, Offset: r.Offset, Payload: r.Payload, Ops: byPayload[r.Payload],
					Reads: []Read{r}, Detail: "read, but finally " + strings.Join(bad, "; ")})
			}
		}
	}

	// Duplicates, failed-but-present and phantom payloads (in a final log
	// or read).
	// Where each payload was seen: in the final logs and by the readers
	// (committed entries too, which retention may have deleted since).
	offsetsOf := map[string]map[uint64]bool{}
	seenAt := func(payload string, off uint64) {
		if offsetsOf[payload] == nil {
			offsetsOf[payload] = map[uint64]bool{}
		}
		offsetsOf[payload][off] = true
	}
	for _, l := range logs {
		for off, e := range l.at {
			seenAt(e.Payload, off)
		}
	}
	for _, r := range reads {
		if !r.Reset {
			seenAt(r.Payload, r.Offset)
		}
	}
	for _, p := range sortedKeys(offsetsOf) {
		offs := sortedKeys(offsetsOf[p])
		pops := byPayload[p]
		if len(pops) == 0 {
			add(Anomaly{Kind: Phantom, Offset: offs[0], Payload: p, Detail: fmt.Sprintf("at offsets %v, never appended", offs)})
			continue
		}
		if len(offs) > 1 {
			kind := Duplicate
			if retriedAfterUnknown(pops) && !keyed(pops) {
				kind = DuplicateRetried
			}
			add(Anomaly{Kind: kind, Offset: offs[0], Payload: p, Ops: pops, Detail: fmt.Sprintf("at offsets %v", offs)})
		}
		allFailed := true
		for _, o := range pops {
			if o.Outcome != Failed {
				allFailed = false
			}
		}
		if allFailed {
			add(Anomaly{Kind: FailedPresent, Offset: offs[0], Payload: p, Ops: pops, Detail: fmt.Sprintf("at offsets %v", offs)})
		}
	}

	// Real-time order: sweep acknowledged appends by invocation, knowing
	// the highest offset acknowledged before each invocation. An attempt
	// answered as a duplicate names the offset an earlier attempt of its
	// payload appended at: it counts as invoked with the first attempt.
	first := map[string]time.Duration{}
	for _, o := range ops {
		if f, ok := first[o.Payload]; !ok || o.Invoke < f {
			first[o.Payload] = o.Invoke
		}
	}
	var oks []Op
	for _, o := range ops {
		if o.Outcome == OK {
			if o.Replayed {
				o.Invoke = first[o.Payload]
			}
			oks = append(oks, o)
		}
	}
	byComplete := append([]Op(nil), oks...)
	sort.Slice(byComplete, func(i, j int) bool { return byComplete[i].Complete < byComplete[j].Complete })
	sort.Slice(oks, func(i, j int) bool { return oks[i].Invoke < oks[j].Invoke })
	var highest *Op
	k := 0
	for _, b := range oks {
		for k < len(byComplete) && byComplete[k].Complete < b.Invoke {
			if highest == nil || byComplete[k].Offset > highest.Offset {
				highest = &byComplete[k]
			}
			k++
		}
		if highest != nil && b.Offset <= highest.Offset {
			add(Anomaly{Kind: RealTimeOrder, Offset: b.Offset, Payload: b.Payload, Ops: []Op{*highest, b},
				Detail: fmt.Sprintf("invoked after %q was acked at %d, yet acked at %d", highest.Payload, highest.Offset, b.Offset)})
		}
	}

	sort.SliceStable(res.Anomalies, func(i, j int) bool {
		a, b := res.Anomalies[i], res.Anomalies[j]
		if a.Kind != b.Kind {
			return kindRank(a.Kind) < kindRank(b.Kind)
		}
		return a.Offset < b.Offset
	})
	return res
}

// retriedAfterUnknown reports whether some attempt of a payload had an
// unknown outcome and a later attempt was made (a retry after a failed
// attempt must not duplicate: "failed" means "not appended").
func retriedAfterUnknown(ops []Op) bool {
	for _, o := range ops {
		if o.Outcome != Unknown {
			continue
		}
		for _, r := range ops {
			if r.Attempt > o.Attempt {
				return true
			}
		}
	}
	return false
}

// keyed reports whether every attempt of a payload carried the same
// idempotency key.
func keyed(ops []Op) bool {
	for _, o := range ops {
		if o.Key == "" || o.Key != ops[0].Key {
			return false
		}
	}
	return len(ops) > 0
}

func kindRank(k string) int {
	for i, x := range AnomalyKinds {
		if x == k {
			return i
		}
	}
	return len(AnomalyKinds)
}

// diffLogs describes the first difference between two final logs on the
// offsets both hold (from the higher log start up: retention deletes a
// prefix, and log starts may differ), "" if they are equal there.
func diffLogs(a, b nodeLog) string {
	if a.hw != b.hw {
		return fmt.Sprintf("hw %d vs %d", a.hw, b.hw)
	}
	from := max(a.start, b.start)
	if from > a.hw {
		return fmt.Sprintf("log start %d above hw %d", from, a.hw)
	}
	for _, off := range sortedKeys(a.at) {
		if off < from {
			continue
		}
		if e, ok := b.at[off]; !ok || e != a.at[off] {
			return fmt.Sprintf("first difference at offset %d", off)
		}
	}
	for _, off := range sortedKeys(b.at) {
		if _, ok := a.at[off]; !ok && off >= from {
			return fmt.Sprintf("first difference at offset %d", off)
		}
	}
	return ""
}

// differentNodes reports whether two different payloads were shown by two
// different nodes (one node showing two payloads over time is an
// uncommitted read, not an inconsistency between nodes).
func differentNodes[S any](m map[string]S, nodes func(S) map[string]bool) bool {
	keys := sortedKeys(m)
	for i, p := range keys {
		for _, q := range keys[i+1:] {
			for x := range nodes(m[p]) {
				for y := range nodes(m[q]) {
					if x != y {
						return true
					}
				}
			}
		}
	}
	return false
}

func sortedKeys[K interface{ ~string | ~uint64 }, V any](m map[K]V) []K {
	ks := make([]K, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool { return ks[i] < ks[j] })
	return ks
}

// CheckStatuses looks at the polled statuses: at most one leader per
// epoch, epochs and log starts never going down on a node (unless its
// data directory was wiped in between), HW never going down within a
// process lifetime and never above the LEO, log start never above the
// LEO, nor above the HW on a leader. Samples must be in the order they
// were taken.
func CheckStatuses(samples []StatusSample) []Anomaly {
	var out []Anomaly
	leaderOf := map[uint64]StatusSample{}
	reported := map[uint64]bool{}
	last := map[string]StatusSample{}
	for _, s := range samples {
		if s.Role == "leader" {
			if prev, ok := leaderOf[s.Epoch]; ok && prev.Node != s.Node && !reported[s.Epoch] {
				reported[s.Epoch] = true
				out = append(out, Anomaly{Kind: TwoLeaders, Offset: s.Epoch,
					Detail: fmt.Sprintf("epoch %d led by %s and %s: %v; %v", s.Epoch, prev.Node, s.Node, prev, s)})
			} else if !ok {
				leaderOf[s.Epoch] = s
			}
		}
		if s.HW > s.LEO {
			out = append(out, Anomaly{Kind: HWRegression, Offset: s.HW, Detail: fmt.Sprintf("hw above leo: %v", s)})
		}
		if s.LogStart > s.LEO {
			out = append(out, Anomaly{Kind: LogStartViolation, Offset: s.LogStart, Detail: fmt.Sprintf("log start above leo: %v", s)})
		}
		if s.Role == "leader" && s.LogStart > s.HW {
			out = append(out, Anomaly{Kind: LogStartViolation, Offset: s.LogStart, Detail: fmt.Sprintf("a leader's log start above its hw: %v", s)})
		}
		if p, ok := last[s.Node]; ok && p.Wipes == s.Wipes {
			if s.LogStart < p.LogStart {
				out = append(out, Anomaly{Kind: LogStartViolation, Offset: s.LogStart,
					Detail: fmt.Sprintf("%s: log start %d -> %d: %v; %v", s.Node, p.LogStart, s.LogStart, p, s)})
			}
			if s.Epoch < p.Epoch {
				out = append(out, Anomaly{Kind: EpochRegression, Offset: s.Epoch,
					Detail: fmt.Sprintf("%s: epoch %d -> %d: %v; %v", s.Node, p.Epoch, s.Epoch, p, s)})
			}
			if s.Incarnation == p.Incarnation && s.HW < p.HW {
				out = append(out, Anomaly{Kind: HWRegression, Offset: s.HW,
					Detail: fmt.Sprintf("%s: hw %d -> %d in one process: %v; %v", s.Node, p.HW, s.HW, p, s)})
			}
		}
		last[s.Node] = s
	}
	return out
}
